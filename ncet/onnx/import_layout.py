"""The ONNX ops that move values without computing (reshapes, transposes, concatenation,
slicing, gathering), the graph's inputs and outputs, and the batch axis every one of them
must leave in place. ONNX axes count the batch axis (when the file has one, `offset` 1);
GraphIR's are per sample."""

from __future__ import annotations

import math

from ..ir import IRNode, Source
from .import_errors import ImportRejection
from .import_static import BATCH, attribute
from .importer import DTYPES, Importer, Tensor, batch_note

INT64_MAX = (1 << 63) - 1

MAX_SAMPLE_ELEMENTS = 1 << 28
"""The most elements one sample of a graph input may hold (1 GiB of float32): the
certificate holds several float64 copies of each value of a chunk."""


def read_inputs(imp: Importer) -> None:
    """The graph inputs that are not initializers, as Input nodes, and the batch mode."""
    from ..frontend.report import Row
    from .import_errors import IMPORT_STATUS, ONNXImportError

    fixed = {init.name for init in imp.graph.initializer}
    inputs = [v for v in imp.graph.input if v.name not in fixed]
    shapes, modes = [], []
    for index, value in enumerate(inputs):
        source = Source(value.name, "onnx", "graph input", "", "",
                        f"{imp.label} input {index}")
        try:
            dtype, dims = _input_type(value)
            mode = "symbolic" if isinstance(dims[0], str) else \
                "fixed" if len(dims) >= 2 and dims[0] == 1 else "none"
            if any(not isinstance(d, int) or d < 1 for d in dims[1:]) or \
                    (isinstance(dims[0], int) and dims[0] < 1):
                raise ImportRejection("onnx-input-shape", f"graph input {value.name!r} of "
                                      f"shape {dims}: only the first axis may be symbolic, "
                                      "and every size is 1 or more",
                                      "give every axis but the first a fixed size")
            if modes and mode != modes[0]:
                raise ImportRejection("onnx-input-shape", f"graph input {value.name!r} of "
                                      f"shape {dims} reads as batch mode {mode!r}, the first "
                                      f"input as {modes[0]!r}", "give every graph input the same "
                                      "first axis: symbolic, or 1")
            modes.append(mode)
            shapes.append(dims)
            shape = tuple(dims[1:] if mode != "none" else dims)
            if math.prod(shape) > MAX_SAMPLE_ELEMENTS:
                raise ImportRejection("onnx-input-shape", f"graph input {value.name!r} of "
                                      f"shape {dims} holds {math.prod(shape):,} elements per "
                                      f"sample, over {MAX_SAMPLE_ELEMENTS:,}",
                                      "a network of such inputs is beyond NCET's budget")
            imp.batch, imp.offset = mode, int(mode != "none")
            imp.nodes.append(IRNode(value.name, "Input", (), {"index": index}, shape, dtype,
                                    source))
            imp.values[value.name] = Tensor(value.name, shape, dtype)
            imp.input_rows.append(Row(source, "Input", "mapped", None, "", "", shape))
        except ImportRejection as rejection:
            error = ONNXImportError(rejection.code, rejection.reason, node=value.name,
                                    fx_op="onnx", spelling="graph input",
                                    hint=rejection.hint, location=source.location)
            if imp.strict:
                raise error from None
            imp.input_rows.append(Row(source, None, IMPORT_STATUS[rejection.code],
                                      rejection.code, str(error), rejection.hint, None, error))
    if modes:
        imp.notes.append(batch_note(modes[0], shapes))


def _input_type(value) -> tuple[str, list]:
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise ImportRejection("onnx-input-shape", f"graph input {value.name!r} is a {kind}, "
                              "not a tensor", "only tensor inputs are imported")
    tensor = value.type.tensor_type
    dtype = DTYPES.get(tensor.elem_type)
    if dtype is None:
        raise ImportRejection("onnx-dtype", f"graph input {value.name!r} of element type "
                              f"{tensor.elem_type}: only float32 and float64 are imported",
                              "export the network in float32 or float64")
    if not tensor.HasField("shape") or not tensor.shape.dim:
        raise ImportRejection("onnx-input-shape", f"graph input {value.name!r} has no "
                              "declared shape, or rank 0", "declare the input's shape, "
                              "e.g. with onnx.shape_inference or the exporter's input names")
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in tensor.shape.dim]
    return dtype, dims


def output_node(imp: Importer) -> IRNode:
    """The Output node: the graph outputs, each a graph tensor."""
    names = []
    for value in imp.graph.output:
        tensor = imp.values.get(value.name)
        if not isinstance(tensor, Tensor):
            raise ImportRejection("onnx-output", f"graph output {value.name!r} is fixed: it "
                                  "does not depend on the graph inputs",
                                  "leave the constant out of the file's outputs")
        names.append(tensor.name)  # an Identity read back (import_patterns) names its input
    taken = {n.name for n in imp.nodes} | set(imp.values)
    name, n = "output", 1
    while name in taken:
        name, n = f"output_{n}", n + 1
    return IRNode(name, "Output", tuple(names), {"tuple": len(names) > 1}, None, "",
                  Source(name, "onnx", "graph outputs", "", "", f"{imp.label} outputs"))


def sample_axis(imp: Importer, axis: int, rank: int, what: str) -> int:
    """An ONNX axis of a value of per-sample rank `rank`, as a per-sample axis."""
    full = rank + imp.offset
    if not -full <= axis < full:
        raise ImportRejection("onnx-attribute", f"{what} axis {axis} out of range for rank "
                              f"{full}", "check the file: onnx.checker and "
                              "onnx.shape_inference refuse it too")
    axis %= full
    if axis < imp.offset:
        raise ImportRejection("onnx-batch-axis", f"{what} on axis 0, the batch axis",
                              "GraphIR's operators act on one sample: keep the batch axis "
                              "out of the network's computation")
    return axis - imp.offset


def _reshape_to(imp: Importer, i: int, node, x: Tensor, shape: list[int]) -> str:
    imp.emit("Reshape", [x], {"shape": [int(s) for s in shape]}, node.output[0], (i,))
    return "Reshape"


def _flatten(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    rank = len(x.shape) + imp.offset
    axis = int(attribute(node, "axis", 1))
    axis = axis + rank if axis < 0 else axis
    if axis < imp.offset:
        raise ImportRejection("onnx-batch-axis", "Flatten at axis 0 merges the batch axis",
                              "flatten at axis 1 (x.flatten(1))")
    if imp.offset and axis > 1:
        raise ImportRejection("onnx-batch-axis", f"Flatten at axis {axis} merges the batch "
                              f"axis with the {axis - 1} after it",
                              "flatten at axis 1 (x.flatten(1)), or reshape to [N, ...]")
    if imp.offset and axis == 1 and x.shape:
        imp.emit("Flatten", [x], {"start_dim": 0, "end_dim": len(x.shape) - 1},
                 node.output[0], (i,))
        return "Flatten"
    k = axis - imp.offset
    shape = [math.prod(x.shape[:k]), math.prod(x.shape[k:])][imp.offset:]
    return _reshape_to(imp, i, node, x, shape)


def _reshape(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    target = imp.static_ints(node.input[1], "the shape", batch_ok=True).reshape(-1).tolist()
    allow_zero = int(attribute(node, "allowzero", 0))
    full = ([BATCH] if imp.offset else []) + list(x.shape)
    shape = [full[k] if s == 0 and not allow_zero and k < len(full) else s
             for k, s in enumerate(target)]
    if imp.offset and not shape:
        raise ImportRejection("onnx-batch-axis", "Reshape to a scalar removes the batch axis",
                              "reshape to [N, ...] with the batch size first")
    if imp.offset:
        first, rest = shape[0], shape[1:]
        numel = math.prod(x.shape)
        if first == -1 and -1 not in rest and BATCH not in rest and \
                math.prod(rest) == numel:
            first = BATCH
        if not (first == BATCH or (first == 1 and imp.batch == "fixed")):
            raise ImportRejection("onnx-batch-axis", f"Reshape to {target} does not keep the "
                                  "batch axis first", "reshape to [N, ...] (e.g. "
                                  "x.view(x.size(0), -1) or Flatten) before exporting")
        shape = rest
    if BATCH in shape:
        raise ImportRejection("onnx-batch-axis", f"Reshape to {target} moves the batch size",
                              "reshape to [N, ...] with the batch size first only")
    if shape.count(-1) == 1:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or math.prod(x.shape) % known:
            raise ImportRejection("onnx-attribute", f"Reshape to {target} does not fit",
                                  "check the file: onnxruntime refuses it too")
        shape[shape.index(-1)] = math.prod(x.shape) // known
    if any(s < 0 for s in shape) or math.prod(shape) != math.prod(x.shape):
        raise ImportRejection("onnx-attribute", f"Reshape of {list(x.shape)} per sample to "
                              f"{target}", "check the file: onnxruntime refuses it too")
    return _reshape_to(imp, i, node, x, shape)


def _axes(imp: Importer, node, position: int) -> list[int] | None:
    axes = attribute(node, "axes")
    if axes is None and len(node.input) > position and node.input[position]:
        axes = imp.static_ints(node.input[position], "the axes").reshape(-1).tolist()
    return None if axes is None else [int(a) for a in axes]


def _squeeze(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    axes = _axes(imp, node, 1)
    if axes is None:
        raise ImportRejection("onnx-attribute", "Squeeze without axes: whether the batch "
                              "axis goes depends on the batch size",
                              "give Squeeze its axes")
    drop = {sample_axis(imp, a, len(x.shape), "Squeeze") for a in axes}
    if any(x.shape[a] != 1 for a in drop):
        raise ImportRejection("onnx-attribute", "Squeeze of an axis whose size is not 1",
                              "check the file: onnxruntime refuses it too")
    return _reshape_to(imp, i, node, x, [d for k, d in enumerate(x.shape) if k not in drop])


def _unsqueeze(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    axes = _axes(imp, node, 1) or []
    rank = len(x.shape) + imp.offset + len(axes)
    if any(not -rank <= a < rank for a in axes) or len({a % rank for a in axes}) < len(axes):
        raise ImportRejection("onnx-attribute", f"Unsqueeze axes {axes} out of range for rank "
                              f"{rank}, or repeated", "check the file: onnxruntime refuses "
                              "it too")
    new = sorted(a % rank for a in axes)
    if any(a < imp.offset for a in new):
        raise ImportRejection("onnx-batch-axis", "Unsqueeze before the batch axis",
                              "keep the batch axis first")
    shape = list(x.shape)
    for a in new:
        shape.insert(a - imp.offset, 1)
    return _reshape_to(imp, i, node, x, shape)


def _transpose(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    rank = len(x.shape) + imp.offset
    perm = [int(p) for p in attribute(node, "perm", list(range(rank))[::-1])]
    if sorted(perm) != list(range(rank)) or perm[:imp.offset] != list(range(imp.offset)):
        raise ImportRejection("onnx-batch-axis", f"Transpose perm={perm} moves the batch axis",
                              "keep axis 0 in place (perm starting with 0)")
    imp.emit("Permute", [x], {"perm": [p - imp.offset for p in perm[imp.offset:]]},
             node.output[0], (i,))
    return "Permute"


def _concat(imp: Importer, i: int, node) -> str:
    if any(not isinstance(imp.values.get(n), Tensor) for n in node.input):
        raise ImportRejection("onnx-concat-constant", "Concat of a fixed tensor with graph "
                              "tensors", "concatenate graph tensors only; add a "
                              "constant block as a bias (Add) instead")
    xs = [imp.tensor(n) for n in node.input]
    axis = attribute(node, "axis")
    if axis is None:
        raise ImportRejection("onnx-attribute", "Concat without its axis",
                              "check the file: onnx.checker refuses it too")
    axis = sample_axis(imp, int(axis), len(xs[0].shape), "Concat")
    imp.emit("Concat", xs, {"axis": axis}, node.output[0], (i,))
    return "Concat"


def _slice(imp: Importer, i: int, node) -> str:
    from .import_static import _clamped

    x = imp.tensor(node.input[0])
    starts, ends = _axes_or(imp, node, 1, "starts"), _axes_or(imp, node, 2, "ends")
    if starts is None or ends is None:
        raise ImportRejection("onnx-attribute", "Slice without its starts or ends",
                              "check the file: onnx.checker refuses it too")
    axes = _axes_or(imp, node, 3, "axes") or list(range(len(starts)))
    steps = _axes_or(imp, node, 4, "steps") or [1] * len(starts)
    index = [[0, d, 1] for d in x.shape]
    last = -1
    for start, end, axis, step in zip(starts, ends, axes, steps):
        rank = len(x.shape) + imp.offset
        if not -rank <= axis < rank:
            raise ImportRejection("onnx-attribute", f"Slice axis {axis} out of range for "
                                  f"rank {rank}", "check the file: onnxruntime refuses it too")
        axis %= rank
        if step < 1:
            raise ImportRejection("onnx-indexing", f"Slice with step {step}",
                                  "slice with a positive step; flip with a fixed permutation "
                                  "(Gather of an increasing run) instead")
        if axis < imp.offset:
            if start != 0 or step != 1 or \
                    end < (INT64_MAX >> 1 if imp.batch == "symbolic" else 1):
                raise ImportRejection("onnx-batch-axis", "Slice of the batch axis",
                                      "slice axis 0 whole (0 to INT64_MAX) or not at all")
            continue
        k = axis - imp.offset
        lo, hi, _ = _clamped(start, end, step, x.shape[k])
        index[k] = [lo, max(lo, hi), step]
        last = max(last, k)
    imp.emit("Slice", [x], {"index": index[:last + 1]}, node.output[0], (i,))
    return "Slice"


def _axes_or(imp: Importer, node, position: int, name: str) -> list[int] | None:
    value = attribute(node, name)
    if value is None and len(node.input) > position and node.input[position]:
        value = imp.static_ints(node.input[position], name).reshape(-1).tolist()
    return None if value is None else [int(v) for v in value]


def _gather(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    indices = imp.static_ints(node.input[1], "the indices")
    k = sample_axis(imp, int(attribute(node, "axis", 0)), len(x.shape), "Gather")
    size = x.shape[k]
    flat = [int(v) + size if int(v) < 0 else int(v) for v in indices.reshape(-1).tolist()]
    if not flat:
        raise ImportRejection("onnx-indexing", "Gather of no index: an empty tensor",
                              "leave the empty Gather out of the network")
    if any(not 0 <= v < size for v in flat):
        raise ImportRejection("onnx-indexing", f"Gather index out of range for size {size}",
                              "check the file: onnxruntime refuses it too")
    index: list = [[0, d, 1] for d in x.shape[:k]]
    if indices.ndim == 0:
        imp.emit("GetItem", [x], {"index": [*index, flat[0]]}, node.output[0], (i,))
        return "GetItem"
    step = flat[1] - flat[0] if len(flat) > 1 else 1
    if indices.ndim != 1 or step < 1 or flat != list(range(flat[0], flat[-1] + 1, step)):
        raise ImportRejection("onnx-indexing", f"Gather of indices {flat[:8]}: only one "
                              "index or an evenly spaced increasing run is a slice",
                              "index with one value or a slice (start:stop:step)")
    imp.emit("Slice", [x], {"index": [*index, [flat[0], flat[-1] + 1, step]]},
             node.output[0], (i,))
    return "Slice"


def _reduce_mean(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    axes = _axes(imp, node, 1)
    if not axes:
        raise ImportRejection("onnx-batch-axis", "ReduceMean over every axis, the batch "
                              "axis included", "give ReduceMean its axes, "
                              "all after axis 0")
    sample = sorted({sample_axis(imp, a, len(x.shape), "ReduceMean") for a in axes})
    imp.emit("ReduceMean", [x], {"axes": sample, "keepdim": bool(attribute(node, "keepdims",
                                                                           1))},
             node.output[0], (i,))
    return "ReduceMean"


LAYOUT_RULES = {
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Transpose": _transpose,
    "Concat": _concat,
    "Slice": _slice,
    "Gather": _gather,
    "ReduceMean": _reduce_mean,
}
"""ONNX op type -> the rule mapping it onto a canonical layout operator."""

