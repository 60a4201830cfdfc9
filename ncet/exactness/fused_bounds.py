"""Fused forms of the bound rules for `check_exactness`: a node's local bound and carried
radius in a few passes over reused buffers, with the rounding of that arithmetic covered.

`DotBound` takes Linear/Conv2d's sums |W|.|x| + |b| and |W|.e computed in float32 and
rounded up (radii beyond float32 scaled by a power of two first); `LinearBound` writes an
elementwise rule as affine functions of |x_i| and e_i.
`tests/test_exactness.py::test_fused_bounds_equal_the_rules` holds both to the rules of
`bounds.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..ir import IRNode
from .arithmetic import SMALLEST_NORMAL, UNIT_ROUNDOFF, ArithmeticModel, gamma
from .bounds import BOUND_RULES, SAFETY, Consts, LinearForm, Tensors, dot_roundings

FLOAT32_DOT_OPS = ("Linear", "Conv2d")
"""Ops whose magnitudes and carried radii may be computed in float32 and rounded up."""

_F32, _F64 = torch.float32, torch.float64


_F32_INF = torch.tensor(math.inf, dtype=_F32)


_CARRY_HEADROOM = 64
"""Radii are scaled below 2^64 before their float32 product |W|.e (float32 holds up to
2^128): the end-to-end radii of deep networks grow far beyond float32."""


def carry_exponent(radii: Tensors) -> int:
    """The power of two s the radii are divided by before their float32 product |W|.e: 0
    while the largest is at most 2^64 (or is not finite), else the exponent that brings it
    into [2^63, 2^64). Multiply the float32 sum back by 2^s (`DotBound.total` does).

    Args:
        radii: Non-negative float64 radii.
    """
    largest = max((float(e.max()) for e in radii if e.numel()), default=0.0)
    if not (largest > 2.0 ** _CARRY_HEADROOM and math.isfinite(largest)):
        return 0
    return math.frexp(largest)[1] - _CARRY_HEADROOM


def round_up_to_float32(values: torch.Tensor, out: torch.Tensor | None = None,
                        exponent: int = 0) -> torch.Tensor:
    """Float32 values >= the non-negative float64 `values` / 2^exponent (inf where they
    overflow, which `dot_sum32` then reports): the float32 neighbour above the nearest
    float32, since rounding to nearest is off by at most half a spacing. The division by a
    power of two is done in float64 (the float32 store rounds its result once), exact down
    to float64's subnormals; below them the result is under the smallest float32
    subnormal, which the neighbour above covers.

    Args:
        values: Non-negative float64 values.
        out: A float32 tensor of their shape to write into (else allocated).
        exponent: s from `carry_exponent`.
    """
    if out is None:
        out = torch.empty(values.shape, dtype=_F32)
    near = torch.mul(values, math.ldexp(1.0, -exponent), out=out) if exponent \
        else out.copy_(values)
    return torch.nextafter(near, _F32_INF, out=near)


def dot_sum32(node: IRNode, abs_inputs32: Tensors, abs_consts32: Consts,
              carry: bool) -> torch.Tensor | None:
    """The float32 sum |W|.|x| + |b| (or, with `carry`, |W|.e) of a Linear/Conv2d node on
    non-negative float32 operands, or None when it overflows (not finite); `DotBound` turns
    it into rounded-up float64 bounds."""
    rule = BOUND_RULES[node.op_type]
    value = (rule.carry if carry else rule.magnitude)(node, abs_inputs32, abs_consts32)
    return value if value.numel() == 0 or math.isfinite(float(value.max())) else None


@dataclass(frozen=True, slots=True)
class DotBound:
    """A Linear/Conv2d node's bounds from float32 sums v = fl32(S) and c = fl32(C): with n
    terms, |fl32(S) - S| <= gamma_n S + n eta, so S <= F (v + n eta), F = 1 / (1 - gamma_n).
    Then, with SAFETY folded into the coefficients (applied in float64: the float32 sums are
    converted first, exactly),

      local = SAFETY [(g_t + g_r) S + k (eta_t + eta_r)]  = scale v + offset
      total = local + SAFETY (1 + g_r) C                   = local + carry_scale c + carry_offset
    """

    scale: float
    offset: float
    carry_scale: float
    carry_offset: float

    @classmethod
    def of(cls, node: IRNode, consts: Consts, dtype: torch.dtype,
           arithmetic: ArithmeticModel) -> DotBound:
        k = dot_roundings(node, [], consts)
        n = k - 1  # the products and the bias
        factor = 1 / (1 - gamma(n, UNIT_ROUNDOFF[_F32]))
        n_eta = n * SMALLEST_NORMAL[_F32]
        g_t, g_r = arithmetic.gamma(dtype, node.op_type, k), arithmetic.gamma(_F64, node.op_type, k)
        eta = SMALLEST_NORMAL[dtype] + SMALLEST_NORMAL[_F64]
        scale, carry_scale = SAFETY * (g_t + g_r) * factor, SAFETY * (1 + g_r) * factor
        return cls(scale, scale * n_eta + SAFETY * k * eta, carry_scale, carry_scale * n_eta)

    def local(self, v: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The node-local bound from the float32 magnitude sum v (into `out`, float64)."""
        out = v.to(_F64) if out is None else out.copy_(v)
        return out.mul_(self.scale).add_(self.offset)

    def total(self, local: torch.Tensor, c: torch.Tensor, exponent: int = 0) -> torch.Tensor:
        """The end-to-end radius from the local bound and the float32 carried sum c of
        radii divided by 2^exponent (`carry_exponent`): C <= 2^s F (c + n eta)."""
        return torch.add(local, c, alpha=math.ldexp(self.carry_scale, exponent)).add_(
            math.ldexp(self.carry_offset, exponent))


def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape the given shapes broadcast to, None if they do not (torch.broadcast_shapes
    without its symbolic-shape machinery, which costs more than the addcmul it guards)."""
    result = [1] * max(len(s) for s in shapes)
    for shape in shapes:
        for i, d in enumerate(shape, len(result) - len(shape)):
            if d != 1:
                if result[i] not in (1, d):
                    return None
                result[i] = d
    return tuple(result)


def _coefficient(value) -> torch.Tensor:
    """A float64 coefficient with at least one dimension, so float32 operands are promoted
    (exactly) to float64 rather than the product rounded to float32."""
    value = torch.as_tensor(value, dtype=_F64)
    return value.reshape(1) if value.dim() == 0 else value


@dataclass(frozen=True, slots=True)
class LinearBound:
    """An elementwise node's bounds from its LinearForm, SAFETY folded into the coefficients:

      local = SAFETY [(g_t + g_r) S + k (eta_t + eta_r) + 2 (eta_t + eta_r) X]
            = sum p_i |x_i| + p0
      total = local + SAFETY [(1 + g_r) C(e) + 2 eta_r X(e)]  = local + sum q_i e_i + q0
    """

    p: tuple[torch.Tensor, ...]
    p0: torch.Tensor
    q: tuple[torch.Tensor, ...]
    q0: torch.Tensor | None

    @classmethod
    def of(cls, node: IRNode, form: LinearForm, k: float, dtype: torch.dtype,
           arithmetic: ArithmeticModel) -> LinearBound:
        g_t, g_r = arithmetic.gamma(dtype, node.op_type, k), arithmetic.gamma(_F64, node.op_type, k)
        eta_t, eta_r = SMALLEST_NORMAL[dtype], SMALLEST_NORMAL[_F64]
        g, x = g_t + g_r, 2 * (eta_t + eta_r)
        p = tuple(_coefficient(SAFETY * (g * a + x * b)) for a, b in zip(form.a, form.b))
        p0 = _coefficient(SAFETY * (g * form.a0 + k * (eta_t + eta_r) + x * form.b0))
        q = tuple(_coefficient(SAFETY * ((1 + g_r) * c + 2 * eta_r * b))
                  for c, b in zip(form.c, form.b))
        q0 = None if isinstance(form.b0, float) and form.b0 == 0 else \
            _coefficient(SAFETY * 2 * eta_r * form.b0)
        return cls(p, p0, q, q0)

    def local(self, abs_inputs: Tensors, out: torch.Tensor | None = None) -> torch.Tensor:
        """The node-local bound from the inputs' absolute values (float64), into `out`
        (a float64 tensor of the node's batched shape) when given."""
        if out is not None and out.shape != _broadcast(self.p0.shape, abs_inputs[0].shape,
                                                       self.p[0].shape):
            out = None
        out = torch.addcmul(self.p0, abs_inputs[0], self.p[0], out=out)
        for x, p in zip(abs_inputs[1:], self.p[1:]):
            out = out.addcmul_(x, p) if out.shape == _broadcast(out.shape, x.shape, p.shape) \
                else torch.addcmul(out, x, p)
        return out

    def total(self, local: torch.Tensor, radii: Tensors) -> torch.Tensor:
        """The end-to-end radius from the local bound and the inputs' radii."""
        out = torch.addcmul(local, radii[0], self.q[0])
        for e, q in zip(radii[1:], self.q[1:]):
            out = torch.addcmul(out, e, q)
        return out if self.q0 is None else out.add_(self.q0)
