"""What a spelling handler sees of one FX node: bound arguments, shapes, constants, rejections."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch import nn

from ..errors import Rejection
from ..ir import OP_SCHEMAS
from .constants import ConstantLifter

if TYPE_CHECKING:  # annotations only: shape propagation imports nothing from here
    from .shape_propagation import NodeRecord

REQUIRED = object()
"""Marks a parameter without a default in a spelling's parameter list."""


class MissingShape(Exception):
    """A handler needed a shape that shape propagation could not provide."""


@dataclass(frozen=True, slots=True)
class Mapped:
    """A handler's result: the canonical operator and its graph operands."""

    op_type: str
    inputs: tuple[torch.fx.Node, ...]
    attrs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Spelling:
    """One row of a spelling table: how it is displayed, its handler, its parameters and the
    op_types the spec assigns it.

    `params` lists (name, default) in positional order, `REQUIRED` for no default; only
    these names are accepted as keywords. `variadic` names a parameter that collects the
    remaining positional arguments (as in `x.view(2, 3)`), or a single sequence argument.
    `op_types` is the spec's op_type column: the handler's result is one of them.
    """

    display: str
    handler: Callable[[NodeContext], Mapped]
    params: tuple[tuple[str, Any], ...] = (("input", REQUIRED),)
    variadic: str = ""
    op_types: tuple[str, ...] = ()

    def __post_init__(self):
        assert all(op in OP_SCHEMAS for op in self.op_types), self.op_types


NUMPY_KEYWORDS: dict[str, str] = {"axis": "dim", "keepdims": "keepdim", "dim": "axis"}
"""Keyword spellings PyTorch's argument parser accepts for one another (NumPy compatibility:
`torch.cat(xs, axis=1)`, `x.mean(axis=1, keepdims=True)`, `torch.concatenate(xs, dim=1)`);
`bind` maps one to the other when the spelling names only the other. The only keyword
aliasing there is."""


def bind(spelling: Spelling, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Bind an FX node's arguments to the spelling's parameter names.

    Raises:
        Rejection: "unsupported-argument" for a keyword or extra positional the spelling
            does not know.
    """
    names = [name for name, _ in spelling.params]
    bound: dict[str, Any] = {}
    positional = list(args)
    if spelling.variadic:
        fixed = names.index(spelling.variadic)
        rest = positional[fixed:]
        positional = positional[:fixed]
        if len(rest) == 1 and isinstance(rest[0], (tuple, list, torch.Size)):
            rest = list(rest[0])
        if rest:
            bound[spelling.variadic] = tuple(rest)
    if len(positional) > len(names):
        raise Rejection("unsupported-argument",
                        f"{len(positional)} positional arguments given, {spelling.display} "
                        f"takes at most {len(names)}")
    bound.update(zip(names, positional))
    for key, value in kwargs.items():
        if key not in names and NUMPY_KEYWORDS.get(key) in names:
            key = NUMPY_KEYWORDS[key]
        if key not in names:
            raise Rejection("unsupported-argument",
                            f"keyword argument {key}={value!r} is not supported by "
                            f"{spelling.display}",
                            hint=f"remove {key}= ({spelling.display} takes "
                                 f"{', '.join(names)})")
        if key in bound:
            raise Rejection("unsupported-argument", f"{key} given twice")
        bound[key] = value
    for name, default in spelling.params:
        if name not in bound:
            if default is REQUIRED:
                raise Rejection("unsupported-argument", f"missing argument {name!r}")
            bound[name] = default
    return bound


class NodeContext:
    """The view of one FX node given to its spelling's handler."""

    def __init__(self, node: torch.fx.Node, spelling: Spelling, args: dict[str, Any],
                 values: Mapping[torch.fx.Node, NodeRecord], lifter: ConstantLifter,
                 module: nn.Module | None = None, module_path: str = ""):
        self.node = node
        self.spelling = spelling
        self.args = args
        self.module = module
        self.module_path = module_path
        self._values = values
        self._lifter = lifter

    # --- operands -------------------------------------------------------------------
    def is_graph_tensor(self, value: Any) -> bool:
        """True for a Node whose tensor value depends on the model inputs."""
        return isinstance(value, torch.fx.Node) and self._values[value].kind != "const" \
            and self._values[value].is_tensor

    def is_fixed_tensor(self, value: Any) -> bool:
        """True for a get_attr Node: fixed state of the model."""
        return isinstance(value, torch.fx.Node) and value.op == "get_attr" \
            and self._values[value].is_tensor

    def is_constant(self, value: Any) -> bool:
        """True for a Node whose value is fixed (it depends on no model input)."""
        return _is_constant(value, self._values)

    def graph_tensor(self, name: str) -> torch.fx.Node:
        """The argument `name`, which must be a graph tensor."""
        value = self.args[name]
        if not self.is_graph_tensor(value):
            raise Rejection("constant-computation" if _is_constant(value, self._values)
                            else "dynamic-argument",
                            f"argument {name!r} must be a tensor computed from the model inputs")
        return value

    def static(self, name: str) -> Any:
        """The argument `name`, which must be a static Python value (no traced value in it)."""
        value = self.args[name]
        found: list[torch.fx.Node] = []
        torch.fx.node.map_arg(value, found.append)
        if found:
            raise Rejection("dynamic-argument",
                            f"argument {name!r} must be static but is computed by node "
                            f"{found[0].name!r}",
                            hint="use a Python constant for it")
        return value

    def require_default(self, name: str, default: Any, code: str = "unsupported-argument",
                        hint: str = "") -> None:
        """Reject a non-default value of an argument this handler cannot honour."""
        value = self.args[name]
        if value is not default and value != default:
            if code == "out-argument":
                raise Rejection(code, "out= storage is not supported",
                                hint="assign the result instead of passing out=")
            raise Rejection(code, f"{name}={value!r} is not supported",
                            hint=hint or f"remove {name}=")

    # --- shapes ---------------------------------------------------------------------
    def shape(self, node: torch.fx.Node) -> tuple[int, ...]:
        """Per-sample shape of a graph tensor."""
        shape = self._values[node].shape
        if shape is None:
            raise MissingShape(node.name)
        return shape

    def dtype(self, node: torch.fx.Node) -> torch.dtype | None:
        """The dtype of a node's tensor value (None when it could not be run)."""
        return self._values[node].dtype

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Per-sample shape of this node's own output."""
        return self.shape(self.node)

    def axis(self, dim: Any, per_sample_rank: int, *, insert: bool = False) -> int:
        """Normalise a batched `dim` to a per-sample axis, rejecting the batch axis.

        Args:
            dim: The dimension as the model wrote it, for the batched tensor.
            per_sample_rank: Rank of the per-sample tensor the dim refers to.
            insert: The dim names a position to insert at (unsqueeze): one more is valid.
        """
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise Rejection("dynamic-argument" if isinstance(dim, torch.fx.Node)
                            else "unsupported-argument",
                            f"dimension {dim!r} must be a static integer")
        rank = per_sample_rank + 1 + int(insert)
        if not -rank <= dim < rank:
            raise Rejection("rank", f"dimension {dim} is out of range for a batched tensor "
                                    f"of rank {rank - int(insert)}")
        if dim % rank == 0:
            raise Rejection("batch-axis", f"dimension {dim} is the batch axis",
                            hint="use dimensions >= 1 (or negative ones); the batch axis "
                                 "must stay untouched")
        return dim % rank - 1

    # --- constants ------------------------------------------------------------------
    def lift_attr(self, node: torch.fx.Node) -> str:
        """Lift the fixed tensor of a get_attr node; returns its constant name."""
        return self._lifter.lift_attr(node)

    def lift_module_tensor(self, attr: str) -> str | None:
        """Lift `self.module.<attr>` (None stays None); returns its constant name."""
        tensor = getattr(self.module, attr)
        if tensor is None:
            return None
        path = f"{self.module_path}.{attr}" if self.module_path else attr
        return self._lifter.lift(tensor, path)

    def fixed_tensor(self, node: torch.fx.Node) -> torch.Tensor:
        """The lifted copy of a get_attr node's tensor (for checks, never for arithmetic)."""
        return self._lifter.value(node)


def _is_constant(value: Any, values: Mapping[torch.fx.Node, NodeRecord]) -> bool:
    return isinstance(value, torch.fx.Node) and values[value].kind == "const"


def finite_real(value: Any) -> bool:
    """True for a finite int or float (bool excluded)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
