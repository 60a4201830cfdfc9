"""Editing a GraphIR the way every pass does: who consumes a value, fresh names for new
constants and nodes, and one rebuild that replaces nodes in place, reroutes their consumers
and drops the constants no node names any more."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import replace

import torch

from ..ir import CONSTANT_ATTRS, GraphIR, IRNode

OUTPUT = "<output>"
"""The consumer name `consumers` gives the graph's Output node."""


def consumers(ir: GraphIR) -> dict[str, list[str]]:
    """Every node's consumers by name (the Output node as `OUTPUT`), each once per use."""
    used: dict[str, list[str]] = {n.name: [] for n in ir.nodes}
    for node in ir.nodes:
        for name in node.inputs:
            used[name].append(OUTPUT if node.op_type == "Output" else node.name)
    return used


def sole_consumer(ir: GraphIR, name: str, used: Mapping[str, list[str]]) -> IRNode | None:
    """The one operator node that reads `name`, when exactly one does and the graph does not
    return it; else None (a fold must not change a value someone else reads)."""
    readers = used[name]
    if len(readers) != 1 or readers[0] == OUTPUT:
        return None
    return ir.node(readers[0])


def fresh_name(base: str, taken: Iterable[str]) -> str:
    """`base`, or `base.2`, `base.3`, ...: the first that no name in `taken` is."""
    taken = set(taken)
    if base not in taken:
        return base
    i = 2
    while f"{base}.{i}" in taken:
        i += 1
    return f"{base}.{i}"


def constant_name(base: str, tensor: torch.Tensor, taken: Iterable[str]) -> str:
    """A new constant's name: `base~` and the first 8 hex digits of the SHA-256 of its dtype,
    shape and bytes, so that a name never stands for two different tensors (a fresh suffix
    only if that name is taken)."""
    data = tensor.detach().contiguous().cpu().reshape(-1)
    digest = hashlib.sha256(f"{data.dtype}{list(tensor.shape)}".encode()
                            + data.view(torch.uint8).numpy().tobytes()).hexdigest()[:8]
    return fresh_name(f"{base}~{digest}", taken)


def with_attrs(node: IRNode, **attrs) -> IRNode:
    """The node with some attributes replaced."""
    return replace(node, attrs={**node.attrs, **attrs})


def rebuild(ir: GraphIR, replaced: Mapping[str, list[IRNode]],
            rerouted: Mapping[str, str] = {},
            constants: Mapping[str, torch.Tensor] = {}) -> GraphIR:
    """A new GraphIR: each node named in `replaced` gives way, at its place, to the nodes
    listed (none: removed); every input named in `rerouted` reads the node it maps to
    instead (followed until it names no rerouted node); `constants` are added; constants no
    node names any more are dropped.
    """

    def route(name: str) -> str:
        seen = set()
        while name in rerouted:
            assert name not in seen, f"rerouting cycle at {name!r}"
            seen.add(name)
            name = rerouted[name]
        return name

    nodes: list[IRNode] = []
    for node in ir.nodes:
        for new in replaced.get(node.name, [node]):
            inputs = tuple(route(i) for i in new.inputs)
            nodes.append(new if inputs == new.inputs else replace(new, inputs=inputs))
    named = {node.attrs[a] for node in nodes for a in CONSTANT_ATTRS.get(node.op_type, ())
             if node.attrs.get(a) is not None}
    table = {**ir.constants, **constants}
    return GraphIR(tuple(nodes), {k: v for k, v in table.items() if k in named})


def constant_names(ir: GraphIR) -> set[str]:
    """Every constant name the graph has (a new constant must not reuse one)."""
    return set(ir.constants)
