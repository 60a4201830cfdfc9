"""The canonical profile: the ONNX node (or small fixed pattern) of every op_type.

One function per op_type; each writes its ONNX nodes through the GraphBuilder, the last one
producing the value named after the IR node, and refuses what ONNX cannot say exactly.
docs/export.md is the table of these patterns.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ir import IRNode
from .builder import GraphBuilder, refuse

Pattern = Callable[[GraphBuilder, IRNode, tuple[str, ...]], None]


def _is_float32(value: float) -> bool:
    return float(np.float32(value)) == value


def _linear(b, node, xs):
    a = node.attrs
    rank = len(b.ir.node(node.inputs[0]).shape)
    bias = [] if a["bias"] is None else [a["bias"]]
    if rank == 1:
        b.node("Gemm", [xs[0], a["weight"], *bias], node.name, transB=1)
        return
    weight_t = b.node("Transpose", [a["weight"]], perm=[1, 0])
    if not bias:
        b.node("MatMul", [xs[0], weight_t], node.name)
        return
    b.node("Add", [b.node("MatMul", [xs[0], weight_t]), *bias], node.name)


PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _conv2d(b, node, xs):
    a = node.attrs
    top, bottom, left, right = a["padding"]
    weight = b.ir.constants[a["weight"]]
    x = xs[0]
    pads = [top, left, bottom, right]
    if a["padding_mode"] != "zeros":
        if a["padding_mode"] == "circular" and b.opset < 19:
            raise refuse(node, "circular padding needs Pad mode 'wrap', opset 19 or later")
        x = b.node("Pad", [x, b.ints("pads", [0, 0, top, left, 0, 0, bottom, right])],
                   mode=PAD_MODES[a["padding_mode"]])
        pads = [0, 0, 0, 0]
    bias = [] if a["bias"] is None else [a["bias"]]
    b.node("Conv", [x, a["weight"], *bias], node.name, kernel_shape=list(weight.shape[2:]),
           strides=list(a["stride"]), pads=pads, dilations=list(a["dilation"]),
           group=a["groups"])


def _batch_norm(b, node, xs):
    a = node.attrs
    if node.dtype != "float32" and not _is_float32(a["eps"]):
        raise refuse(node, f"eps={a['eps']!r} is not a float32 value, and ONNX "
                           "BatchNormalization's epsilon is a float32 attribute")
    channels = b.ir.constants[a["mean"]].shape[0]
    weight = a["weight"] or b.scalar_vector("ones", 1.0, channels, node.dtype)
    bias = a["bias"] or b.scalar_vector("zeros", 0.0, channels, node.dtype)
    b.node("BatchNormalization", [xs[0], weight, bias, a["mean"], a["var"]], node.name,
           epsilon=float(a["eps"]))  # an int eps is a FLOAT attribute too


def _adaptive_avg_pool2d(b, node, xs):
    _, height, width = b.ir.node(node.inputs[0]).shape
    oh, ow = node.attrs["output_size"]
    if (oh, ow) == (1, 1):
        b.node("GlobalAveragePool", xs, node.name)
        return
    if oh == 0 or ow == 0 or height % oh or width % ow:
        raise refuse(node, f"adaptive windows of {height}x{width} to {oh}x{ow} are not all "
                           "the same size, which no ONNX pooling node expresses")
    kernel = [height // oh, width // ow]
    b.node("AveragePool", xs, node.name, kernel_shape=kernel, strides=kernel)


def _pool_output(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil: bool):
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    return (math.ceil(span / stride) if ceil else span // stride) + 1


def check_pool_shape(b, node, dilation):
    """ONNX's ceil_mode output size has no PyTorch's rule that the last window starts inside
    the input; where they differ the node is refused."""
    a = node.attrs
    _, height, width = b.ir.node(node.inputs[0]).shape
    expected = tuple(_pool_output(s, k, st, p, d, a["ceil_mode"]) for s, k, st, p, d in zip(
        (height, width), a["kernel_size"], a["stride"], a["padding"], dilation))
    if expected != tuple(node.shape[1:]):
        raise refuse(node, f"ONNX's pooling output size {list(expected)} differs from "
                           f"PyTorch's {list(node.shape[1:])} (ceil_mode's last window)")


def _avg_pool2d(b, node, xs):
    a = node.attrs
    if a["divisor_override"] is not None:
        raise refuse(node, "divisor_override has no ONNX AveragePool attribute")
    if a["ceil_mode"] and a["count_include_pad"] and any(a["padding"]):
        raise refuse(node, "ceil_mode with count_include_pad and padding: PyTorch and ONNX "
                           "count the windows that run past the padding differently")
    check_pool_shape(b, node, (1, 1))
    ph, pw = a["padding"]
    b.node("AveragePool", xs, node.name, kernel_shape=list(a["kernel_size"]),
           strides=list(a["stride"]), pads=[ph, pw, ph, pw], ceil_mode=int(a["ceil_mode"]),
           count_include_pad=int(a["count_include_pad"]))


def _max_pool2d(b, node, xs):
    a = node.attrs
    check_pool_shape(b, node, a["dilation"])
    ph, pw = a["padding"]
    b.node("MaxPool", xs, node.name, kernel_shape=list(a["kernel_size"]),
           strides=list(a["stride"]), pads=[ph, pw, ph, pw], dilations=list(a["dilation"]),
           ceil_mode=int(a["ceil_mode"]))


def _leaky_relu(b, node, xs):
    slope = node.attrs["negative_slope"]
    if node.dtype == "float32":
        b.node("LeakyRelu", xs, node.name, alpha=float(slope))
        return
    # max(x, slope * x) is x for x >= 0 and slope * x below, slope in (0, 1): exact, with the
    # slope at full precision (LeakyRelu's alpha is float32).
    scaled = b.node("Mul", [xs[0], b.scalar("negative_slope", slope, node.dtype)])
    b.node("Max", [xs[0], scaled], node.name)


def _flatten(b, node, xs):
    rank = len(b.ir.node(node.inputs[0]).shape)
    a = node.attrs
    if rank >= 1 and a["start_dim"] == 0 and a["end_dim"] == rank - 1:
        b.node("Flatten", xs, node.name, axis=1)
    else:
        reshape_to(b, node, xs[0], node.shape)


def reshape_to(b, node, x, shape):
    """A Reshape of `x` to the per-sample `shape` producing the node's value: the batch axis
    copied (0) when symbolic, written out when fixed."""
    if b.batch is None:
        if 0 in shape:
            raise refuse(node, "a reshape to an empty shape cannot keep a symbolic batch "
                               "(Reshape's 0 copies a dimension); export with batch=N")
        b.node("Reshape", [x, b.ints("shape", [0, *shape])], node.name)
    else:
        b.node("Reshape", [x, b.ints("shape", [b.batch, *shape])], node.name,
               allowzero=int(0 in shape))


def _binary(op):
    def pattern(b, node, xs):
        lhs, rhs = xs
        if node.attrs["alpha"] != 1.0:
            rhs = b.node("Mul", [rhs, b.scalar("alpha", node.attrs["alpha"], node.dtype)])
        b.node(op, [lhs, rhs], node.name)
    return pattern


def _affine(b, node, xs):
    a = node.attrs
    if a["constant"] is None:
        k = b.scalar("scalar", a["scalar"], node.dtype)
    else:  # of the node's dtype: to_onnx's _check_dtypes refuses any other first
        k = a["constant"]
    if a["kind"] in ("mul", "div"):
        b.node("Mul" if a["kind"] == "mul" else "Div", [xs[0], k], node.name)
        return
    lhs, rhs = (xs[0], k) if a["tensor_position"] == 0 else (k, xs[0])
    if a["alpha"] != 1.0:
        rhs = b.node("Mul", [rhs, b.scalar("alpha", a["alpha"], node.dtype)])
    b.node("Add" if a["kind"] == "add" else "Sub", [lhs, rhs], node.name)


def _index(b, node, xs):
    starts, ends, axes, steps, squeeze, unsqueeze = [], [], [], [], [], []
    axis, out_axis = 1, 1
    for entry in node.attrs["index"]:
        if entry is None:
            unsqueeze.append(out_axis)
            out_axis += 1
            continue
        start, stop, step = (entry, entry + 1, 1) if isinstance(entry, int) else entry
        starts.append(start), ends.append(stop), axes.append(axis), steps.append(step)
        if isinstance(entry, int):
            squeeze.append(axis)
        else:
            out_axis += 1
        axis += 1
    stages = [bool(axes), bool(squeeze), bool(unsqueeze)]
    x = xs[0]
    if not any(stages):
        b.node("Identity", [x], node.name)
        return

    def last(stage):  # the pattern's final node carries the IR node's name
        return node.name if not any(stages[stage + 1:]) else None

    if axes:
        x = b.node("Slice", [x, b.ints("starts", starts), b.ints("ends", ends),
                             b.ints("axes", axes), b.ints("steps", steps)], last(0))
    if squeeze:
        x = b.node("Squeeze", [x, b.ints("squeeze_axes", squeeze)], last(1))
    if unsqueeze:
        b.node("Unsqueeze", [x, b.ints("unsqueeze_axes", unsqueeze)], node.name)


def _transpose(b, node, xs):
    rank = len(node.shape)
    perm = list(range(rank))
    d0, d1 = node.attrs["dim0"], node.attrs["dim1"]
    perm[d0], perm[d1] = perm[d1], perm[d0]
    b.node("Transpose", xs, node.name, perm=[0, *(p + 1 for p in perm)])


PATTERNS: dict[str, Pattern] = {
    "Linear": _linear,
    "Conv2d": _conv2d,
    "BatchNorm": _batch_norm,
    "AdaptiveAvgPool2d": _adaptive_avg_pool2d,
    "AvgPool2d": _avg_pool2d,
    "MaxPool2d": _max_pool2d,
    "Identity": lambda b, n, xs: b.node("Identity", xs, n.name),
    "ReLU": lambda b, n, xs: b.node("Relu", xs, n.name),
    "LeakyReLU": _leaky_relu,
    "Flatten": _flatten,
    "Add": _binary("Add"),
    "Sub": _binary("Sub"),
    "ElementwiseAffine": _affine,
    "Concat": lambda b, n, xs: b.node("Concat", xs, n.name, axis=n.attrs["axis"] + 1),
    "ReduceMean": lambda b, n, xs: b.node(
        "ReduceMean", [xs[0], b.ints("axes", [a + 1 for a in n.attrs["axes"]])], n.name,
        keepdims=int(n.attrs["keepdim"])),
    "Reshape": lambda b, n, xs: reshape_to(b, n, xs[0], n.shape),
    "Permute": lambda b, n, xs: b.node("Transpose", xs, n.name,
                                       perm=[0, *(p + 1 for p in n.attrs["perm"])]),
    "Transpose": _transpose,
    "GetItem": _index,
    "Slice": _index,
}
"""The canonical profile's pattern of every operator op_type (Input and Output are the
graph's inputs and outputs)."""
