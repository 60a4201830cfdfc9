"""Cutting a model's graph short: convert the network up to a named node, or up to the
trailing monotone activations (Sigmoid, Softmax, ...) that verifiers leave off and reason
about the logits instead.

`plan_cut(graph, modules, stop_at=..., cut_trailing=...)` says which FX nodes the GraphIR
stops at (its new outputs) and which nodes it leaves out (`Cut.nodes`): every node that is
not needed to compute the new outputs. The conversion walk reports each left-out node as a
row of status "cut" instead of mapping it, so a Softmax at the end no longer makes the whole
model unconvertible. `cut_nodes(graph, ir)` finds the same nodes again from a GraphIR and a
trace of its model, for `check_exactness`, which runs them (the traced graph's outputs must
still be the eager model's, bit for bit) but checks the IR's outputs against the model's own
values at the cut.

A trailing activation is cut only when it is the last operation on every path to the output:
all its users are the output or other cut activations. A Softmax followed by a Linear is not
trailing, is not cut, and is rejected as before.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from ..errors import TraceError

TRAILING_FUNCTIONS: dict[object, str] = {
    torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh",
    torch.softmax: "softmax", F.softmax: "softmax", torch.log_softmax: "log_softmax",
    F.log_softmax: "log_softmax",
}
"""call_function activations `cut_trailing=True` may cut, keyed by the callable FX records:
each is strictly increasing elementwise (sigmoid, tanh) or keeps the order of the elements
along its dim (softmax, log_softmax), so a property of the logits is one of the output."""

TRAILING_METHODS: dict[str, str] = {
    "sigmoid": "sigmoid", "tanh": "tanh", "softmax": "softmax", "log_softmax": "log_softmax",
}
"""call_method activations `cut_trailing=True` may cut, keyed by method name."""

TRAILING_MODULES: dict[type[nn.Module], str] = {
    nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.Softmax: "softmax", nn.LogSoftmax: "log_softmax",
}
"""call_module activations `cut_trailing=True` may cut, keyed by module type."""

_ALONG_A_DIM = ("softmax", "log_softmax")


@dataclass(frozen=True)
class Cut:
    """Where a conversion stops.

    Attributes:
        outputs: The FX nodes the GraphIR returns instead of forward()'s results, in order.
        nodes: The FX nodes left out, by name, with why ("stop_at='fc1'", "trailing
            nn.Softmax, cut_trailing=True"), in graph order.
        softmax_dims: For a cut softmax/log_softmax node, its dim (checked against the
            rank of its input by the walk: the batch axis is not per-sample).
        as_tuple: The GraphIR returns a tuple (forward() returned one, and only trailing
            activations were cut), else the single value.
        stop_at, cut_trailing: The arguments the cut was planned with: `convert` stores them
            in the Output node, and `check_exactness` plans the cut again from them on the
            model's trace (`ncet.exactness.structure.replanned_cut`).
    """

    outputs: tuple[torch.fx.Node, ...]
    nodes: Mapping[str, str]
    softmax_dims: Mapping[str, object]
    as_tuple: bool
    stop_at: str | None = None
    cut_trailing: bool = False


def plan_cut(graph: torch.fx.Graph, modules: Mapping[str, nn.Module], *,
             stop_at: str | None, cut_trailing: bool) -> Cut | None:
    """Where the conversion of `graph` stops, or None to convert it whole.

    Args:
        graph: The traced graph (NCET's copy; not changed).
        modules: Submodule path -> module, for call_module nodes.
        stop_at: An FX node name (as `diagnose` shows it) or the module path of a
            call_module node: the GraphIR returns that node's value alone.
        cut_trailing: Leave out the monotone activations that end every path to the output
            (after `stop_at`, if both are given).

    Raises:
        TraceError: `stop_at` names no operation of the graph ("stop-at-node").
    """
    nodes = list(graph.nodes)
    (output,) = [n for n in nodes if n.op == "output"]
    why: dict[str, str] = {}
    if stop_at is not None:
        outputs = [_named(nodes, stop_at)]
    else:
        outputs = _returned(output)
    dims: dict[str, object] = {}
    if cut_trailing:
        kept = _ancestors(outputs)  # the nodes the outputs need, before peeling
        trailing: set[torch.fx.Node] = set()
        for node in reversed(nodes):  # users before their producers: one pass
            kind = _trailing_kind(node, modules) if node in kept else None
            if kind is not None and node.args and isinstance(node.args[0], torch.fx.Node) \
                    and all(u in trailing or u not in kept for u in node.users):
                trailing.add(node)
                why[node.name] = f"trailing {_spelling(node, modules)}, cut_trailing=True"
                if kind in _ALONG_A_DIM:
                    dims[node.name] = _dim(node, modules)
        peeled = []
        for node in outputs:
            while node in trailing:
                node = node.args[0]
            peeled.append(node)
        outputs = peeled
    if not why and stop_at is None:
        return None
    needed = _ancestors(outputs)
    # after stop_at, everything the new output does not need; else what only the cut
    # activations needed (dead code stays, and is mapped as without the cut)
    candidates = set(nodes) if stop_at is not None else _ancestors(_returned(output))
    for node in nodes:
        if node in candidates and node.op not in ("placeholder", "output") \
                and node not in needed and node.name not in why:
            why[node.name] = f"after stop_at={stop_at!r}" if stop_at is not None else \
                "needed only by the cut activations"
    order = {n.name: i for i, n in enumerate(nodes)}
    as_tuple = stop_at is None and isinstance(output.args[0], (tuple, list))
    return Cut(tuple(outputs), dict(sorted(why.items(), key=lambda kv: order[kv[0]])), dims,
               as_tuple, stop_at, cut_trailing)


def _returned(output: torch.fx.Node) -> list[torch.fx.Node]:
    names: list[torch.fx.Node] = []
    torch.fx.node.map_arg(output.args[0], names.append)
    return names


def _named(nodes: list[torch.fx.Node], name: str) -> torch.fx.Node:
    if not isinstance(name, str):
        raise TypeError(f"stop_at must be a node name (str), not {type(name).__name__}")
    candidates = [n for n in nodes if n.op.startswith("call_") or n.op == "get_attr"]
    for node in candidates:
        if node.name == name:
            return _operation(node, name)
    by_path = [n for n in candidates if n.op == "call_module" and str(n.target) == name]
    if len(by_path) == 1:
        return by_path[0]
    known = [n.name for n in nodes if n.op.startswith("call_")]
    close = difflib.get_close_matches(name, known, n=3)
    if any(n.name == name for n in nodes):
        what = "an input or the output, not an operation"
    elif len(by_path) > 1:
        what = f"a module called {len(by_path)} times; name one of its nodes: " + ", ".join(
            n.name for n in by_path)
    else:
        what = "no node of the traced graph"
    hint = (f"did you mean {' or '.join(map(repr, close))}? " if close else "") + \
        "give stop_at an FX node name as diagnose's rows show it (fx_name) or a module path"
    raise TraceError("stop-at-node", f"stop_at={name!r} names {what}", hint=hint,
                     spelling="stop_at")


def _operation(node: torch.fx.Node, name: str) -> torch.fx.Node:
    if node.op == "get_attr":
        raise TraceError("stop-at-node", f"stop_at={name!r} names a parameter or buffer "
                                         "(get_attr), not an operation",
                         hint="name the operation that reads it", spelling="stop_at")
    return node


def _trailing_kind(node: torch.fx.Node, modules: Mapping[str, nn.Module]) -> str | None:
    if node.op == "call_module":
        module = modules.get(str(node.target))
        return None if module is None else TRAILING_MODULES.get(type(module))
    if node.op == "call_method":
        return TRAILING_METHODS.get(str(node.target))
    if node.op == "call_function":
        try:
            return TRAILING_FUNCTIONS.get(node.target)
        except TypeError:
            return None
    return None


def _spelling(node: torch.fx.Node, modules: Mapping[str, nn.Module]) -> str:
    if node.op == "call_module":
        return f"nn.{type(modules[str(node.target)]).__name__}"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    module = getattr(node.target, "__module__", "") or ""
    prefix = "F" if module == "torch.nn.functional" else "torch"
    return f"{prefix}.{getattr(node.target, '__name__', node.target)}"


def _dim(node: torch.fx.Node, modules: Mapping[str, nn.Module]) -> object:
    if node.op == "call_module":
        return getattr(modules[str(node.target)], "dim", None)
    if "dim" in node.kwargs:
        return node.kwargs["dim"]
    return node.args[1] if len(node.args) > 1 else None


def _ancestors(outputs: Iterable[torch.fx.Node]) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    stack = list(outputs)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return seen


def softmax_on_batch_axis(dim: object, per_sample_rank: int) -> bool:
    """True when a softmax over `dim` of a tensor of this per-sample rank runs along the
    batch axis (PyTorch's implicit dim for dim=None included), or its dim is not a static
    int: such a softmax mixes the samples, and is not cut."""
    rank = per_sample_rank + 1
    if dim is None:
        dim = 0 if rank in (0, 1, 3) else 1  # torch.nn.functional._get_softmax_dim
    if isinstance(dim, bool) or not isinstance(dim, int):
        return True
    return dim % max(rank, 1) == 0


def cut_nodes(graph: torch.fx.Graph, ir_names: set[str], outputs: Iterable[str]) -> list[str]:
    """The operations of `graph` a GraphIR with these node names and outputs leaves out as a
    cut: those it has no node for and that none of its outputs needs (empty for a GraphIR of
    the whole graph)."""
    by_name = {n.name: n for n in graph.nodes}
    needed = _ancestors(by_name[o] for o in outputs if o in by_name)
    return [n.name for n in graph.nodes if n.op.startswith("call_") and n not in needed
            and n.name not in ir_names]
