"""The passes that need no new weights: Identity and moves that change nothing removed,
chains of Reshape and Flatten collapsed into one Reshape, and chains of ElementwiseAffine
by constants merged into one."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..ir import GraphIR, IRNode
from .carried import Carried, register
from .folds import apply_everywhere
from .graph_edits import OUTPUT, constant_name, rebuild, sole_consumer
from .records import Change, ComputedConstant

RESHAPES = ("Reshape", "Flatten")


def _is_no_op(node: IRNode, source: IRNode) -> bool:
    if node.op_type == "Identity":
        return True
    if node.op_type in RESHAPES:
        return node.shape == source.shape
    if node.op_type == "Permute":
        return list(node.attrs["perm"]) == list(range(len(node.attrs["perm"])))
    if node.op_type == "Transpose":
        return node.attrs["dim0"] == node.attrs["dim1"]
    return False


def _removable(ir: GraphIR, node: IRNode, used) -> str:
    """Why the graph cannot lose `node` (its consumers reading its input), or ""."""
    source = ir.node(node.inputs[0])
    if OUTPUT in used[node.name] and (source.op_type == "Input" or OUTPUT in used[source.name]):
        return (f"{node.name} is returned and {source.name} is an input or returned too: "
                "the graph would return one value under two names")
    return ""


def _remove_identity(ir: GraphIR, node: IRNode, used):
    if node.op_type in ("Input", "Output") or len(node.inputs) != 1:
        return None
    source = ir.node(node.inputs[0])
    if not _is_no_op(node, source):
        return None
    why = _removable(ir, node, used)
    if why:
        return Change("remove_identities", (node.name,), (), note=why, refused=True)
    new = rebuild(ir, {node.name: []}, {node.name: source.name})
    return new, Change("remove_identities", (node.name,), (),
                       note=f"{node.op_type} that changes nothing; its readers read "
                            f"{source.name}")


def _collapse_reshape(ir: GraphIR, second: IRNode, used):
    if second.op_type not in RESHAPES:
        return None
    first = ir.node(second.inputs[0])
    if first.op_type not in RESHAPES or sole_consumer(ir, first.name, used) is not second:
        return None
    source = ir.node(first.inputs[0])
    node = IRNode(second.name, "Reshape", first.inputs, {"shape": list(second.shape)},
                  second.shape, second.dtype, second.source)
    new = rebuild(ir, {first.name: [], second.name: [node]})
    return new, Change("collapse_reshapes", (first.name, second.name), (second.name,),
                       note=f"one Reshape of {source.name} to {list(second.shape)}")


# --- merge_elementwise ------------------------------------------------------------------
def _kind(node: IRNode) -> tuple[str, float] | None:
    """("shift", sign) for x + c and x - c, ("scale", +1 or -1 power) for x * c, c * x and
    x / c; None for what one ElementwiseAffine of either kind cannot hold (alpha != 1,
    c - x, c / x)."""
    a = node.attrs
    if node.op_type != "ElementwiseAffine":
        return None
    if a["kind"] == "mul":
        return "scale", 1.0
    if a["kind"] == "div":
        return ("scale", -1.0) if a["tensor_position"] == 0 else None
    if a["alpha"] != 1:
        return None
    if a["kind"] == "add":
        return "shift", 1.0
    return ("shift", -1.0) if a["tensor_position"] == 0 else None


def _operand(node: IRNode, consts) -> tuple[Carried, str]:
    a = node.attrs
    if a["constant"] is None:
        return Carried.exact(torch.tensor(float(a["scalar"]), dtype=torch.float64)), \
            repr(float(a["scalar"]))
    return Carried.of(consts[a["constant"]]), a["constant"]


def _merge_pair(ir: GraphIR, second: IRNode, used):
    kind2 = _kind(second)
    if kind2 is None:
        return None
    first = ir.node(second.inputs[0])
    kind1 = _kind(first)
    if kind1 is None or kind1[0] != kind2[0] or first.dtype != second.dtype \
            or sole_consumer(ir, first.name, used) is not second:
        return None
    (c1, n1), (c2, n2) = _operand(first, ir.constants), _operand(second, ir.constants)
    try:
        shape = torch.broadcast_shapes(tuple(c1.value.shape), tuple(c2.value.shape))
        fits = len(shape) <= len(second.shape) + 1 and \
            torch.broadcast_shapes(shape, (1, *second.shape)) == (1, *second.shape)
    except RuntimeError:
        fits = False
    if not fits:
        return Change("merge_elementwise", (first.name, second.name), (),
                      note="the constants' shapes would widen the values", refused=True)
    c1, c2 = c1.expand(*shape), c2.expand(*shape)
    if kind1[0] == "shift":
        merged = c1 * Carried.exact(torch.full(shape, kind1[1])) \
            + c2 * Carried.exact(torch.full(shape, kind2[1]))
        op, how = "add", f"{'+' if kind1[1] > 0 else '-'}{n1} {'+' if kind2[1] > 0 else '-'} {n2}"
    elif kind1[1] < 0 and kind2[1] < 0:
        merged, op, how = c1 * c2, "div", f"{n1} * {n2}"
    elif kind1[1] > 0 and kind2[1] > 0:
        merged, op, how = c1 * c2, "mul", f"{n1} * {n2}"
    else:
        up, down = (c1, c2) if kind1[1] > 0 else (c2, c1)
        try:
            merged = up / down
        except ArithmeticError:
            return None
        op, how = "mul", f"{n1 if kind1[1] > 0 else n2} / {n2 if kind1[1] > 0 else n1}"
    dtype = getattr(torch, second.dtype)
    try:
        stored, radius = merged.rounded(dtype)
    except ArithmeticError as error:
        return Change("merge_elementwise", (first.name, second.name), (),
                      note=f"the merged constant is {error}", refused=True)
    if op == "div" and bool((stored.abs() < torch.finfo(dtype).tiny).any()):
        return Change("merge_elementwise", (first.name, second.name), (),
                      note="the merged divisor is below the smallest normal", refused=True)
    name = constant_name(f"{second.name}.constant", stored, ir.constants)
    register(stored, radius)
    node = replace(second, inputs=first.inputs, attrs={
        "kind": op, "tensor_position": 0, "scalar": None, "constant": name, "alpha": 1.0})
    record = ComputedConstant(name, how, second.dtype, tuple(stored.shape), radius)
    new = rebuild(ir, {first.name: [], second.name: [node]}, constants={name: stored})
    return new, Change("merge_elementwise", (first.name, second.name), (second.name,),
                       (record,), f"x {op} {name}")


def remove_identities(ir: GraphIR) -> tuple[GraphIR, list[Change]]:
    """Every Identity, and every Reshape, Flatten, Permute or Transpose that changes
    nothing, removed: its readers read its input."""
    return apply_everywhere(ir, _remove_identity, "remove_identities")


def collapse_reshapes(ir: GraphIR) -> tuple[GraphIR, list[Change]]:
    """Every Reshape or Flatten read only by another collapsed into one Reshape."""
    return apply_everywhere(ir, _collapse_reshape, "collapse_reshapes")


def merge_elementwise(ir: GraphIR) -> tuple[GraphIR, list[Change]]:
    """Every ElementwiseAffine by a constant read only by another of the same family
    (shifts: x + c, x - c; scales: x * c, x / c) merged into one."""
    return apply_everywhere(ir, _merge_pair, "merge_elementwise")
