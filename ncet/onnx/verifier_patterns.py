"""The verifier profile's patterns: the op_types it writes otherwise than the canonical one.

With the batch fixed to 1 every shape is static, so flattening is `Flatten(axis=1)`, other
reshapes are a `Reshape` to `[1, *shape]`, dense layers are `Gemm(transB=1)` only, and
indexing is `Slice` then a static `Reshape` instead of Squeeze/Unsqueeze. docs/export.md
("The verifier profile") is the table of these differences.
"""

from __future__ import annotations

import numpy as np

from .builder import refuse
from .patterns import PATTERNS, Pattern, check_pool_shape, reshape_to


def _linear(b, node, xs):
    a = node.attrs
    rank = len(b.ir.node(node.inputs[0]).shape)
    if rank != 1:
        raise refuse(node, f"its input has {rank} per-sample axes, and ONNX Gemm multiplies "
                           "2-d inputs only (the rest would need MatMul, outside the verifier "
                           "profile); flatten the input first, or export with "
                           "profile='canonical'")
    # No bias: Gemm(x, W) with C omitted, not a zero bias (x @ W.T + 0 turns -0 into +0, and
    # would add a constant the GraphIR does not have).
    bias = [] if a["bias"] is None else [a["bias"]]
    b.node("Gemm", [xs[0], a["weight"], *bias], node.name, transB=1)


def _to_shape(b, node, xs):
    """Flatten and Reshape: to one per-sample axis is `Flatten(axis=1)` (the element count
    fixes its length), anything else a `Reshape` to the static shape `[1, *shape]`."""
    if len(node.shape) == 1:
        b.node("Flatten", xs, node.name, axis=1)
    else:
        reshape_to(b, node, xs[0], node.shape)


def _leaky_relu(b, node, xs):
    slope = node.attrs["negative_slope"]
    if node.dtype != "float32" and float(np.float32(slope)) != slope:
        raise refuse(node, f"negative_slope={slope!r} is not a float32 value, and LeakyRelu's "
                           "alpha is a float32 attribute; use a slope that is one (0.125, "
                           "0.25), or export with profile='canonical' (Mul then Max)")
    b.node("LeakyRelu", xs, node.name, alpha=float(slope))


def _avg_pool2d(b, node, xs):
    """Without padding, `AveragePool` with no `pads` and no `count_include_pad`: no window
    covers padding, so the two counts are the same (with ceil_mode, a last window cut short
    by the input's edge is divided by the elements it covers either way, in PyTorch and in
    ONNX), and the attributes that onnx2pytorch (alpha-beta-CROWN's importer) refuses or
    mis-reads are not written. With padding, as the canonical profile writes it."""
    a = node.attrs
    if any(a["padding"]) or a["divisor_override"] is not None:
        PATTERNS["AvgPool2d"](b, node, xs)
        return
    ceil = {"ceil_mode": 1} if a["ceil_mode"] else {}
    check_pool_shape(b, node, (1, 1))
    b.node("AveragePool", xs, node.name, kernel_shape=list(a["kernel_size"]),
           strides=list(a["stride"]), **ceil)


def _index(b, node, xs):
    starts, ends, axes, steps = [], [], [], []
    axis = 1
    for entry in node.attrs["index"]:
        if entry is None:
            continue
        start, stop, step = (entry, entry + 1, 1) if isinstance(entry, int) else entry
        starts.append(start), ends.append(stop), axes.append(axis), steps.append(step)
        axis += 1
    x = xs[0]
    sliced = list(b.ir.node(node.inputs[0]).shape)
    for i, start, stop, step in zip(axes, starts, ends, steps):
        sliced[i - 1] = len(range(start, stop, step))
    reshape = tuple(sliced) != tuple(node.shape)  # an int removed an axis, a None added one
    if not axes and not reshape:
        b.node("Identity", [x], node.name)
        return
    if axes:
        x = b.node("Slice", [x, b.ints("starts", starts), b.ints("ends", ends),
                             b.ints("axes", axes), b.ints("steps", steps)],
                   None if reshape else node.name)
    if reshape:
        reshape_to(b, node, x, node.shape)


VERIFIER_PATTERNS: dict[str, Pattern] = {
    "Linear": _linear,
    "LeakyReLU": _leaky_relu,
    "AvgPool2d": _avg_pool2d,
    "Flatten": _to_shape,
    "Reshape": _to_shape,
    "GetItem": _index,
    "Slice": _index,
}
"""The verifier profile's overrides of the canonical PATTERNS."""
