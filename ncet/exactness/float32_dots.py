"""A fast path: the float32 round-up route of Linear/Conv2d (docs/exactness.md §2.5).

With float32 operands, the dot products |W|.|x| + |b| and |W|.e of the Linear/Conv2d rules
(`rules.py`) dominate the cost of a check. This route computes them in float32, on radii
rounded up to float32 (scaled by a power of two first when they outgrow float32), and turns
the float32 sums into float64 bounds that provably cover the rules' (`DotBound`).
`fast_paths.py` decides when it is taken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..ir import IRNode
from .arithmetic import SMALLEST_NORMAL, UNIT_ROUNDOFF, ArithmeticModel, gamma
from .bounds import SAFETY
from .rules import BOUND_RULES, Consts, Tensors, dot_length, dot_roundings

FLOAT32_DOT_OPS = ("Linear", "Conv2d")
"""Ops whose magnitudes and carried radii may be computed in float32 and rounded up."""

_F32, _F64 = torch.float32, torch.float64

_F32_INF = torch.tensor(math.inf, dtype=_F32)

CARRY_HEADROOM = 64
"""Radii are scaled below 2^64 before their float32 product |W|.e (float32 holds up to
2^128): the end-to-end radii of deep networks grow far beyond float32."""


def carry_exponent(radii: Tensors) -> int:
    """The power of two s the radii are divided by before their float32 product |W|.e: 0
    while the largest is in [2^-64, 2^64] (or is 0 or not finite), else the exponent that
    brings it into [2^63, 2^64): large radii of deep networks would overflow float32, tiny
    ones (eta at a subnormal input under flushing, §2.2) would underflow, where the route's
    n eta would swamp them. Multiply the float32 sum back by 2^s (`DotBound.total` does).

    Args:
        radii: Non-negative float64 radii.
    """
    largest = max((float(e.max()) for e in radii if e.numel()), default=0.0)
    if not (0 < largest < 2.0 ** -CARRY_HEADROOM or largest > 2.0 ** CARRY_HEADROOM) \
            or not math.isfinite(largest):
        return 0
    return math.frexp(largest)[1] - CARRY_HEADROOM


def round_up_to_float32(values: torch.Tensor, out: torch.Tensor | None = None,
                        exponent: int = 0, flush: bool = False) -> torch.Tensor:
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
        flush: Subnormals are flushed (`ArithmeticModel.flush`): a positive value whose
            float32 neighbour is below float32's smallest normal (flushed to zero when
            stored, or read as zero by the float32 product) is raised to that smallest
            normal, so that no radius is lost (docs/exactness.md §2.2).
    """
    if out is None:
        out = torch.empty(values.shape, dtype=_F32)
    near = torch.mul(values, math.ldexp(1.0, -exponent), out=out) if exponent \
        else out.copy_(values)
    up = torch.nextafter(near, _F32_INF, out=near)
    if flush:
        tiny = SMALLEST_NORMAL[_F32]
        up.masked_fill_((values > 0) & ~(up >= tiny), tiny)
    return up


def dot_sum32(node: IRNode, abs_inputs32: Tensors, abs_consts32: Consts,
              carry: bool) -> torch.Tensor | None:
    """The float32 sum |W|.|x| + |b| (or, with `carry`, |W|.e) of a Linear/Conv2d node on
    non-negative float32 operands, by the rule's own functions, or None when it overflows
    (not finite); `DotBound` turns it into rounded-up float64 bounds."""
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
        n = dot_length(node, consts) + 1  # the products and the bias
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
