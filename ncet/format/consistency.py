"""Checking that a GraphIR means what it declares: attribute values, dtypes, and the shapes its
nodes compute at two batch sizes."""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..errors import GraphIRFormatError
from ..evaluate import EVALUATORS
from ..ir import ATTR_RULES, CONSTANT_ATTRS, INPUT_RANKS, OP_SCHEMAS, GraphIR, IRNode
from .budget import COST_RULES, ELEMENT_BYTES, Budget, check_budget, touch_cost
from .header import MAX_RANK

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64,
}
"""The dtype names a GraphIR node may declare (every graph tensor is floating point)."""

BATCH_SIZES = (1, 2)
"""The batch sizes of the check's two runs: a node whose result does not follow the batch
size (it moves the batch axis or mixes samples) gives another shape at one of them."""


MAX_INPUTS = 2**16
"""The most inputs one node (a Concat, the Output) may have: PyTorch's own calls take time per
input, so a header of a few million inputs would keep the check busy for minutes."""


def check_consistency(ir: GraphIR, budget: Budget | None = None) -> None:
    """Check every attribute and dtype, then run the graph and compare every node's result
    with what it declares.

    The attribute values are checked against `ncet.ir.ATTR_RULES`, `INPUT_RANKS` and the
    rules below that relate attributes to each other and to shapes; each node's dtype against
    the dtype PyTorch gives its op from its inputs' and constants' dtypes. Then the graph runs
    twice, in float64 at batch sizes 1 and 2: each cheap node for real, each node with large
    temporary buffers or much work on meta tensors (`REAL_SCRATCH_BYTES`, `REAL_WORK`), so
    no kernel's scratch fragments the heap and no loop over groups or windows runs long.

    Args:
        ir: A GraphIR, typically one just read from a file.
        budget: When given, the runs' memory and work are bounded first (`ncet.format.budget`),
            and a graph over the budget is refused before anything is allocated.

    Raises:
        GraphIRFormatError: An attribute value, dtype or declared shape contradicts the
            graph, a node cannot be computed from its inputs, attributes and constants, or the
            graph is over the budget. The message names the node.
    """
    for position, node in enumerate(ir.inputs):
        if node.attrs["index"] != position:
            raise GraphIRFormatError(
                f"node {node.name!r} (Input) is forward() argument {position} in graph order "
                f"but declares index {node.attrs['index']}")
    for node in ir.nodes:
        if len(node.inputs) > MAX_INPUTS:
            raise GraphIRFormatError(f"node {node.name!r:.80} ({node.op_type}) has "
                                     f"{len(node.inputs)} inputs, over the {MAX_INPUTS} limit")
        shapes = [ir.node(i).shape for i in node.inputs]
        _check_values(node, shapes)
        _check_constant_shapes(node, shapes, ir)
    _check_dtypes(ir)
    if budget is not None:
        check_budget(ir, budget, BATCH_SIZES)
    uses = collections.Counter(n for node in ir.nodes for n, _ in _constants(ir, node))
    widened = {n: None for n, count in uses.items() if count > 1}  # shared: widened once
    with torch.no_grad():
        for batch in BATCH_SIZES:
            _run(ir, batch, widened)


# --- Attribute values ----------------------------------------------------------------------


def _index_ok(index) -> bool:
    return all(e is None or (type(e) is int and e >= 0)
               or (type(e) is list and 0 <= e[0] <= e[1] and e[2] >= 1) for e in index)


# Rule name (see ncet.ir.ATTR_RULES) -> (test of a value with the rule's arguments, wording).
_RULES: dict[str, tuple[Callable[..., bool], Callable[..., str]]] = {
    "at least": (lambda v, low: v >= low, lambda low: f"an int >= {low}"),
    "ints": (lambda v, n, low: (n is None or len(v) == n) and all(x >= low for x in v),
             lambda n, low: f"a list of {'' if n is None else f'{n} '}ints >= {low}"),
    "one of": (lambda v, values: v in values, lambda values: f"one of {values}"),
    "between": (lambda v, low, high: low < v < high,
                lambda low, high: f"a number strictly between {low} and {high}"),
    "not": (lambda v, bad: v != bad, lambda bad: f"anything but {bad!r}"),
    "non-negative": (lambda v: v >= 0, lambda: "a number >= 0"),
    "axes": (lambda v: bool(v) and v[0] >= 0 and all(a < b for a, b in zip(v, v[1:])),
             lambda: "a non-empty, strictly increasing list of axes >= 0"),
    "permutation": (lambda v: sorted(v) == list(range(len(v))),
                    lambda: "the axes 0..n-1 in some order"),
    "index": (_index_ok, lambda: "a list of ints >= 0, [start, stop, step] lists with "
                                 "0 <= start <= stop and step >= 1, and nulls"),
}
assert {r[0] for rules in ATTR_RULES.values() for r in rules.values()} <= set(_RULES)


def _fits(index, shape) -> str | None:
    """Whether a GetItem/Slice index stays inside the axes it selects from (and gives a
    result of a rank a file may declare: PyTorch's indexing is quadratic in the nulls)."""
    nulls, ints = index.count(None), sum(type(e) is int for e in index)
    if len(shape) - ints + nulls > MAX_RANK:
        return (f"index of {len(index)} entries ({nulls} nulls) gives a result of rank "
                f"{len(shape) - ints + nulls}, over the {MAX_RANK} limit")
    axis = 0
    for entry in index:
        if entry is None:
            continue
        if axis == len(shape):
            return f"index {index!r:.80} selects from more axes than the input's {len(shape)}"
        stop = entry if type(entry) is int else entry[1]
        if stop > shape[axis] - (type(entry) is int):
            return (f"index entry {entry!r} is out of range for axis {axis} of size "
                    f"{shape[axis]}")
        axis += 1
    return None


def _affine(node: IRNode, shapes) -> str | None:
    a = node.attrs
    if (a["scalar"] is None) == (a["constant"] is None):
        return "exactly one of scalar and constant must be set (the other null)"
    if a["kind"] in ("mul", "div") and (a["tensor_position"], a["alpha"]) != (0, 1):
        return f"kind {a['kind']!r} takes tensor_position 0 and alpha 1 (c / x is not affine)"
    if a["kind"] == "add" and a["alpha"] == 1 and a["tensor_position"] != 0:
        return "add with alpha 1 is stored with tensor_position 0 (it is commutative)"
    if a["kind"] == "div" and a["scalar"] == 0:
        return "the divisor is zero"
    return None


def _same_rank(node: IRNode, shapes) -> str | None:
    if len({len(s) for s in shapes}) > 1:
        return (f"its inputs have per-sample ranks {[len(s) for s in shapes]}: they would "
                "broadcast across the batch axis")
    return None


def _axis_below(*names: str, last: bool = False) -> Callable[[IRNode, list], str | None]:
    """A rule: the named axis attributes (or the last of a list) are below the input's rank."""
    def rule(node: IRNode, shapes) -> str | None:
        rank = len(shapes[0])
        for name in names:
            value = node.attrs[name][-1] if last else node.attrs[name]
            if value >= rank:
                return f"{name} {node.attrs[name]!r} is out of range for per-sample rank {rank}"
        return None
    return rule


def _ordered(first: str, second: str) -> Callable[[IRNode, list], str | None]:
    def rule(node: IRNode, shapes) -> str | None:
        if node.attrs[first] > node.attrs[second]:
            return f"{first} {node.attrs[first]} comes after {second} {node.attrs[second]}"
        return _axis_below(second)(node, shapes)
    return rule


def _getitem(node: IRNode, shapes) -> str | None:
    if not node.attrs["index"] or not all(type(e) is int for e in node.attrs["index"]):
        return "a GetItem index is a non-empty list of ints (anything else is a Slice)"
    return _fits(node.attrs["index"], shapes[0])


def _slice(node: IRNode, shapes) -> str | None:
    index = node.attrs["index"]
    if index and all(type(e) is int for e in index):
        return "an index of ints only is a GetItem, not a Slice"
    return _fits(index, shapes[0])


def _output(node: IRNode, shapes) -> str | None:
    if not node.attrs["tuple"] and len(node.inputs) != 1:
        return (f"it returns {len(node.inputs)} values with tuple false, which returns one; "
                "set tuple to true to return them all")
    return None


def _permute(node: IRNode, shapes) -> str | None:
    if len(node.attrs["perm"]) != len(shapes[0]):
        return (f"perm {node.attrs['perm']!r:.80} does not have one entry per axis of the "
                f"per-sample rank {len(shapes[0])}")
    return None


def _concat(node: IRNode, shapes) -> str | None:
    return _same_rank(node, shapes) or _axis_below("axis")(node, shapes)


NODE_RULES: dict[str, Callable[[IRNode, list[tuple[int, ...]]], str | None]] = {
    "Output": _output, "ElementwiseAffine": _affine, "Add": _same_rank, "Sub": _same_rank,
    "Concat": _concat, "Flatten": _ordered("start_dim", "end_dim"),
    "Transpose": _ordered("dim0", "dim1"), "ReduceMean": _axis_below("axes", last=True),
    "Permute": _permute, "GetItem": _getitem, "Slice": _slice,
}
"""Per op_type, the rules relating its attributes to each other and to its inputs' declared
per-sample shapes: a problem, or None."""


def _check_values(node: IRNode, shapes: list) -> None:
    where = f"node {node.name!r} ({node.op_type})"
    if node.op_type == "Output" and node.dtype != "":
        raise GraphIRFormatError(f"{where}: dtype {node.dtype!r:.80} must be empty for Output")
    if node.op_type != "Output" and node.dtype not in DTYPES:
        raise GraphIRFormatError(f"{where}: dtype {node.dtype!r:.80} is not one of "
                                 f"{sorted(DTYPES)}")
    schema = OP_SCHEMAS[node.op_type][1]
    for key, (rule, *args) in ATTR_RULES.get(node.op_type, {}).items():
        value = node.attrs[key]
        test, wording = _RULES[rule]
        if value is not None and not test(value, *args):
            raise GraphIRFormatError(f"{where}: attribute {key}={value!r:.80} (kind "
                                     f"{schema[key]!r}) must be {wording(*args)}")
    ranks = INPUT_RANKS.get(node.op_type)
    if ranks is not None and len(shapes[0]) not in ranks:
        raise GraphIRFormatError(
            f"{where}: its input has per-sample rank {len(shapes[0])}, but {node.op_type} "
            f"takes rank {' or '.join(map(str, ranks)) if len(ranks) < 4 else '1 to 15'}")
    problem = NODE_RULES[node.op_type](node, shapes) if node.op_type in NODE_RULES else None
    if problem is not None:
        raise GraphIRFormatError(f"{where}: {problem}")


def _check_constant_shapes(node: IRNode, shapes: list, ir: GraphIR) -> None:
    """The constants of a layer fit its input, as PyTorch's CPU kernels require (its meta
    kernels, which the check uses for expensive nodes, skip some of these checks)."""
    if node.op_type not in ("Conv2d", "BatchNorm", "AdaptiveAvgPool2d", "Linear"):
        return
    x, a = shapes[0], node.attrs
    c = {k: tuple(ir.constants[a[k]].shape) for k in CONSTANT_ATTRS[node.op_type]
         if a[k] is not None}
    problem = None
    if node.op_type == "Conv2d" and len(x) == 3:
        w, groups = c["weight"], a["groups"]
        if len(w) != 4 or w[0] < 1 or w[0] % groups or w[1] * groups != x[0]:
            problem = (f"weight of shape {list(w)} does not fit {groups} group(s) of an input "
                       f"of {x[0]} channels")
        elif "bias" in c and c["bias"] != (w[0],):
            problem = f"bias of shape {list(c['bias'])} for {w[0]} output channels"
    elif node.op_type == "BatchNorm":
        wrong = [k for k, shape in c.items() if shape != (x[0],)]
        if wrong:
            problem = "; ".join(f"{k} has shape {list(c[k])}, not [{x[0]}] (the input's "
                                f"channels)" for k in wrong)
    elif node.op_type == "AdaptiveAvgPool2d" and 0 in x:
        problem = f"an empty input axis (per-sample shape {list(x)})"
    elif node.op_type == "Linear":
        w = c["weight"]
        if len(w) != 2 or w[1] != x[-1]:
            problem = f"weight of shape {list(w)} does not take inputs of {x[-1]} features"
        elif "bias" in c and c["bias"] != (w[0],):
            problem = f"bias of shape {list(c['bias'])} for {w[0]} outputs"
    if problem is not None:
        raise GraphIRFormatError(f"node {node.name!r:.80} ({node.op_type}): {problem}")


# --- Dtypes --------------------------------------------------------------------------------


def _one(dtype: torch.dtype, rank: int = 1) -> torch.Tensor:
    return torch.zeros((1,) * rank, dtype=dtype)


def _promoted(inputs, operands) -> torch.dtype:
    return functools.reduce(torch.promote_types, inputs)


def _affine_dtype(inputs, operands) -> torch.dtype:
    (constant,) = operands
    if constant is None:
        return inputs[0]  # a Python float never changes a floating tensor's dtype
    dtype, rank = constant
    return torch.result_type(_one(inputs[0]), _one(dtype, min(rank, 1)))


def _layer_dtype(call: Callable, rank: int) -> Callable:
    """PyTorch's own dtype rule for a layer: the op run on one-element tensors of the dtypes
    (it refuses the mixes of dtypes it does not support)."""
    def rule(inputs, operands):
        tensors = [None if o is None else _one(o[0], 1) for o in operands]
        return call(_one(inputs[0], rank), *tensors).dtype
    return rule


def _conv2d(x, w, b):
    return F.conv2d(x, w.reshape(1, 1, 1, 1), b)


def _batch_norm(x, mean, var, weight, bias):
    return F.batch_norm(x, mean, var, weight, bias, False, 0.0, 1e-5)


DTYPE_RULES: dict[str, Callable] = {
    "Add": _promoted, "Sub": _promoted, "Concat": _promoted,
    "ElementwiseAffine": _affine_dtype,
    "Linear": _layer_dtype(lambda x, w, b: F.linear(x, w.reshape(1, 1), b), 2),
    "Conv2d": _layer_dtype(_conv2d, 4),
    "BatchNorm": _layer_dtype(_batch_norm, 2),
}
"""Per op_type, the dtype of its result from its inputs' dtypes and the (dtype, rank) of each
of its constant attributes (None when null), as PyTorch computes it; every other op_type keeps
its input's dtype."""


@functools.lru_cache(maxsize=1024)
def _dtype_of(op_type: str, inputs: tuple, operands: tuple) -> torch.dtype | str:
    """The result dtype, or PyTorch's reason for refusing these dtypes."""
    if op_type not in DTYPE_RULES:
        return inputs[0]
    try:
        return DTYPE_RULES[op_type](inputs, operands)
    except RuntimeError as exc:
        return str(exc).split("\n")[0][:200]


def _check_dtypes(ir: GraphIR) -> None:
    declared = {n.name: DTYPES.get(n.dtype) for n in ir.nodes}
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        names = (node.attrs[k] for k in CONSTANT_ATTRS[node.op_type])
        operands = tuple(None if v is None else (ir.constants[v].dtype, ir.constants[v].dim())
                         for v in names)
        inputs = tuple(declared[i] for i in node.inputs)
        if node.op_type == "Concat":  # promotion sees only which dtypes occur: a small key
            inputs = tuple(dict.fromkeys(inputs))
        result = _dtype_of(node.op_type, inputs, operands)
        if result == declared[node.name]:
            continue
        given = ", ".join([f"input {i!r:.80} {_name(declared[i])}" for i in node.inputs[:8]]
                          + ([f"... ({len(node.inputs)} inputs)"] if len(node.inputs) > 8 else [])
                          + [f"constant {n!r:.80} {_name(t.dtype)}"
                             for n, t in _constants(ir, node)])
        where = f"node {node.name!r} ({node.op_type})"
        if isinstance(result, str):
            raise GraphIRFormatError(f"{where}: PyTorch cannot compute it from these dtypes "
                                     f"({given}): {result}")
        raise GraphIRFormatError(f"{where} declares dtype {node.dtype} but computes "
                                 f"{_name(result)} from {given}")


def _constants(ir: GraphIR, node: IRNode) -> list[tuple[str, torch.Tensor]]:
    names = (node.attrs[k] for k in CONSTANT_ATTRS[node.op_type])
    return [(name, ir.constants[name]) for name in names if name is not None]


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --- The runs ------------------------------------------------------------------------------


REAL_SCRATCH_BYTES = 8 * 2**10
REAL_WORK = 2**24
"""A node whose temporary buffers (`ncet.format.budget`'s estimate) or work would exceed these, or a
grouped convolution (PyTorch's CPU kernel loops over the groups), runs on meta tensors, and
its result is zeros of the shape PyTorch gives. Every other node runs for real, which is
much faster than PyTorch's meta kernels (10-500 us a node), and the buffers it frees are too
small to fragment the heap by more than a small multiple of the file."""


def _run(ir: GraphIR, batch: int, widened: dict[str, torch.Tensor | None]) -> None:
    """Run every node at `batch` and compare its result with the declared shape (`widened`:
    the constants several nodes share, in float64, made once for both runs; any other is
    widened for its node and dropped after it)."""
    env: dict[str, torch.Tensor] = {}
    shapes = {name: tuple(t.shape) for name, t in ir.constants.items()}
    for node in ir.nodes:
        if node.op_type == "Output":
            continue
        if node.op_type == "Input":
            value = _zeros((batch, *node.shape), node)
        else:
            inputs = [env[i] for i in node.inputs]
            cost = COST_RULES.get(node.op_type, touch_cost)(
                node, [tuple(x.shape) for x in inputs], shapes)
            meta = cost.scratch * ELEMENT_BYTES > REAL_SCRATCH_BYTES or cost.work > REAL_WORK \
                or (node.op_type == "Conv2d" and node.attrs["groups"] > 1)
            consts = {n: _widened(n, t, meta, widened) for n, t in _constants(ir, node)}
            try:
                value = EVALUATORS[node.op_type](
                    node, [x.to("meta") for x in inputs] if meta else inputs, consts)
            except Exception as exc:  # any failure of the op on these shapes is the file's
                again = "" if batch == BATCH_SIZES[0] else (
                    f" at batch size {batch} (it can at batch size {BATCH_SIZES[0]}: it "
                    "mixes samples)")
                raise GraphIRFormatError(
                    f"node {node.name!r} ({node.op_type}) cannot be computed from its inputs, "
                    f"attributes and constants{again}: {exc}".split("\n")[0][:400]) from None
            if meta and isinstance(value, torch.Tensor) and tuple(value.shape) == (
                    batch, *node.shape):
                value = _zeros(tuple(value.shape), node)
        _compare(node, value, batch)
        env[node.name] = value


def _widened(name: str, tensor: torch.Tensor, meta: bool, shared: dict) -> torch.Tensor:
    """A constant in float64: on meta tensors (no copy) for a node that runs there, for real
    otherwise, made once if several nodes share it."""
    if meta:
        return tensor.to(device="meta", dtype=torch.float64)
    if name not in shared:
        return tensor.to(torch.float64)
    if shared[name] is None:
        shared[name] = tensor.to(torch.float64)
    return shared[name]


def _zeros(shape: tuple[int, ...], node: IRNode) -> torch.Tensor:
    """A real float64 tensor of zeros (its size bounded by the budget, unless the caller
    raised the limits beyond what this machine can allocate)."""
    try:
        return torch.zeros(shape, dtype=torch.float64)
    except (RuntimeError, MemoryError) as exc:
        raise GraphIRFormatError(
            f"node {node.name!r:.80} ({node.op_type}): a tensor of shape {_shape_text(shape)} "
            f"cannot be allocated here ({str(exc).splitlines()[0][:120]}); the limits given "
            "to load exceed this machine, or use verify=False") from None


def _compare(node: IRNode, value, batch: int) -> None:
    where = f"node {node.name!r} ({node.op_type})"
    if not isinstance(value, torch.Tensor):
        raise GraphIRFormatError(f"{where} computes a {type(value).__name__}, not a tensor")
    shape = tuple(value.shape)
    if shape == (batch, *node.shape):
        return
    if shape[:1] != (batch,):
        raise GraphIRFormatError(
            f"{where} declares per-sample shape {list(node.shape)}, so shape "
            f"{[batch, *node.shape]} at batch size {batch}, but computes a tensor of shape "
            f"{_shape_text(shape)}, whose leading size is not the batch size: it moves, merges or "
            "mixes the batch axis")
    later = "" if batch == BATCH_SIZES[0] else (
        f" at batch size {batch} (at batch size {BATCH_SIZES[0]} it computes the declared "
        "shape: its per-sample shape depends on the batch size)")
    ranks = "" if len(shape) - 1 == len(node.shape) else \
        f" (rank {len(node.shape)} declared, {len(shape) - 1} computed)"
    raise GraphIRFormatError(f"{where} declares per-sample shape {_shape_text(node.shape)} but "
                             f"computes {_shape_text(shape[1:])}{ranks}{later}")


def _shape_text(shape, most: int = 16) -> str:
    """A shape as a list, its middle elided past `most` entries."""
    if len(shape) <= most:
        return str(list(shape))
    return f"[{', '.join(map(str, shape[:most // 2]))}, ... ({len(shape)} entries), " \
           f"{', '.join(map(str, shape[-2:]))}]"


assert len(set(BATCH_SIZES)) == 2 and min(BATCH_SIZES) >= 1
