"""Fixed values of an ONNX graph, folded at import: initializers, Constant nodes, and the
shape arithmetic exporters write around them (`Shape -> Gather -> Unsqueeze -> Concat ->
Reshape` for `x.view(x.size(0), -1)`). Each rule computes in numpy exactly what the op
defines: layout ops move values without changing a bit, integer arithmetic is exact, and a
float operation is one correctly rounded IEEE operation in the value's own dtype, as
onnxruntime's elementwise kernels compute it. The batch size, unknown while importing, is
the marker `BATCH` inside a shape; anything but moving it around refuses."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from .import_errors import ImportRejection

BATCH = np.int64(-(1 << 62) + 1)
"""Stands for the (symbolic) batch size inside a folded shape: Shape of a graph tensor puts
it first. Gather, Slice, Concat, Unsqueeze, Squeeze, Reshape, Identity, Where and a Cast
to int64 move it as a value; any arithmetic or comparison on it refuses
(`onnx-static-computation`)."""

Rule = Callable[[dict, Sequence["np.ndarray | None"]], np.ndarray]


def attribute(node, name: str, default=None):
    """The value of attribute `name` of an ONNX node (ints, floats, a string decoded as
    UTF-8, a tensor as a numpy array), or `default` when absent."""
    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            if isinstance(value, bytes):
                return value.decode("utf-8", "replace")
            if isinstance(value, TensorProto):
                return numpy_helper.to_array(value)
            return value
    return default


def _fixed(value: np.ndarray, what: str) -> np.ndarray:
    if value.dtype.kind in "iu" and (value == BATCH).any():
        raise ImportRejection("onnx-static-computation",
                              f"{what} of the batch size, which is not known at import",
                              "compute shapes from fixed sizes (x.view(x.size(0), -1) only "
                              "moves the batch size, which NCET follows)")
    return value


def _axes(node, inputs, position: int, name: str = "axes") -> list[int] | None:
    """Axes given as an attribute (older opsets) or as the input at `position` (newer)."""
    value = attribute(node, name)
    if value is None and len(inputs) > position and inputs[position] is not None:
        value = _fixed(np.asarray(inputs[position]), name).reshape(-1).tolist()
    return None if value is None else [int(v) for v in value]


def _gather(node, xs):
    data, indices = xs[0], np.asarray(xs[1])
    axis = int(attribute(node, "axis", 0))
    return np.take(data, indices.astype(np.int64), axis=axis)


def _unsqueeze(node, xs):
    out = np.asarray(xs[0])
    axes = _axes(node, xs, 1)
    rank = out.ndim + len(axes)
    for axis in sorted(a % rank for a in axes):
        out = np.expand_dims(out, axis)
    return out


def _squeeze(node, xs):
    axes = _axes(node, xs, 1)
    data = np.asarray(xs[0])
    return np.squeeze(data, axis=None if axes is None else tuple(a % data.ndim for a in axes))


def _slice(node, xs):
    data = np.asarray(xs[0])
    starts = _axes(node, xs, 1, "starts")
    ends = _axes(node, xs, 2, "ends")
    axes = _axes(node, xs, 3) or list(range(len(starts)))
    steps = _axes(node, xs, 4, "steps") or [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[axis % data.ndim] = slice(*_clamped(start, end, step, data.shape[axis % data.ndim]))
    return data[tuple(index)]


def _clamped(start: int, end: int, step: int, size: int) -> tuple[int, int | None, int]:
    """ONNX Slice's start, end and step on an axis of `size`, as a Python slice (ONNX clamps
    out-of-range starts and ends, and INT64_MAX / INT64_MIN mean 'to the end')."""
    if step == 0:
        raise ImportRejection("onnx-indexing", "a Slice step of 0",
                              "check the file: onnxruntime refuses it too")
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    if step > 0:
        return min(max(start, 0), size), min(max(end, 0), size), step
    start = min(max(start, 0), size - 1)  # ONNX clamps a negative step's start to [0, size-1]
    end = min(max(end, -1), size - 1)
    return start, (None if end < 0 else end), step


def _reshape(node, xs):
    data, shape = np.asarray(xs[0]), _fixed(np.asarray(xs[1]), "a reshape").tolist()
    allow_zero = int(attribute(node, "allowzero", 0))
    shape = [data.shape[i] if s == 0 and not allow_zero else s for i, s in enumerate(shape)]
    return data.reshape(shape)


def _cast(node, xs):
    to = helper.tensor_dtype_to_np_dtype(int(attribute(node, "to")))
    data = np.asarray(xs[0])
    if data.dtype.kind in "iu" and (data == BATCH).any() and np.dtype(to) != np.int64:
        raise ImportRejection("onnx-static-computation", f"a Cast of the batch size to "
                              f"{np.dtype(to)}: NCET holds the batch size, unknown at import, "
                              "as an int64 stand-in", "keep shape arithmetic in int64")
    return data.astype(to)


def _constant_of_shape(node, xs):
    shape = _fixed(np.asarray(xs[0]), "a ConstantOfShape").tolist()
    value = attribute(node, "value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(shape, fill[0], dtype=fill.dtype)


def _arithmetic(op: Callable) -> Rule:
    def rule(node, xs):
        a, b = (_fixed(np.asarray(x), f"a {node.op_type}") for x in xs[:2])
        if a.dtype != b.dtype:
            raise ImportRejection("onnx-static-computation",
                                  f"{node.op_type} of a {a.dtype} and a {b.dtype} value",
                                  "check the file: onnx.checker refuses it too")
        with np.errstate(all="ignore"):
            return np.asarray(op(a, b)).astype(a.dtype)
    return rule


def _integer_division(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind not in "iu":
        return a / b
    if (b == 0).any():
        raise ImportRejection("onnx-static-computation", "an integer division by zero",
                              "check the file: onnxruntime fails on it too")
    quotient = np.abs(a) // np.abs(b)  # ONNX truncates toward zero, numpy's // floors
    return np.where((a < 0) != (b < 0), -quotient, quotient)


def _where(node, xs):
    condition = np.asarray(xs[0])
    if condition.dtype != np.bool_:
        raise ImportRejection("onnx-static-computation", "a Where whose condition is not bool",
                              "check the file: onnx.checker refuses it too")
    return np.where(condition, np.asarray(xs[1]), np.asarray(xs[2]))


def _expand(node, xs):
    data = np.asarray(xs[0])
    shape = _fixed(np.asarray(xs[1]), "an Expand").reshape(-1).tolist()
    return np.broadcast_to(data, np.broadcast_shapes(data.shape, tuple(shape))).copy()


STATIC_RULES: dict[str, Rule] = {
    "Identity": lambda node, xs: np.asarray(xs[0]),
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda node, xs: np.concatenate([np.atleast_1d(x) for x in xs],
                                              axis=int(attribute(node, "axis"))),
    "Slice": _slice,
    "Reshape": _reshape,
    "Flatten": lambda node, xs: np.asarray(xs[0]).reshape(
        int(np.prod(np.shape(xs[0])[:int(attribute(node, "axis", 1))])), -1),
    "Transpose": lambda node, xs: np.transpose(np.asarray(xs[0]), attribute(node, "perm")),
    "Cast": _cast,
    "ConstantOfShape": _constant_of_shape,
    "Neg": lambda node, xs: -_fixed(np.asarray(xs[0]), "a Neg"),
    "Add": _arithmetic(np.add),
    "Sub": _arithmetic(np.subtract),
    "Mul": _arithmetic(np.multiply),
    "Div": _arithmetic(_integer_division),
    "Equal": lambda node, xs: np.equal(*(_fixed(np.asarray(x), "an Equal") for x in xs[:2])),
    "Where": _where,
    "Expand": _expand,
}
"""ONNX op type -> its value on fixed inputs, computed at import (one function each)."""


def fold(node, inputs: Sequence[np.ndarray | None]) -> np.ndarray:
    """The value of `node` on fixed `inputs`.

    Raises:
        ImportRejection: `onnx-static-computation` for an op NCET does not fold, or an
            operation on the batch size.
    """
    rule = STATIC_RULES.get(node.op_type)
    if rule is None:
        raise ImportRejection("onnx-static-computation",
                              f"{node.op_type} computes on fixed values only, and NCET "
                              "does not fold it",
                              "fold it into the file (e.g. onnxsim), then import again")
    try:
        return rule(node, list(inputs))
    except ImportRejection:
        raise
    except (ValueError, IndexError, TypeError) as exc:
        raise ImportRejection("onnx-static-computation",
                              f"{node.op_type} on fixed values fails: {exc}",
                              "check the file: onnxruntime refuses it too") from None
