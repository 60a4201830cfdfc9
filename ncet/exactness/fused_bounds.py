"""A fast path: the bound formulas of `bounds.py` fused into a few passes over reused
buffers (docs/exactness.md §2.5), for the checker when the fast paths are on
(`fast_paths.fast_paths_on()`).

`LinearBound` writes an elementwise rule (BatchNorm, LeakyReLU, Add, Sub,
ElementwiseAffine) as affine functions of |x_i| and e_i (`LINEAR_FORMS`, one per op_type,
stating the rule of `rules.py` as coefficients) and folds Gamma, eta and SAFETY into them;
`PairBound` evaluates the formulas of any other rule in place. The float32 route of
Linear/Conv2d is in `float32_dots.py`. `tests/test_exactness.py` holds every form to the rules
and `tests/test_exactness_fast_paths.py` the checker's reports to the reference path's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..ir import IRNode
from .arithmetic import SMALLEST_NORMAL, ArithmeticModel
from .bounds import SAFETY, Rounding
from .rules import (
    Consts,
    Tensors,
    affine_constant,
    affine_weights,
    batch_norm_scale,
    channel,
)

_F64 = torch.float64


@dataclass(frozen=True, slots=True)
class LinearForm:
    """An elementwise rule written as affine functions of the inputs' |x_i| and radii e_i:
    S = sum a_i |x_i| + a0,  X = sum b_i |x_i| + b0,  C(e) = sum c_i e_i,  X(e) = sum b_i e_i
    + b0; the coefficients broadcast against the batched values (per channel, per element or
    scalars)."""

    a: tuple
    a0: torch.Tensor | float
    b: tuple
    b0: torch.Tensor | float
    c: tuple


def batch_norm_form(node: IRNode, consts: Consts, rank: int) -> LinearForm:
    """a = s, a0 = s |mu| + |beta|, b = 1, b0 = |mu| + |w|, c = s (s = |w| / sqrt(v + eps))."""
    a = node.attrs
    s, mu = channel(batch_norm_scale(node, consts), rank), channel(consts[a["mean"]], rank)
    beta = 0.0 if a["bias"] is None else channel(consts[a["bias"]], rank)
    w = 0.0 if a["weight"] is None else channel(consts[a["weight"]], rank)
    return LinearForm((s,), s * mu + beta, (1.0,), mu + w, (s,))


def leaky_relu_form(node: IRNode, consts: Consts, rank: int) -> LinearForm:
    """a = s, b = 1, c = 1."""
    return LinearForm((node.attrs["negative_slope"],), 0.0, (1.0,), 0.0, (1.0,))


def sum_form(node: IRNode, consts: Consts, rank: int) -> LinearForm:
    """a = (1, |alpha|), b = (0, 0 if alpha = 1 else 1), c = a."""
    alpha = abs(node.attrs["alpha"])
    return LinearForm((1.0, alpha), 0.0, (0.0, 0.0 if node.attrs["alpha"] == 1 else 1.0), 0.0,
                      (1.0, alpha))


def affine_form(node: IRNode, consts: Consts, rank: int) -> LinearForm:
    """mul: a = c = |c|, b = 1; div: a = c = 1 / |c|; add/sub: a = c = w_x, a0 = w_c |c|,
    and for alpha != 1, b = 1 (x is r) or b0 = |c| + |alpha| (c is r)."""
    a, k = node.attrs, affine_constant(node, consts)
    if a["kind"] == "mul":
        return LinearForm((k,), 0.0, (1.0,), 0.0, (k,))
    if a["kind"] == "div":
        return LinearForm((1 / k,), 0.0, (0.0,), 0.0, (1 / k,))
    x_weight, k_weight = affine_weights(node)
    if a["alpha"] == 1:
        b, b0 = 0.0, 0.0
    else:
        b, b0 = (1.0, 0.0) if a["tensor_position"] == 1 else (0.0, k + abs(a["alpha"]))
    return LinearForm((x_weight,), k * k_weight, (b,), b0, (x_weight,))


LINEAR_FORMS: dict[str, Callable[[IRNode, Consts, int], LinearForm]] = {
    "BatchNorm": batch_norm_form,
    "LeakyReLU": leaky_relu_form,
    "Add": sum_form,
    "Sub": sum_form,
    "ElementwiseAffine": affine_form,
}
"""The elementwise rules as LinearForms, by op_type (called with the node, the absolute
float64 constants and the batched rank)."""


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


@dataclass(frozen=True, slots=True)
class PairBound:
    """Any other rounding rule's bounds in place: the node-local bound and, at the end-to-end
    check, the radius, the same formulas as `bounds.node_local_bound` and
    `bounds.end_to_end_radius` regrouped, B_r(S + C, X + X(E)) = B_r(S, X) + g_r C +
    2 eta_r X(E)."""

    g_ref: float  # Gamma_r(k)

    @classmethod
    def of(cls, node: IRNode, arithmetic: ArithmeticModel, k: float) -> PairBound:
        return cls(arithmetic.gamma(_F64, node.op_type, k))

    @staticmethod
    def local(node: IRNode, r: Rounding, dtype: torch.dtype,
              arithmetic: ArithmeticModel) -> torch.Tensor:
        """SAFETY [B_t(S_t, X_t) + B_r(S_t, X_t)]."""
        assert r.magnitude is not None
        g_torch = arithmetic.gamma(dtype, node.op_type, r.k)
        g_ref = arithmetic.gamma(_F64, node.op_type, r.k)
        eta_torch, eta_ref = SMALLEST_NORMAL[dtype], SMALLEST_NORMAL[_F64]
        out = r.magnitude * (g_torch + g_ref)
        out.add_(r.k * (eta_torch + eta_ref))
        exposed = 2 * (eta_torch + eta_ref) * r.exposed
        out = out + exposed if isinstance(exposed, torch.Tensor) \
            and exposed.shape != out.shape else out.add_(exposed)
        return out.mul_(SAFETY)

    def total(self, local: torch.Tensor, carried: torch.Tensor,
              exposed: torch.Tensor | float) -> torch.Tensor:
        """local + SAFETY [(1 + g_r) C(E) + 2 eta_r X(E)]."""
        total = torch.add(local, carried, alpha=SAFETY * (1 + self.g_ref))
        if isinstance(exposed, torch.Tensor):
            total = total.add_(exposed, alpha=2 * SMALLEST_NORMAL[_F64] * SAFETY) \
                if exposed.shape == total.shape else total + 2 * SMALLEST_NORMAL[_F64] \
                * SAFETY * exposed
        return total
