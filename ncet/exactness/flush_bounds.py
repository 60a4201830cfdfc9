"""Certified bounds under flush-to-zero (docs/exactness.md §2.2): when the probes saw
subnormals flushed to zero (`ArithmeticModel.flush`), the node-local bound and the end-to-end
radius of `bounds.py` both carry the underflow term (`flush_term`), for a node with carry C
and k roundings in dtype d, m the inputs that may be flushed (0 < |x| < eta_d, `flushable`):

    Phi_d = SAFETY [(3 + 2 Gamma_d(k)) (C(eta_d m) + C(eta_64 1)) + 2 k eta_d]

(`FlushedBounds` adds it on every route). An exact op gets 2 eta C(m) (a comparison may read a
subnormal operand as zero, `ExactFlushedBound`) and a graph input the radius eta m where it is
subnormal (`input_radius`), so the loss reaches the next rounding node. Otherwise Phi = 0 and
the bounds are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..ir import IRNode
from .arithmetic import SMALLEST_NORMAL, ArithmeticModel
from .bounds import SAFETY, NodeBound, NodeInputs
from .rules import BOUND_RULES, Consts, Shapes, Tensors, subnormal_elements

_F64 = torch.float64


FLUSH_CARRIES = 3
"""Phi = SAFETY [(FLUSH_CARRIES + 2 Gamma_t(k)) (C(eta m) + C(eta_64 1)) + FLUSH_ROUNDINGS k eta]
(§2.2): C(eta m) for PyTorch's operands read as zero (1), the reference's conversion of them
to float64 (1), one spare, and NCET's magnitudes computed from flushed operands (2 Gamma);
C(eta_64 1) for the float64 reference's own operands below 2^-1022."""

FLUSH_ROUNDINGS = 2
"""k eta for the conversion of PyTorch's value to float64 and for NCET's own flushed results
(k eta spare) (§2.2)."""


def flushable(x: torch.Tensor, eta: float) -> torch.Tensor:
    """Where `x` holds a value that flushing in a dtype with smallest normal `eta` may read as
    zero (0 < |x| < eta): x's own subnormals from their bits (denormals-are-zero on the
    calling thread cannot hide them), and, for float64, values below eta, which are normal
    doubles and compare exactly."""
    if not x.is_floating_point():
        return torch.zeros(x.shape, dtype=torch.bool)
    mask = subnormal_elements(x)
    if x.dtype == _F64:
        mask |= (x.abs() < eta) & (x != 0)
    return mask


FLUSH_COMPARED = 2
"""An exact op's bound under flushing is FLUSH_COMPARED eta C(m) (§2.2): a comparison reads
its operands as zero below eta (the chosen one's value within eta of the true maximum) and
returns the chosen operand's own bits (another eta)."""


def compared_eta(dtype: torch.dtype) -> float:
    """The eta below which a comparison or a move of `dtype` values may read them as zero
    under flushing: float32's for float16 (CPU kernels widen float16 to float32, exactly
    whatever denormals-are-zero says, where its subnormals are normal numbers; §2.2), else
    the dtype's own smallest normal (0 for an integer dtype)."""
    return SMALLEST_NORMAL[torch.float32] if dtype == torch.float16 \
        else SMALLEST_NORMAL.get(dtype, 0.0)


def input_radius(x: torch.Tensor, arithmetic: ArithmeticModel) -> torch.Tensor:
    """A graph input's radius under flushing (§2.2): eta of its dtype where it is
    subnormal in its bits (a kernel, or the float64 conversion under denormals-are-zero,
    may read it as zero, and an exact op such as ReLU or MaxPool carries that loss to the
    next rounding node, whose own inputs are then zeros); a scalar 0 otherwise."""
    zero = torch.zeros((), dtype=_F64)
    if not arithmetic.flush or not x.is_floating_point():
        return zero
    eta = compared_eta(x.dtype)
    mask = flushable(x, eta)
    return mask.to(_F64).mul_(eta) if bool(mask.any()) else zero


@dataclass(frozen=True, slots=True)
class FlushTerm:
    """A node's underflow term Phi (§2.2) in two parts: `base`, SAFETY [(3 + 2 Gamma)
    C(eta_64 1) + 2 k eta] (one sample's shape, batch dimension 1), and `factor` (SAFETY (3 +
    2 Gamma)) times C(eta m), m the operands that may be flushed (`of`)."""

    node: IRNode
    eta: float
    factor: float
    base: torch.Tensor

    @classmethod
    def at(cls, node: IRNode, shapes: Shapes, abs_consts: Consts, consts: Consts,
           dtype: torch.dtype, arithmetic: ArithmeticModel,
           operands: tuple[torch.dtype, ...] = ()) -> FlushTerm:
        rule = BOUND_RULES[node.op_type]
        eta = max(SMALLEST_NORMAL.get(d, 0.0) for d in (dtype, *operands))
        k = rule.roundings(node, shapes, consts)
        factor = SAFETY * (FLUSH_CARRIES + 2 * arithmetic.gamma(dtype, node.op_type, k))
        tiny = [torch.full((1, *shape), SMALLEST_NORMAL[_F64], dtype=_F64) for shape in shapes]
        base = factor * rule.carry(node, tiny, abs_consts) + SAFETY * FLUSH_ROUNDINGS * k * eta
        return cls(node, eta, factor, base)

    def of(self, masks: list[torch.Tensor], abs_consts: Consts) -> torch.Tensor:
        """Phi with m = `masks` (bool, batched like the inputs)."""
        if not any(bool(m.any()) for m in masks):
            return self.base
        radii = [m.to(_F64).mul_(self.eta) for m in masks]
        carried = BOUND_RULES[self.node.op_type].carry(self.node, radii, abs_consts)
        return self.base + self.factor * carried


def flush_term(node: IRNode, shapes: Shapes, abs_consts: Consts, consts: Consts,
               dtype: torch.dtype, arithmetic: ArithmeticModel,
               operands: tuple[torch.dtype, ...] = (),
               masks: list[torch.Tensor] | None = None) -> torch.Tensor | float:
    """Phi, the underflow term of a node computed in `dtype` when the probes saw flushing
    (§2.2): 0 without flushing and for an exact op; else a float64 tensor of the node's
    per-sample shape with a leading batch dimension (1 when `masks` is None).

    Args:
        node: The IR node.
        shapes: Its inputs' per-sample shapes.
        abs_consts: |constants| in float64 (the carry reads them).
        consts: The constants in their original dtypes (k reads them).
        dtype: The dtype PyTorch computed the node in.
        arithmetic: The arithmetic model; `flush` turns the term on.
        operands: The dtypes of the node's inputs as PyTorch holds them: eta is the largest
            smallest normal of `dtype` and these (a float32 operand promoted to a float64
            node is read as zero below float32's, 2^-126).
        masks: Where each input may be flushed (`flushable`, batched); None: everywhere.
    """
    if not arithmetic.flush or BOUND_RULES[node.op_type].magnitude is None:
        return 0.0
    term = FlushTerm.at(node, shapes, abs_consts, consts, dtype, arithmetic, operands)
    if masks is None:
        masks = [torch.ones((1, *shape), dtype=torch.bool) for shape in shapes]
    return term.of(masks, abs_consts)



@dataclass(frozen=True, slots=True)
class FlushedBound:
    """A rounding node's bound on any route with the underflow term Phi added to the
    node-local bound and to the end-to-end radius (§2.2)."""

    inner: NodeBound
    flushed: torch.Tensor
    value: torch.Tensor

    def radius(self, radii: Tensors) -> torch.Tensor:
        return self.inner.radius(radii) + self.flushed


class FlushedBounds:
    """The checker's bounds (`inner`, any route) with the underflow term added at every
    rounding node: the bounds under flushing (§2.2). Its constant part is computed once per
    node and dtype; C(eta m) only for a chunk where some operand may be flushed."""

    def __init__(self, inner, constants: Consts, abs_consts: Consts,
                 arithmetic: ArithmeticModel):
        self.inner, self.constants, self.abs_consts = inner, constants, abs_consts
        self.arithmetic = arithmetic
        self.terms: dict[tuple[str, torch.dtype], FlushTerm] = {}

    def local(self, at: NodeInputs) -> FlushedBound | ExactFlushedBound | None:
        bound = self.inner.local(at)
        if bound is None:
            return ExactFlushedBound.at(at, self.abs_consts)
        key = (at.node.name, at.dtype)
        term = self.terms.get(key)
        if term is None:
            term = self.terms[key] = FlushTerm.at(
                at.node, [tuple(x.shape[1:]) for x in at.values], self.abs_consts,
                self.constants, at.dtype, self.arithmetic, tuple(x.dtype for x in at.computed))
        flushed = term.of([flushable(x, term.eta) for x in at.computed], self.abs_consts)
        return FlushedBound(bound, flushed, bound.value + flushed)


@dataclass(frozen=True, slots=True)
class ExactFlushedBound:
    """An exact op (ReLU, MaxPool, a reshape...) under flushing (§2.2): denormals-are-zero
    may read its subnormal inputs as zero (a comparison does) and returns the chosen
    input's own bits, so its value is within 2 eta C(m) of the op on its inputs, m where
    they may be flushed (`FLUSH_COMPARED`); carried to the next rounding node with the
    inputs' radii."""

    node: IRNode
    abs_consts: Consts
    value: torch.Tensor

    @classmethod
    def at(cls, at: NodeInputs, abs_consts: Consts) -> ExactFlushedBound | None:
        """None when no input may be flushed (the op is then exact as without flushing)."""
        eta = max((compared_eta(x.dtype) for x in at.computed), default=0.0)
        masks = [flushable(x, eta) for x in at.computed]
        if not any(bool(m.any()) for m in masks):
            return None
        radii = [m.to(_F64).mul_(eta) for m in masks]
        carry = BOUND_RULES[at.node.op_type].carry
        return cls(at.node, abs_consts,
                   SAFETY * FLUSH_COMPARED * carry(at.node, radii, abs_consts))

    def radius(self, radii: Tensors) -> torch.Tensor:
        return BOUND_RULES[self.node.op_type].carry(self.node, radii, self.abs_consts) \
            + self.value
