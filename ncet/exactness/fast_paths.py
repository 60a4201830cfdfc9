"""The checker's fast paths and the one switch that selects them (docs/exactness.md §2.5).

`FAST_PATHS` (on by default) makes `check_exactness` bound each node by the fastest route
that covers the reference path (`bounds.ReferenceBounds`): the float32 round-up route of
Linear/Conv2d (`float32_dots.py`), the fused elementwise forms and the in-place formulas
(`fused_bounds.py`), all working in reused scratch buffers. Off, every bound is the
reference formula evaluated as written. `tests/test_exactness_fast_paths.py` checks both
ways on the bundled and on fuzzed models and holds the reports to the relation stated in
docs/exactness.md §2.5: the same verdicts, violations and errors, and bounds that agree to
float64 rounding, or, on the float32 route, are never below the reference's by more than
that and never above it by more than float32 rounding.

This is an internal switch, not part of the public API.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .arithmetic import ArithmeticModel
from .bounds import NodeInputs, ReferenceBounds, rounding
from .float32_dots import (
    FLOAT32_DOT_OPS,
    DotBound,
    carry_exponent,
    dot_sum32,
    round_up_to_float32,
)
from .flush_bounds import FlushedBounds
from .fused_bounds import LINEAR_FORMS, LinearBound, PairBound
from .rules import BOUND_RULES, Consts, Tensors
from .scratch import Scratch

FAST_PATHS = True
"""Use the fast paths (the default); False: the reference path only, process-wide. Read
when a check starts (`bounds_for`)."""

_REFERENCE_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "ncet_reference_path", default=False)


@contextmanager
def reference_path() -> Iterator[None]:
    """Within the block, `check_exactness` uses the reference path only (for tests and
    benchmarks). It holds for the calling thread (and context) alone: another thread's
    check in the meantime keeps its own choice, and overlapping blocks in several threads
    each restore their own."""
    token = _REFERENCE_ONLY.set(True)
    try:
        yield
    finally:
        _REFERENCE_ONLY.reset(token)


def fast_paths_on() -> bool:
    """Whether a check started now in this thread takes the fast paths."""
    return FAST_PATHS and not _REFERENCE_ONLY.get()


def bounds_for(constants: Consts, abs_consts: Consts, arithmetic: ArithmeticModel,
               scratch: Scratch) -> ReferenceBounds | FastBounds | FlushedBounds:
    """The checker's bounds, by the route `fast_paths_on()` selects; under flushing with
    the underflow term added on either route (`flush_bounds.FlushedBounds`)."""
    if fast_paths_on():
        bounds = FastBounds(constants, abs_consts, arithmetic, scratch)
    else:
        bounds = ReferenceBounds(constants, abs_consts, arithmetic)
    if arithmetic.flush:
        return FlushedBounds(bounds, constants, abs_consts, arithmetic)
    return bounds


@dataclass(frozen=True, slots=True)
class _PairRoute:
    """Any rounding rule by `PairBound`."""

    at: NodeInputs
    pair: PairBound
    abs_consts: Consts
    value: torch.Tensor

    def radius(self, radii: Tensors) -> torch.Tensor:
        rule, node = BOUND_RULES[self.at.node.op_type], self.at.node
        exposed = rule.exposed(node, radii, self.abs_consts) if rule.exposed else 0.0
        return self.pair.total(self.value, rule.carry(node, radii, self.abs_consts), exposed)


@dataclass(frozen=True, slots=True)
class _LinearRoute:
    """An elementwise rule by its `LinearBound`."""

    linear: LinearBound
    value: torch.Tensor

    def radius(self, radii: Tensors) -> torch.Tensor:
        return self.linear.total(self.value, radii)


@dataclass(frozen=True, slots=True)
class _DotRoute:
    """Linear/Conv2d by the float32 round-up route; radii whose float32 sum overflows
    take `PairBound`'s."""

    at: NodeInputs
    dot: DotBound
    bounds: FastBounds
    value: torch.Tensor

    def radius(self, radii: Tensors) -> torch.Tensor:
        s = carry_exponent(radii)
        up = [round_up_to_float32(e, self.bounds.scratch.get(f"up{i}", e.shape, torch.float32),
                                  s, self.bounds.arithmetic.flush) for i, e in enumerate(radii)]
        c = dot_sum32(self.at.node, up, self.bounds.abs_consts32, True)
        if c is not None:
            return self.dot.total(self.value, c, s)
        node, abs_consts = self.at.node, self.bounds.abs_consts
        k = BOUND_RULES[node.op_type].roundings(node, [], self.bounds.constants)
        pair = PairBound.of(node, self.bounds.arithmetic, k)
        return _PairRoute(self.at, pair, abs_consts, self.value).radius(radii)


class FastBounds:
    """The checker's bounds by the fast paths, with the per-node coefficients cached for
    every chunk of a check."""

    def __init__(self, constants: Consts, abs_consts: Consts, arithmetic: ArithmeticModel,
                 scratch: Scratch):
        self.constants, self.abs_consts, self.arithmetic = constants, abs_consts, arithmetic
        self.abs_consts32 = {k: v.abs() for k, v in constants.items()
                             if v.dtype == torch.float32}
        self.scratch = scratch
        self.dot_bounds: dict[str, DotBound] = {}
        self.linear_bounds: dict[str, LinearBound] = {}

    def local(self, at: NodeInputs) -> _DotRoute | _LinearRoute | _PairRoute | None:
        """The node's bound at PyTorch's inputs (written into a scratch buffer, which the
        checker copies if it becomes a radius); None for an exact op."""
        node = at.node
        if BOUND_RULES[node.op_type].magnitude is None:
            return None
        if self._float32_dot(at):
            v = dot_sum32(node, [torch.abs(x, out=self.scratch.get(f"abs{i}", x.shape, x.dtype))
                                 for i, x in enumerate(at.computed)], self.abs_consts32, False)
            if v is not None:
                dot = self.dot_bounds.get(node.name)
                if dot is None:
                    dot = self.dot_bounds[node.name] = DotBound.of(
                        node, self.constants, at.dtype, self.arithmetic)
                out = self.scratch.get("bound", v.shape) if v.shape == at.shape else None
                return _DotRoute(at, dot, self, dot.local(v, out))
        if node.op_type in LINEAR_FORMS:
            linear = self.linear_bounds.get(node.name)
            if linear is None:
                k = BOUND_RULES[node.op_type].roundings(
                    node, [tuple(x.shape[1:]) for x in at.values], self.constants)
                form = LINEAR_FORMS[node.op_type](node, self.abs_consts, at.values[0].dim())
                linear = self.linear_bounds[node.name] = LinearBound.of(
                    node, form, k, at.dtype, self.arithmetic)
            absolute = [torch.abs(x, out=self.scratch.get(f"abs{i}", x.shape))
                        for i, x in enumerate(at.values)]
            return _LinearRoute(linear, linear.local(absolute, self.scratch.get("bound",
                                                                                at.shape)))
        r = rounding(node, at.values, self.abs_consts, self.constants)
        return _PairRoute(at, PairBound.of(node, self.arithmetic, r.k), self.abs_consts,
                          PairBound.local(node, r, at.dtype, self.arithmetic))

    def _float32_dot(self, at: NodeInputs) -> bool:
        """Linear/Conv2d with float32 operands: magnitudes and radii are computed in float32
        and rounded up (the dot products dominate the cost of the check). Not under a
        reduced-precision mode, which would lower NCET's own float32 products too: the
        float64 route's products cannot be lowered by any flag."""
        node = at.node
        return node.op_type in FLOAT32_DOT_OPS \
            and all(x.dtype == torch.float32 for x in at.computed) \
            and not self.arithmetic.operand_u \
            and node.attrs["weight"] in self.abs_consts32 \
            and (node.attrs["bias"] is None or node.attrs["bias"] in self.abs_consts32)
