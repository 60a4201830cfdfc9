"""The alias analysis behind the in-place rewrite (frontend/rewrites.py): which FX nodes'
values may share memory with a tensor, and what could observe an in-place write to it.

Decided conservatively: only the ops in `FRESH_FUNCTIONS`, `FRESH_METHODS` and
`FRESH_MODULES` are known to return new memory (checked against PyTorch: none returns its
input or a view of it); every other op's result is taken to alias its tensor inputs.
"""

from __future__ import annotations

import inspect
import operator

import torch
import torch.nn.functional as F
from torch import nn

FRESH_FUNCTIONS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.matmul,
    torch.add, torch.sub, torch.mul, torch.div, torch.relu, torch.cat, torch.matmul,
    torch.sigmoid, torch.tanh, torch.clamp, torch.abs, torch.neg, torch.exp,
    torch.max_pool2d, torch.conv2d, torch.conv1d,
    F.relu, F.leaky_relu, F.linear, F.conv1d, F.conv2d, F.max_pool1d, F.max_pool2d,
    F.avg_pool1d, F.avg_pool2d, F.adaptive_avg_pool2d, F.adaptive_avg_pool1d, F.batch_norm,
    F.hardtanh, F.relu6, F.elu, F.sigmoid, F.tanh,
})
"""Functions whose result is always new memory (never a view of, or the same tensor as, an
input). F.relu & co. only when not in place: `_fresh` checks the flag."""

FRESH_METHODS = frozenset({
    "add", "sub", "mul", "div", "relu", "neg", "abs", "exp", "sigmoid", "tanh", "clamp",
    "clamp_min", "clamp_max", "matmul", "mean", "sum", "clone",
})
"""Tensor methods whose result is always new memory."""

FRESH_MODULES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d,
                 nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d,
                 nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.ReLU, nn.LeakyReLU,
                 nn.Sigmoid, nn.Tanh, nn.ReLU6, nn.Hardtanh, nn.ELU)
"""Modules whose forward always returns new memory (activations only when not in place)."""


def inplace_flag(node: torch.fx.Node) -> object:
    """The `inplace` argument of a call to one of `INPLACE_FLAG_FUNCTIONS`."""
    if "inplace" in node.kwargs:
        return node.kwargs["inplace"]
    try:
        names = list(inspect.signature(node.target).parameters)
    except (TypeError, ValueError):
        return None
    index = names.index("inplace") if "inplace" in names else None
    return node.args[index] if index is not None and index < len(node.args) else None


def overwrite_observer(node: torch.fx.Node, order, modules) -> str:
    """Why overwriting node.args[0] in place could be observed ("" when it cannot)."""
    if not node.args or not isinstance(node.args[0], torch.fx.Node):
        return "its operand is not a traced tensor"
    target = node.args[0]
    family = _memory_family(target, node, modules)
    for member in sorted(family, key=order.__getitem__):
        if member.op == "placeholder":
            return f"it overwrites {target.name!r}, which is (a view of) the graph input " \
                   f"{member.name!r}"
        if member.op == "get_attr":
            return f"it overwrites {target.name!r}, which is (a view of) the parameter or " \
                   f"buffer {member.target!r}"
    for operand in (*node.args[1:], *node.kwargs.values()):
        for read in nodes_in(operand):
            if read in family and read is not target:
                return f"it overwrites {target.name!r} while reading {read.name!r}, which " \
                       "shares its memory"
    later = [(order[user], order[member], user, member) for member in family
             for user in member.users if user is not node and order[user] > order[node]]
    if not later:
        return ""
    _, _, user, member = min(later, key=lambda r: r[:2])  # the first reader names the problem
    return f"it overwrites {target.name!r}, which node {user.name!r} reads afterwards" + (
        "" if member is target else f" (through {member.name!r}, which shares its memory)")


def _memory_family(start: torch.fx.Node, writer: torch.fx.Node, modules) -> set[torch.fx.Node]:
    """Every node whose value may share memory with `start`'s: up through the inputs of any
    op not known to return fresh memory, then down through the same kind of users (but not
    through `writer`, the in-place op: its readers see the value its out-of-place form
    gives)."""
    roots, stack, seen = set(), [start], set()
    while stack:  # up: to the nodes that own the memory
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op in ("placeholder", "get_attr") or _fresh(node, modules) \
                or not [n for n in node.all_input_nodes if not is_size(n)]:
            roots.add(node)  # owns its memory (a factory such as torch.zeros owns it too)
        else:  # a size (x.size(0), x.shape[0]) is an int, never memory: not followed
            stack.extend(n for n in node.all_input_nodes if not is_size(n))
    family, stack = set(), list(roots)
    while stack:  # down: every value that may view those
        node = stack.pop()
        if node in family:
            continue
        family.add(node)
        stack.extend(u for u in node.users
                     if u is not writer and u.op != "output" and not _fresh(u, modules))
    return family


def _fresh(node: torch.fx.Node, modules) -> bool:
    """True when the node's value is certainly new memory."""
    if "out" in node.kwargs:  # the result is the caller's out= tensor
        return False
    if node.op == "call_function":
        return node.target in FRESH_FUNCTIONS and inplace_flag(node) in (None, False)
    if node.op == "call_method":
        return node.target in FRESH_METHODS
    if node.op == "call_module":
        module = modules.get(str(node.target))
        return isinstance(module, FRESH_MODULES) and getattr(module, "inplace", False) is False
    return False


def nodes_in(value: object) -> list[torch.fx.Node]:
    """The FX nodes in an argument (nested in tuples, lists and dicts)."""
    found: list[torch.fx.Node] = []
    torch.fx.node.map_arg(value, lambda n: found.append(n) or n)
    return found


def is_size(node: torch.fx.Node) -> bool:
    """A node computing a size or a shape, not a tensor."""
    return (node.op == "call_method" and node.target == "size") or (
        node.op == "call_function" and node.target is getattr and node.args[1:] == ("shape",)) \
        or (node.op == "call_function" and node.target is operator.getitem
            and isinstance(node.args[0], torch.fx.Node) and is_size(node.args[0]))
