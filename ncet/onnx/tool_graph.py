"""The ONNX graph as the tool rules read it (`GraphContext`), the rule records (`ToolSpec`,
`ToolRule`), and the conditions several tools' rules share. The rules are in tools.py
(ERAN's in eran_rules.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import onnx
from onnx import numpy_helper

from .onnx_file import refuse_ambiguity

VERDICTS = ("rejects", "mishandles")
"""`rejects`: the importer raises; `mishandles`: it loads and computes something else."""


@dataclass(frozen=True, eq=False)
class GraphContext:
    """The facts about one ONNX graph the rule conditions read (built once per lint)."""

    nodes: tuple[onnx.NodeProto, ...]
    initializers: Mapping[str, onnx.TensorProto]
    constants: frozenset[str]  # initializers and Constant node outputs
    consumers: Mapping[str, tuple[int, ...]]  # value -> indices of the nodes reading it
    producers: Mapping[str, int]  # value -> index of the node writing it
    graph_outputs: frozenset[str]
    shapes: Mapping[str, tuple[int | None, ...]]

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> GraphContext:
        """The graph's facts; a name defined twice is refused (ONNXFileError), as
        `read_model` refuses it, since each map below holds one definition per name."""
        refuse_ambiguity(graph)
        nodes = tuple(graph.node)
        initializers = {t.name: t for t in graph.initializer}
        consumers: dict[str, list[int]] = {}
        producers: dict[str, int] = {}
        for i, node in enumerate(nodes):
            for name in node.input:
                if name:
                    consumers.setdefault(name, []).append(i)
            for name in node.output:
                producers[name] = i
        constants = set(initializers)
        constants.update(n.output[0] for n in nodes if n.op_type == "Constant" and n.output)
        shapes: dict[str, tuple[int | None, ...]] = {}
        for info in (*graph.input, *graph.value_info, *graph.output):
            if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
                shapes[info.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                          for d in info.type.tensor_type.shape.dim)
        for name, tensor in initializers.items():
            shapes[name] = tuple(tensor.dims)
        return cls(nodes, initializers, frozenset(constants),
                   {k: tuple(v) for k, v in consumers.items()}, producers,
                   frozenset(o.name for o in graph.output), shapes)

    def index(self, node: onnx.NodeProto) -> int:
        return next(i for i, n in enumerate(self.nodes) if n is node)

    def readers(self, name: str) -> int:
        """How many nodes read `name`, a graph output counting as one more."""
        return len(self.consumers.get(name, ())) + (name in self.graph_outputs)

    def values(self, name: str):
        """The array of a constant (an initializer, or a Constant node's `value`), or None."""
        tensor = self.initializers.get(name)
        if tensor is None and name in self.producers:
            node = self.nodes[self.producers[name]]
            if node.op_type == "Constant":
                tensor = next((a.t for a in node.attribute if a.name == "value"), None)
        return None if tensor is None else numpy_helper.to_array(tensor)


Condition = Callable[[onnx.NodeProto, GraphContext], bool]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool's ONNX importer: the op types it has a branch for, and where that list is."""

    tool: str
    importer: str
    supported: frozenset[str]
    source: str


@dataclass(frozen=True, slots=True)
class ToolRule:
    """One known failure of a tool's importer on `op_type` (when `condition` holds)."""

    code: str
    tool: str
    op_type: str
    verdict: str
    reason: str
    source: str
    condition: Condition | None = None

    def __post_init__(self):
        assert self.verdict in VERDICTS, self.verdict


def attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def input_name(node, i) -> str:
    return node.input[i] if len(node.input) > i else ""


def pads_asymmetric(node, ctx) -> bool:
    pads = list(attr(node, "pads", []) or [])
    half = len(pads) // 2
    return pads[:half] != pads[half:]


def pads_nonzero(node, ctx) -> bool:
    return any(attr(node, "pads", []) or [])


def dilated(node, ctx) -> bool:
    return any(d != 1 for d in attr(node, "dilations", []) or [])


def grouped(node, ctx) -> bool:
    return attr(node, "group", 1) != 1


def input_read_elsewhere(node, ctx) -> bool:
    name = input_name(node, 0)
    return ctx.readers(name) > 1 or name not in ctx.producers  # a graph input
