"""The rules a GraphIR's attributes, constants and dtypes obey beyond their kinds, checked
node by node from the declared shapes before anything runs.

`check_rules` is the first part of `ncet.load`'s meaning check
(`ncet.format.consistency.check_consistency`): each Input's index against its place in the
graph, each node's number of inputs (`MAX_INPUTS`), its attribute values against
`ncet.ir.ATTR_RULES`, `INPUT_RANKS` and `NODE_RULES` (the rules that relate attributes to each
other and to the inputs' declared shapes), a layer's constants' shapes against its input, and
every dtype against the one PyTorch gives the op (`DTYPE_RULES`). Nothing here allocates more
than one-element tensors: the runs of the graph are in `ncet.format.consistency`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..errors import GraphIRFormatError
from ..ir import ATTR_RULES, CONSTANT_ATTRS, INPUT_RANKS, OP_SCHEMAS, GraphIR, IRNode
from .header import MAX_RANK

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64,
}
"""The dtype names a GraphIR node may declare (every graph tensor is floating point)."""

MAX_INPUTS = 2**16
"""The most inputs one node (a Concat, the Output) may have: PyTorch's own calls take time per
input, so a header of a few million inputs would keep the check busy for minutes."""


def check_rules(ir: GraphIR) -> None:
    """Check every Input's index, every node's number of inputs, attribute values and
    constants' shapes, then every node's dtype.

    Raises:
        GraphIRFormatError: A value contradicts its rule, the graph or PyTorch's dtype rule
            for the op. The message names the node.
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
    cut = [k for k in ("cut", "stop_at", "cut_trailing") if k in node.attrs]
    if cut and ("cut" not in cut or "cut_trailing" not in cut):
        return (f"it carries {cut} of a cut: a cut is declared by cut (the nodes left out) "
                "with cut_trailing (and stop_at, when given), the arguments that made it")
    if "cut" in cut and "stop_at" not in cut and node.attrs["cut_trailing"] is not True:
        return "it declares a cut made by neither stop_at nor cut_trailing"
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
                             for n, t in constants_of(ir, node)])
        where = f"node {node.name!r} ({node.op_type})"
        if isinstance(result, str):
            raise GraphIRFormatError(f"{where}: PyTorch cannot compute it from these dtypes "
                                     f"({given}): {result}")
        raise GraphIRFormatError(f"{where} declares dtype {node.dtype} but computes "
                                 f"{_name(result)} from {given}")


def constants_of(ir: GraphIR, node: IRNode) -> list[tuple[str, torch.Tensor]]:
    """The (name, tensor) of each constant a node names (its null constant attributes left out)."""
    names = (node.attrs[k] for k in CONSTANT_ATTRS[node.op_type])
    return [(name, ir.constants[name]) for name in names if name is not None]


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
