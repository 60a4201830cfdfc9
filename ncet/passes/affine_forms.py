"""Elementwise affine nodes read as `y = a * x + b` with `a`, `b` of the value's per-sample
shape (as `Carried` float64 with error bounds): ElementwiseAffine by a constant, BatchNorm,
and the data-movement ops that move `a` and `b` along with the values."""

from __future__ import annotations

import torch

from ..evaluate import EVALUATORS
from ..ir import IRNode
from .carried import Carried

Form = tuple[Carried, Carried]
"""(a, b): y = a * x + b elementwise, both of the per-sample shape."""

MOVES = frozenset({"Flatten", "Reshape", "Permute", "Transpose"})
"""One-input ops that only move elements: a and b move with the values."""


def identity_form(shape: tuple[int, ...]) -> Form:
    """y = x."""
    return Carried.exact(torch.ones(shape)), Carried.exact(torch.zeros(shape))


def _per_sample(stored: torch.Tensor, shape: tuple[int, ...]) -> Carried | None:
    """A constant (with any radius a pass registered for it) broadcast to the per-sample
    shape, or None when it would widen the values (broadcast them over more elements) or
    spread over the batch axis."""
    try:
        full = torch.broadcast_shapes(tuple(stored.shape), (1, *shape))
    except RuntimeError:
        return None
    if full != (1, *shape):
        return None
    c = Carried.of(stored)
    return Carried(c.value.expand(full)[0].clone(), c.error.expand(full)[0].clone())


def _operand(node: IRNode, consts, shape) -> Carried | str:
    a = node.attrs
    if a["constant"] is None:
        return Carried.exact(torch.full(shape, float(a["scalar"]), dtype=torch.float64))
    full = _per_sample(consts[a["constant"]], shape)
    if full is None:
        return f"its constant's shape {list(consts[a['constant']].shape)} does not fit " \
               f"the value's {list(shape)}"
    return full


def batchnorm_scale(var: Carried, eps: float, weight: Carried | None) -> Carried:
    """s = weight / sqrt(var + eps) (weight 1 when None)."""
    root = (var + Carried.exact(torch.full_like(var.value, eps))).sqrt()
    one = Carried.exact(torch.ones_like(var.value))
    return (weight if weight is not None else one) / root


def batchnorm_shift(b: Carried, mean: Carried, s: Carried, bias: Carried | None) -> Carried:
    """(b - mean) s + bias: BatchNorm applied to the shift b of the form before it."""
    shift = (b - mean) * s
    return shift if bias is None else shift + bias


def elementwise_step(node: IRNode, form: Form, consts) -> Form | str:
    """The form after `node` given the form before it, or why `node` is not of this kind.

    ElementwiseAffine: add and sub (either operand order, any alpha), mul, and x / c;
    c / x is not affine. BatchNorm: (x - mean) * weight / sqrt(var + eps) + bias per
    channel (axis 0 of the per-sample shape).
    """
    a, b = form
    shape = tuple(a.value.shape)
    if node.op_type == "BatchNorm":
        at = node.attrs
        per_channel = (shape[0],) + (1,) * (len(shape) - 1)

        def channel(name):
            c = Carried.of(consts[name]).reshape(*per_channel)
            return Carried(c.value.expand(shape).clone(), c.error.expand(shape).clone())

        weight = channel(at["weight"]) if at["weight"] is not None else None
        bias = channel(at["bias"]) if at["bias"] is not None else None
        s = batchnorm_scale(channel(at["var"]), float(at["eps"]), weight)
        return a * s, batchnorm_shift(b, channel(at["mean"]), s, bias)
    if node.op_type != "ElementwiseAffine":
        return f"{node.op_type} is not an elementwise affine op"
    at = node.attrs
    c = _operand(node, consts, shape)
    if isinstance(c, str):
        return c
    alpha = Carried.exact(torch.full(shape, float(at["alpha"]), dtype=torch.float64))
    x_left = at["tensor_position"] == 0
    kind = at["kind"]
    if kind == "mul":
        return a * c, b * c
    if kind == "div":
        if not x_left:
            return "c / x is not affine in x"
        return a / c, b / c
    sign = 1.0 if kind == "add" else -1.0
    signed = Carried.exact(torch.full(shape, sign, dtype=torch.float64)) * alpha
    if x_left:  # x + alpha c, x - alpha c
        return a, b + signed * c
    # c + alpha x, c - alpha x
    return signed * a, c + signed * b


def move_step(node: IRNode, form: Form) -> Form:
    """The form after a data-movement node: a and b moved as the values are."""

    def move(t: torch.Tensor) -> torch.Tensor:
        return EVALUATORS[node.op_type](node, [t[None]], {})[0]

    a, b = form
    return (Carried(move(a.value), move(a.error)), Carried(move(b.value), move(b.error)))


def along(form: Form, keep: int) -> Form | None:
    """The form reduced to the per-sample axis `keep`, when a and b do not vary along the
    other axes (value and error alike); else None. Returns vectors along `keep`."""
    a, b = form
    out = []
    for t in (a, b):
        v, e = t.value.movedim(keep, -1), t.error.movedim(keep, -1)
        n = v.shape[-1]
        rows_v, rows_e = v.reshape(-1, n), e.reshape(-1, n)
        if not bool((rows_v == rows_v[0]).all()):
            return None
        out.append(Carried(rows_v[0].clone(), rows_e.max(0).values))
    return out[0], out[1]


def is_identity(form: Form) -> bool:
    """a == 1 and b == 0 exactly, with no error."""
    a, b = form
    return bool((a.value == 1).all() and (b.value == 0).all()
                and (a.error == 0).all() and (b.error == 0).all())


def has_shift(form: Form) -> bool:
    """b is not exactly 0."""
    b = form[1]
    return bool((b.value != 0).any() or (b.error != 0).any())

