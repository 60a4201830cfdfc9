"""The small fixed patterns `to_onnx` writes for one IR node (docs/export.md), read back as
that one IR node under the name of the pattern's last value, so that `from_onnx(to_onnx(ir))`
is `ir` (docs/onnx-import.md, "Round trips"). Each reading is exact in meaning whatever file
it meets; the ones that take several ONNX nodes apart from the export's own naming
(`<node>/<suffix>` for the values and initializers a pattern adds) are recognised by that
naming only, so a file from another exporter imports node for node as before."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .import_errors import ImportRejection
from .import_static import _clamped, attribute
from .importer import Importer, Tensor

PAD_MODES = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}
"""ONNX Pad mode -> the Conv2d padding_mode it is, for a Pad read by one Conv alone."""


def patch(imp: Importer, name: str, indices: tuple[int, ...] | None = None, **attrs) -> None:
    """Replace attributes (and the provenance) of the IR node just emitted as `name`."""
    node = imp.nodes[-1]
    assert node.name == name, (node.name, name)
    source = node.source if indices is None else imp.source(indices)
    imp.nodes[-1] = dataclasses.replace(node, attrs={**node.attrs, **attrs}, source=source)


def _fixed_scalar(imp: Importer, name: str, dtype: str) -> float | None:
    value = imp.values.get(name)
    if isinstance(value, np.ndarray) and value.shape == () and \
            value.dtype == np.dtype(dtype) and np.isfinite(value):
        return float(value)
    return None


# -- elementwise: <node>/scalar, <node>/alpha, LeakyReLU as Mul then Max --------------------


def scalar_operand(imp: Importer, node) -> None:
    """An ElementwiseAffine just emitted whose constant is the export's `<node>/scalar`
    (a 0-d initializer of the node's dtype) takes it as its scalar: x * c with a 0-d c of
    the graph's dtype and x * float(c) compute the same."""
    out = node.output[0]
    made = imp.nodes[-1] if imp.nodes else None
    if made is None or made.name != out or made.op_type != "ElementwiseAffine" or \
            made.attrs["constant"] != f"{out}/scalar":
        return
    value = _fixed_scalar(imp, made.attrs["constant"], made.dtype)
    if value is not None:
        patch(imp, out, scalar=value, constant=None)


def scaled_operand(imp: Importer, i: int, node, kind: str) -> str | None:
    """`Add`/`Sub(x, k * alpha)` where `k * alpha` is the export's `Mul(k, <node>/alpha)` of
    a fixed k (folded at import): an ElementwiseAffine of k with that alpha."""
    from .import_rules import affine

    out, (a, b) = node.output[0], node.input[:2]
    p = imp.producers.get(b)
    x = imp.values.get(a)
    if p is None or not isinstance(x, Tensor) or imp.only_use(b) != i:
        return None
    mul = imp.graph.node[p]
    if mul.op_type != "Mul" or list(mul.input) != [mul.input[0], f"{out}/alpha"] or \
            not isinstance(imp.values.get(mul.input[0]), np.ndarray):
        return None
    alpha = _fixed_scalar(imp, f"{out}/alpha", x.dtype)
    if alpha is None:
        return None
    made = affine(imp, i, node, kind, x, mul.input[0], 0)
    patch(imp, out, (p, i), alpha=alpha)
    scalar_operand(imp, node)
    return made


def scaled_tensor(imp: Importer, i: int, node) -> str | None:
    """The export's `Mul(y, <node>/alpha)` read by `Add`/`Sub` `<node>` alone as its second
    operand: Add/Sub(x, y, alpha), or an ElementwiseAffine `k - alpha * y` with its alpha."""
    from .import_rules import affine

    y, value = imp.values.get(node.input[0]), node.output[0]
    j = imp.only_use(value)
    if j is None or not isinstance(y, Tensor) or len(node.input) != 2:
        return None
    user = imp.graph.node[j]
    out = user.output[0]
    if user.op_type not in ("Add", "Sub") or list(user.input) != [user.input[0], value] or \
            node.input[1] != f"{out}/alpha":
        return None
    alpha = _fixed_scalar(imp, node.input[1], y.dtype)
    other = imp.values.get(user.input[0])
    if alpha is None or not isinstance(other, (Tensor, np.ndarray)):
        return None
    if isinstance(other, Tensor):
        if len(other.shape) != len(y.shape):
            return None
        imp.emit(user.op_type, [other, y], {"alpha": alpha}, out, (i, j))
        made = user.op_type
    else:
        made = affine(imp, j, user, user.op_type.lower(), y, user.input[0], 1)
        patch(imp, out, (i, j), alpha=alpha)
        scalar_operand(imp, user)
    imp.absorb(j, i, made)
    return made


def leaky_relu_max(imp: Importer, i: int, node) -> str | None:
    """`Max(x, Mul(x, s))` with a 0-d s in (0, 1) of x's dtype, the Mul read by the Max
    alone (how the export writes a float64 LeakyReLU): max(x, s*x) is x for x >= 0 and s*x
    below, exactly LeakyReLU(s)."""
    x = imp.values.get(node.input[0])
    value = node.output[0]
    j = imp.only_use(value)
    if j is None or not isinstance(x, Tensor) or len(node.input) != 2:
        return None
    user = imp.graph.node[j]
    slope = _fixed_scalar(imp, node.input[1], x.dtype)
    if user.op_type != "Max" or sorted(user.input) != sorted([node.input[0], value]) or \
            slope is None or not 0.0 < slope < 1.0:
        return None
    imp.emit("LeakyReLU", [x], {"negative_slope": slope}, user.output[0], (i, j))
    imp.absorb(j, i, "LeakyReLU")
    return "LeakyReLU"


# -- dense layers: Transpose(W) -> MatMul -------------------------------------------------


def transposed_initializer(imp: Importer, name: str) -> str | None:
    """The fixed matrix W when `name` is the value of `Transpose(W)` (perm [1, 0]), which
    the export writes for a Linear over several per-sample axes: the layer's weight is
    then W itself, the file's own initializer, under its own name."""
    p = imp.producers.get(name)
    if p is None:
        return None
    node = imp.graph.node[p]
    source = imp.values.get(node.input[0]) if node.op_type == "Transpose" else None
    if not isinstance(source, np.ndarray) or source.ndim != 2 or \
            [int(v) for v in attribute(node, "perm", [1, 0])] != [1, 0]:
        return None
    return node.input[0]


# -- BatchNormalization with <node>/ones, <node>/zeros -----------------------------------------


def batch_norm_defaults(imp: Importer, node) -> None:
    """A BatchNorm just emitted whose scale is the export's `<node>/ones` (every element 1)
    or whose shift is `<node>/zeros` (every element +0) has none: x * 1 and x + 0 are x."""
    out = node.output[0]
    made = imp.nodes[-1]
    if made.name != out or made.op_type != "BatchNorm":
        return
    changes = {}
    for key, suffix, fill in (("weight", "ones", 1.0), ("bias", "zeros", 0.0)):
        value = imp.values.get(made.attrs[key]) if made.attrs[key] == f"{out}/{suffix}" \
            else None
        if isinstance(value, np.ndarray) and (value == fill).all() and \
                not np.signbit(value).any():
            changes[key] = None
    if changes:
        patch(imp, out, **changes)


# -- Pad of mode reflect, edge or wrap before a Conv -------------------------------------------


def mode_pad(imp: Importer, i: int, node) -> str | None:
    """A Pad of mode reflect, edge or wrap of an image's height and width, read by one Conv
    alone that pads nothing itself: that Conv's padding, with padding_mode reflect,
    replicate or circular (PyTorch's F.pad, which the Conv2d evaluator applies, pads as ONNX
    does for these modes). None for a zero Pad (the rule for those takes it)."""
    mode = attribute(node, "mode", "constant")
    if mode not in PAD_MODES:
        return None
    x = imp.tensor(node.input[0])
    pads = attribute(node, "pads")
    if pads is None and len(node.input) > 1 and node.input[1]:
        pads = imp.static_ints(node.input[1], "the pads").reshape(-1).tolist()
    pads = [int(p) for p in pads or []]
    user = imp.only_use(node.output[0])
    conv = imp.graph.node[user] if user is not None else None
    rank = len(x.shape) + imp.offset
    if conv is None or conv.op_type != "Conv" or conv.input[0] != node.output[0] or \
            rank != 4 or not imp.offset or len(pads) != 8 or min(pads) < 0 or \
            any(pads[:2]) or any(pads[4:6]) or (len(node.input) > 3 and node.input[3]) or \
            any(int(p) for p in attribute(conv, "pads", [0, 0, 0, 0])) or \
            attribute(conv, "auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise ImportRejection("onnx-pad", f"a Pad of mode {mode!r} that is not padding of an "
                              "image's height and width read by one Conv alone that pads "
                              "nothing itself")
    top, left, bottom, right = pads[2], pads[3], pads[6], pads[7]
    height, width = x.shape[1:]
    limit = {"reflect": (height - 1, width - 1), "edge": (math.inf, math.inf),
             "wrap": (height, width)}[mode]
    if max(top, bottom) > limit[0] or max(left, right) > limit[1] or \
            (mode == "edge" and (height < 1 or width < 1)):
        raise ImportRejection("onnx-pad", f"a Pad of mode {mode!r} by {pads} of a "
                              f"{height}x{width} image: wider than the image allows")
    imp.pads[node.output[0]] = (x, [top, left, bottom, right], i)
    imp.pad_modes[node.output[0]] = PAD_MODES[mode]
    imp.values[node.output[0]] = x  # read through imp.pads by the Conv after it
    return "Conv2d"


def padded_conv(imp: Importer, node) -> None:
    """A Conv2d just emitted after a Pad of another mode takes that mode."""
    mode = imp.pad_modes.get(node.input[0])
    if mode is not None:
        patch(imp, node.output[0], padding_mode=mode)


# -- outputs: the Identity named <output>/<position> --------------------------------------


def output_identity(imp: Importer, node) -> str | None:
    """The export's `Identity` named `<output>/<position>` for the graph output at that
    position (a value returned twice, or an input returned as it is): the output is the
    Identity's input itself, and the Output node is named `<output>`."""
    outputs = [o.name for o in imp.graph.output]
    value = node.output[0]
    x = imp.values.get(node.input[0]) if node.input else None
    if not isinstance(x, Tensor) or value not in outputs or imp.uses.get(value) or \
            outputs.count(value) != 1:
        return None
    prefix, _, position = value.rpartition("/")
    if not prefix or position != str(outputs.index(value)):
        return None
    imp.values[value] = x
    imp.output_name = prefix
    return "Identity"


# -- indexing: Slice -> Squeeze -> Unsqueeze, or Slice -> Reshape -----------------------------


def index_chain(imp: Importer, i: int, node) -> str | None:
    """The export's indexing pattern from this Slice: its values named `<node>/...` up to
    the last, `<node>`, which is the one GetItem or Slice they compute (docs/ir.md's
    index: an int where an axis of one element is removed, None where an axis is
    inserted, trailing whole-axis slices dropped)."""
    prefix = node.output[0].rpartition("/")[0]
    if not prefix.strip("/"):
        return None
    chain, value = [], node.output[0]
    while value != prefix:
        j = imp.only_use(value)
        if j is None or j <= (chain[-1] if chain else i) or \
                not value.startswith(prefix + "/"):
            return None
        nxt = imp.graph.node[j]
        if nxt.op_type not in ("Squeeze", "Unsqueeze", "Reshape") or nxt.input[0] != value:
            return None
        chain.append(j)
        value = nxt.output[0]
    x = imp.tensor(node.input[0])
    try:
        index = _index(imp, node, chain, x)
    except (ImportRejection, ValueError, IndexError, TypeError):
        return None
    if index is None:
        return None
    op_type = "GetItem" if index and all(isinstance(e, int) for e in index) else "Slice"
    imp.emit(op_type, [x], {"index": index}, prefix, (i, *chain))
    for j in chain:
        imp.absorb(j, i, op_type)
    return op_type


def _ints(imp: Importer, node, position: int) -> list[int]:
    return [int(v) for v in imp.static_ints(node.input[position], "an index").reshape(-1)]


def _index(imp: Importer, node, chain: list[int], x: Tensor) -> list | None:
    offset = imp.offset
    starts, ends = _ints(imp, node, 1), _ints(imp, node, 2)
    axes = _ints(imp, node, 3) if len(node.input) > 3 and node.input[3] else \
        list(range(offset, offset + len(starts)))
    steps = _ints(imp, node, 4) if len(node.input) > 4 and node.input[4] else [1] * len(starts)
    if len(set(axes)) != len(axes) or not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    ranges: dict[int, list[int]] = {}
    for start, end, axis, step in zip(starts, ends, axes, steps):
        k = axis - offset
        if not 0 <= k < len(x.shape) or step < 1:
            return None
        lo, hi, _ = _clamped(start, end, step, x.shape[k])
        ranges[k] = [lo, max(lo, hi), step]
    sliced = [len(range(*ranges[k])) if k in ranges else d for k, d in enumerate(x.shape)]
    last = max(ranges, default=-1)
    kinds = [imp.graph.node[j].op_type for j in chain]
    if kinds in (["Squeeze"], ["Unsqueeze"], ["Squeeze", "Unsqueeze"]):
        squeeze = _stage_axes(imp, chain, kinds, "Squeeze")
        unsqueeze = _stage_axes(imp, chain, kinds, "Unsqueeze")
        entries = [ranges[k][0] if k + offset in squeeze else ranges.get(k, [0, d, 1])
                   for k, d in enumerate(x.shape[:last + 1])]
        if any(k + offset in squeeze and (k not in ranges or sliced[k] != 1)
               for k in range(len(x.shape))):
            return None
        index, out = [], offset
        for entry in entries:
            while out in unsqueeze:
                index.append(None)
                out += 1
            index.append(entry)
            out += not isinstance(entry, int)
        while out in unsqueeze:
            index.append(None)
            out += 1
        expected = [d for k, d in enumerate(sliced) if k + offset not in squeeze]
        for a in sorted(unsqueeze):
            expected.insert(a - offset, 1)
    elif kinds == ["Reshape"]:
        expected = _ints(imp, imp.graph.node[chain[0]], 1)[offset:]
        index = _aligned(ranges, sliced, expected, last)
    else:
        return None
    if index is None or _index_shape(x.shape, index) != expected:
        return None
    while index and isinstance(index[-1], list) and \
            index[-1] == [0, x.shape[_axis_of(index)], 1]:
        index.pop()
    return index


def _stage_axes(imp: Importer, chain: list[int], kinds: list[str], op: str) -> set[int]:
    if op not in kinds:
        return set()
    node = imp.graph.node[chain[kinds.index(op)]]
    return set(_ints(imp, node, 1))


def _axis_of(index: list) -> int:
    """The input axis the last entry of `index` reads."""
    return sum(1 for e in index if e is not None) - 1


def _aligned(ranges: dict, sliced: list[int], target: list[int], last: int) -> list | None:
    """The index whose Slice then Reshape to `target` the verifier profile writes: axes of
    one element the reshape drops are ints, the ones it adds None, the rest kept in order."""
    index, i, j = [], 0, 0
    while i < len(sliced) or j < len(target):
        if i < len(sliced) and j < len(target) and sliced[i] == target[j]:
            if i <= last:
                index.append(ranges.get(i, [0, sliced[i], 1]))
            i, j = i + 1, j + 1
        elif i < len(sliced) and i in ranges and sliced[i] == 1:
            index.append(ranges[i][0])
            i += 1
        elif j < len(target) and target[j] == 1:
            index.append(None)
            j += 1
        else:
            return None
    return index


def _index_shape(shape: tuple[int, ...], index: list) -> list[int]:
    """The per-sample shape `index` selects from `shape` (docs/ir.md's index)."""
    out, k = [], 0
    for entry in index:
        if entry is None:
            out.append(1)
            continue
        if isinstance(entry, list):
            out.append(len(range(*entry)))
        k += 1
    return out + list(shape[k:])
