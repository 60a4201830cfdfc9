"""GraphIR: the canonical per-sample graph of IR nodes and its lifted constants."""

from __future__ import annotations

import html
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

# op_type -> (number of graph inputs or None for "one or more", {attribute: kind}).
# Kinds: "int", "float", "bool", "ints" (list of int), "const" (constant name),
# "const?" (constant name or None), "float?" (float or None), "str", "index" (see docs/ir.md),
# "int?" (int or None), "ints?" (list of int or None entries).
OP_SCHEMAS: Mapping[str, tuple[int | None, Mapping[str, str]]] = MappingProxyType({
    "Input": (0, {"index": "int"}),
    "Output": (None, {"tuple": "bool"}),
    "Linear": (1, {"weight": "const", "bias": "const?"}),
    "Conv2d": (1, {"weight": "const", "bias": "const?", "stride": "ints", "padding": "ints",
                   "dilation": "ints", "groups": "int", "padding_mode": "str"}),
    "BatchNorm": (1, {"mean": "const", "var": "const", "weight": "const?", "bias": "const?",
                      "eps": "float"}),
    "AdaptiveAvgPool2d": (1, {"output_size": "ints"}),
    "AvgPool2d": (1, {"kernel_size": "ints", "stride": "ints", "padding": "ints",
                      "ceil_mode": "bool", "count_include_pad": "bool",
                      "divisor_override": "int?"}),
    "MaxPool2d": (1, {"kernel_size": "ints", "stride": "ints", "padding": "ints",
                      "dilation": "ints", "ceil_mode": "bool"}),
    "Identity": (1, {}),
    "ReLU": (1, {}),
    "LeakyReLU": (1, {"negative_slope": "float"}),
    "Flatten": (1, {"start_dim": "int", "end_dim": "int"}),
    "Add": (2, {"alpha": "float"}),
    "Sub": (2, {"alpha": "float"}),
    "ElementwiseAffine": (1, {"kind": "str", "tensor_position": "int", "scalar": "float?",
                              "constant": "const?", "alpha": "float"}),
    "Concat": (None, {"axis": "int"}),
    "ReduceMean": (1, {"axes": "ints", "keepdim": "bool"}),
    "Reshape": (1, {"shape": "ints"}),
    "Permute": (1, {"perm": "ints"}),
    "Transpose": (1, {"dim0": "int", "dim1": "int"}),
    "GetItem": (1, {"index": "index"}),
    "Slice": (1, {"index": "index"}),
})
"""Every canonical op_type with its arity and attribute schema (documented in docs/ir.md)."""

OPTIONAL_ATTRS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "Output": MappingProxyType({"cut": "cut", "stop_at": "str", "cut_trailing": "bool"}),
})
"""Per op_type, the attributes a node may leave out, with their kinds (absent when unused, so
a GraphIR without them reads, hashes and saves as before). Output's `cut` (kind "cut": a
list of [FX node name, why] pairs of strings, empty when the cut leaves nothing out but
changes what the GraphIR returns): the model's operations a GraphIR
cut short by `convert(stop_at=..., cut_trailing=...)` leaves out, with `cut_trailing` (always)
and `stop_at` (when given), the arguments that made the cut; the three come together.
`check_exactness` plans the cut again from those arguments on the model's trace and accepts
exactly its nodes missing and its outputs returned, and nothing else; the reasons in `cut`
are shown, never trusted (docs/ir.md, "Cutting a model short")."""

CONSTANT_ATTRS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    op_type: tuple(k for k, kind in schema.items() if kind.startswith("const"))
    for op_type, (_, schema) in OP_SCHEMAS.items()})
"""Per op_type, its attributes that name constants (kind "const" or "const?")."""

AFFINE_KINDS = ("add", "sub", "mul", "div")
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")

# op_type -> {attribute: rule}: what a value of the attribute's kind must also be (null, where
# the kind allows it, always passes). Rules: ("at least", n) an int >= n; ("ints", length, n)
# a list of `length` ints (None: any number) each >= n; ("one of", values); ("between", lo,
# hi) a number strictly between; ("not", value) anything else; ("non-negative",) a number
# >= 0; ("axes",) a non-empty strictly
# increasing list of ints >= 0; ("permutation",) the ints 0..n-1 in some order; ("index",)
# entries that are ints >= 0, [start, stop, step] with 0 <= start <= stop and step >= 1, or
# null. Rules that relate attributes to each other or to shapes sit in ncet/format/meaning_rules.py.
ATTR_RULES: Mapping[str, Mapping[str, tuple]] = MappingProxyType({
    "Input": {"index": ("at least", 0)},
    "Conv2d": {"stride": ("ints", 2, 1), "padding": ("ints", 4, 0), "dilation": ("ints", 2, 1),
               "groups": ("at least", 1), "padding_mode": ("one of", PADDING_MODES)},
    "AdaptiveAvgPool2d": {"output_size": ("ints", 2, 0)},
    "BatchNorm": {"eps": ("non-negative",)},
    "AvgPool2d": {"kernel_size": ("ints", 2, 1), "stride": ("ints", 2, 1),
                  "padding": ("ints", 2, 0), "divisor_override": ("not", 0)},
    "MaxPool2d": {"kernel_size": ("ints", 2, 1), "stride": ("ints", 2, 1),
                  "padding": ("ints", 2, 0), "dilation": ("ints", 2, 1)},
    "LeakyReLU": {"negative_slope": ("between", 0, 1)},
    "Flatten": {"start_dim": ("at least", 0), "end_dim": ("at least", 0)},
    "ElementwiseAffine": {"kind": ("one of", AFFINE_KINDS), "tensor_position": ("one of", (0, 1))},
    "Concat": {"axis": ("at least", 0)},
    "ReduceMean": {"axes": ("axes",)},
    "Reshape": {"shape": ("ints", None, 0)},
    "Permute": {"perm": ("permutation",)},
    "Transpose": {"dim0": ("at least", 0), "dim1": ("at least", 0)},
    "GetItem": {"index": ("index",)},
    "Slice": {"index": ("index",)},
})
"""Every attribute's allowed values beyond its kind (docs/ir.md; checked when a file loads)."""

INPUT_RANKS: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "Linear": tuple(range(1, 16)), "Conv2d": (3,), "BatchNorm": (1, 2, 3),
    "AdaptiveAvgPool2d": (3,), "AvgPool2d": (3,), "MaxPool2d": (3,),
})
"""The per-sample ranks of the input an op_type accepts, as `convert` requires them (other
op_types take any rank)."""


def declared_cut(ir: GraphIR) -> dict[str, str]:
    """The model's operations the GraphIR declares it leaves out (its Output node's `cut`),
    FX node name -> why, in graph order; empty for a GraphIR of the whole model. As the file
    says it: `check_exactness` plans the cut again and trusts only that."""
    return {name: why for name, why in ir.nodes[-1].attrs.get("cut", ())}


@dataclass(frozen=True, slots=True)
class Source:
    """Where an IR node came from: its FX node and the model code that produced it."""

    fx_name: str
    fx_op: str
    target: str
    module_path: str = ""
    module_type: str = ""
    location: str = ""


def same_value(x: Any, y: Any) -> bool:
    """Two attribute values are the same data: of the same type (a tuple and a list alike,
    as in a file and to `evaluate`; an int not a float or a bool; a NumPy floating scalar and
    a float alike), floats bit for bit as float64 (a NaN equals itself, and only a NaN of its
    payload; -0.0 is not 0.0), inside lists, tuples and dicts too."""
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(map(same_value, x, y))
    if isinstance(x, _FLOATS) or isinstance(y, _FLOATS):
        return isinstance(x, _FLOATS) and isinstance(y, _FLOATS) and \
            struct.pack("<d", float(x)) == struct.pack("<d", float(y))
    if type(x) is not type(y):
        return False
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(same_value(x[k], y[k]) for k in x)
    return x == y


_FLOATS = (float, np.floating)


@dataclass(frozen=True, slots=True)
class IRNode:
    """One canonical operator application.

    Attributes:
        name: Unique node name (the FX node name).
        op_type: One of `OP_SCHEMAS`.
        inputs: Names of the producer nodes, in operand order.
        attrs: Plain JSON-able attributes; tensors are referenced by constant name.
        shape: Per-sample output shape (no batch axis); None for Output.
        dtype: Output dtype name, e.g. "float32"; "" for Output.
        source: FX provenance.
    """

    name: str
    op_type: str
    inputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    shape: tuple[int, ...] | None
    dtype: str
    source: Source = field(compare=False)

    def __post_init__(self):
        assert self.op_type in OP_SCHEMAS, f"unknown op_type {self.op_type!r}"
        assert isinstance(self.inputs, tuple), "IRNode.inputs must be a tuple"
        arity, schema = OP_SCHEMAS[self.op_type]
        assert arity is None or len(self.inputs) == arity, (self.name, self.inputs)
        optional = OPTIONAL_ATTRS.get(self.op_type, {})
        assert set(schema) <= set(self.attrs) <= set(schema) | set(optional), (
            self.name, sorted(self.attrs), sorted(schema), sorted(optional))
        object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))

    def __eq__(self, other: object) -> bool:
        """The same node: every field but the provenance, attributes by `same_value` (a
        float bit for bit: `-0.0` is not `0.0`)."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.name, self.op_type, self.inputs, self.shape, self.dtype) == (
            other.name, other.op_type, other.inputs, other.shape, other.dtype) and \
            same_value(dict(self.attrs), dict(other.attrs))

    def __repr__(self) -> str:
        args = ", ".join(self.inputs)
        attrs = ", ".join(f"{k}={v!r}" for k, v in self.attrs.items())
        shape = "" if self.shape is None else f": {self.dtype}{list(self.shape)}"
        return f"%{self.name}{shape} = {self.op_type}({args}{'; ' if attrs else ''}{attrs})"


@dataclass(frozen=True, eq=False)
class GraphIR:
    """A canonical per-sample graph: `Input` nodes first, one `Output` node last.

    Attributes:
        nodes: IR nodes in topological order.
        constants: Lifted fixed tensors, keyed by qualified name (detached copies).
    """

    nodes: tuple[IRNode, ...]
    constants: Mapping[str, torch.Tensor]
    _index: Mapping[str, IRNode] = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "constants", MappingProxyType(dict(self.constants)))
        object.__setattr__(self, "_index", MappingProxyType({n.name: n for n in self.nodes}))
        assert len(self._index) == len(self.nodes), "duplicate IR node names"
        assert self.nodes and self.nodes[-1].op_type == "Output", "GraphIR must end in Output"

    @property
    def inputs(self) -> tuple[IRNode, ...]:
        """The `Input` nodes, in forward() argument order."""
        return tuple(n for n in self.nodes if n.op_type == "Input")

    @property
    def outputs(self) -> tuple[str, ...]:
        """Names of the nodes the model returns, in order."""
        return self.nodes[-1].inputs

    def node(self, name: str) -> IRNode:
        """Return the node called `name`.

        Raises:
            KeyError: No node has that name.
        """
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"GraphIR has no node {name!r}") from None

    def to_pandas(self):
        """One row per IR node: name, op_type, inputs, shape, dtype, attributes, FX provenance."""
        import pandas as pd

        return pd.DataFrame([_node_row(n) for n in self.nodes])

    def __repr__(self) -> str:
        lines = [f"GraphIR({len(self.nodes)} nodes, {len(self.constants)} constants) {{"]
        for name, tensor in self.constants.items():
            lines.append(f"  const {name}: {describe_tensor(tensor)}")
        lines += [f"  {n!r}" for n in self.nodes]
        lines.append("}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("name", "op_type", "inputs", "shape", "attrs",
                                                 "source"))
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
                n.name, n.op_type, ", ".join(n.inputs),
                "" if n.shape is None else list(n.shape), _attr_text(n),
                n.source.location)) + "</tr>"
            for n in self.nodes)
        return (f"<p>GraphIR: {len(self.nodes)} nodes, {len(self.constants)} constants</p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def describe_tensor(tensor: torch.Tensor) -> str:
    """A short summary of a constant: dtype, shape and range."""
    kind = str(tensor.dtype).removeprefix("torch.")
    if tensor.numel() == 0:
        return f"{kind}{list(tensor.shape)}"
    values = tensor.detach().double()
    lo, hi = values.min().item(), values.max().item()
    return f"{kind}{list(tensor.shape)} in [{_num(lo)}, {_num(hi)}]"


def _num(value: float) -> str:
    return repr(value) if not math.isfinite(value) else f"{value:.4g}"


def _attr_text(node: IRNode) -> str:
    return ", ".join(f"{k}={v}" for k, v in node.attrs.items())


def _node_row(node: IRNode) -> dict[str, Any]:
    return {
        "name": node.name, "op_type": node.op_type, "inputs": ", ".join(node.inputs),
        "shape": None if node.shape is None else tuple(node.shape), "dtype": node.dtype,
        "attrs": _attr_text(node), "fx_op": node.source.fx_op, "spelling": node.source.target,
        "module_path": node.source.module_path, "module_type": node.source.module_type,
        "location": node.source.location,
    }
