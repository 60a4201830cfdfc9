"""Certified forward error bounds: one bound rule per op_type.

For a node with inputs x and exact real operation f, a rule gives
  * `magnitude(|x|)`: S, the sum of absolute values of the terms f adds up (elementwise),
  * `roundings`: k, how many roundings any evaluation order applies to one term,
  * `exposed(|x|)`: the operand multiplied by a constant that is first rounded to the op's
    dtype (a Python scalar, alpha, a slope, BatchNorm's scale), whose rounding near zero
    has an absolute error of at most eta,
  * `carry(e)`: how input error radii e pass through f,
so that in unit roundoff u: |fl(f(x)) - f(x)| <= gamma_k(u) S + k eta + 2 eta exposed.
Derivations: docs/exactness.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..evaluate import EVALUATORS
from ..ir import OP_SCHEMAS, IRNode
from .arithmetic import (
    SMALLEST_NORMAL,
    ArithmeticModel,
    read_arithmetic_model,
)

SAFETY = 1.0 + 2.0 ** -20
"""Bounds are computed in float64 (relative error far below 2^-30 for any layer size NCET
handles) and multiplied by this factor, so they are rounded up."""

Tensors = list[torch.Tensor]
Consts = dict[str, torch.Tensor]


@dataclass(frozen=True, slots=True)
class BoundRule:
    """How one op_type rounds and carries error (see the module docstring)."""

    magnitude: Callable[[IRNode, Tensors, Consts], torch.Tensor] | None  # None: exact op
    roundings: Callable[[IRNode, list[tuple[int, ...]], Consts], float]
    carry: Callable[[IRNode, Tensors, Consts], torch.Tensor]
    exposed: Callable[[IRNode, Tensors, Consts], torch.Tensor | float] | None = None
    linear: Callable[[IRNode, Consts, int], LinearForm] | None = None  # elementwise rules


@dataclass(frozen=True, slots=True)
class LinearForm:
    """An elementwise rule written as affine functions of the inputs' |x_i| and radii e_i:
    S = sum a_i |x_i| + a0,  X = sum b_i |x_i| + b0,  C(e) = sum c_i e_i,  X(e) = sum b_i e_i
    + b0; the coefficients broadcast against the batched values (per channel, per element or
    scalars). It lets `LinearBound` compute a bound in one fused pass per input."""

    a: tuple
    a0: torch.Tensor | float
    b: tuple
    b0: torch.Tensor | float
    c: tuple


def _c(consts, name):
    return None if name is None else consts[name]


def _same_op(node, es, consts):
    """For ops monotone and positively homogeneous in each input (pools, means, moves of
    data), magnitudes and error radii go through the op itself."""
    return EVALUATORS[node.op_type](node, es, consts)


def _identity_carry(node, es, consts):
    return es[0]


def _first_input(node, xs, consts):
    return xs[0]


# --- Linear and Conv2d: dot products ----------------------------------------------------
def _linear_mag(node, xs, ac):
    return F.linear(xs[0], ac[node.attrs["weight"]], _c(ac, node.attrs["bias"]))


def _linear_carry(node, es, ac):
    return F.linear(es[0], ac[node.attrs["weight"]])


def _conv_carry(node, es, ac):
    without_bias = IRNode(node.name, node.op_type, node.inputs, {**node.attrs, "bias": None},
                          node.shape, node.dtype, node.source)
    return EVALUATORS["Conv2d"](without_bias, es, ac)


def dot_roundings(node, shapes, consts):
    n = math.prod(consts[node.attrs["weight"]].shape[1:])  # in_features, or (C/groups)*kh*kw
    return n + 2  # n products summed in any order, plus the bias, plus FMA slack


# --- BatchNorm --------------------------------------------------------------------------
def _bn_scale(node, ac):
    a = node.attrs
    scale = 1.0 / torch.sqrt(ac[a["var"]] + a["eps"])
    return scale * ac[a["weight"]] if a["weight"] is not None else scale


def _channel(t: torch.Tensor, rank: int) -> torch.Tensor:
    """A per-channel vector shaped to broadcast over batched (N, C, ...) tensors."""
    return t.reshape(t.shape[0], *([1] * (rank - 2)))


def _bn_centred(node, xs, ac):
    return xs[0] + _channel(ac[node.attrs["mean"]], xs[0].dim())


def _bn_exposed(node, xs, ac):
    """|x - mean| meets a scale that may round near zero, and a kernel that normalises
    first may underflow before multiplying by the weight."""
    exposed = _bn_centred(node, xs, ac)
    if node.attrs["weight"] is not None:
        exposed = exposed + _channel(ac[node.attrs["weight"]], xs[0].dim())
    return exposed


def _bn_mag(node, xs, ac):
    mag = _bn_centred(node, xs, ac) * _channel(_bn_scale(node, ac), xs[0].dim())
    if node.attrs["bias"] is not None:
        mag = mag + _channel(ac[node.attrs["bias"]], xs[0].dim())
    return mag


def _bn_carry(node, es, ac):
    return es[0] * _channel(_bn_scale(node, ac), es[0].dim())


def _bn_linear(node, ac, rank):
    a = node.attrs
    s, mu = _channel(_bn_scale(node, ac), rank), _channel(ac[a["mean"]], rank)
    beta = 0.0 if a["bias"] is None else _channel(ac[a["bias"]], rank)
    w = 0.0 if a["weight"] is None else _channel(ac[a["weight"]], rank)
    return LinearForm((s,), s * mu + beta, (1.0,), mu + w, (s,))


# --- pooling and means ------------------------------------------------------------------
def _positive_divisor(node: IRNode) -> IRNode:
    """AvgPool2d with |divisor_override|: magnitudes and radii must stay non-negative."""
    divisor = node.attrs["divisor_override"]
    if divisor is None or divisor > 0:
        return node
    return IRNode(node.name, node.op_type, node.inputs,
                  {**node.attrs, "divisor_override": -divisor}, node.shape, node.dtype,
                  node.source)


def _avg_pool(node, xs, ac):
    return EVALUATORS["AvgPool2d"](_positive_divisor(node), xs, ac)


def _window_roundings(node, shapes, consts):
    kh, kw = node.attrs["kernel_size"]
    return kh * kw + 3  # window sum, the division (or a reciprocal and a product), slack


def _adaptive_roundings(node, shapes, consts):
    (_, h, w), (oh, ow) = shapes[0], node.attrs["output_size"]
    return (math.ceil(h / oh) + 1) * (math.ceil(w / ow) + 1) + 3


def _mean_roundings(node, shapes, consts):
    return math.prod(shapes[0][a] for a in node.attrs["axes"]) + 2


# --- elementwise arithmetic -------------------------------------------------------------
def _leaky_mag(node, xs, ac):
    return xs[0] * node.attrs["negative_slope"]


def _leaky_linear(node, ac, rank):
    return LinearForm((node.attrs["negative_slope"],), 0.0, (1.0,), 0.0, (1.0,))


def _sum_linear(node, ac, rank):
    alpha = abs(node.attrs["alpha"])
    return LinearForm((1.0, alpha), 0.0, (0.0, 0.0 if node.attrs["alpha"] == 1 else 1.0), 0.0,
                      (1.0, alpha))


def _sum_mag(node, xs, ac):
    return xs[0] + abs(node.attrs["alpha"]) * xs[1]


def _sum_carry(node, es, ac):
    return es[0] + abs(node.attrs["alpha"]) * es[1]


def _sum_roundings(node, shapes, consts):
    return 1 if node.attrs["alpha"] == 1 else 3  # alpha rounded, its product, the sum


def _sum_exposed(node, xs, ac):
    return 0.0 if node.attrs["alpha"] == 1 else xs[1]


def _affine_k(node, ac) -> torch.Tensor | float:
    a = node.attrs
    return abs(a["scalar"]) if a["constant"] is None else ac[a["constant"]]


def _affine_mag(node, xs, ac):
    a, k = node.attrs, _affine_k(node, ac)
    if a["kind"] == "mul":
        return xs[0] * k
    if a["kind"] == "div":
        return xs[0] / k
    x_weight = abs(a["alpha"]) if a["tensor_position"] == 1 else 1.0
    k_weight = abs(a["alpha"]) if a["tensor_position"] == 0 else 1.0
    return xs[0] * x_weight + k * k_weight


def _affine_carry(node, es, ac):
    a, k = node.attrs, _affine_k(node, ac)
    if a["kind"] == "mul":
        return es[0] * k
    if a["kind"] == "div":
        return es[0] / k
    return es[0] * (abs(a["alpha"]) if a["tensor_position"] == 1 else 1.0)


def _affine_converted(node, consts) -> bool:
    """The constant is rounded to the op's dtype: a Python scalar, or another dtype."""
    name = node.attrs["constant"]
    return name is None or consts[name].dtype != getattr(torch, node.dtype)


def _affine_roundings(node, shapes, consts):
    a = node.attrs
    k = 1 + int(_affine_converted(node, consts))
    if a["kind"] == "div":
        k += 1  # a kernel may multiply by a rounded reciprocal
    if a["kind"] in ("add", "sub") and a["alpha"] != 1:
        k += 2  # alpha rounded, and its product
    return k


def _affine_exposed(node, xs, ac):
    a = node.attrs
    if a["kind"] == "mul":
        return xs[0]  # k rounded (maybe to a subnormal) multiplies x
    if a["kind"] in ("add", "sub") and a["alpha"] != 1:
        if a["tensor_position"] == 1:
            return xs[0]  # alpha rounded near zero, times x
        # alpha rounded near zero times k, and k rounded near zero times alpha
        return (_affine_k(node, ac) + abs(a["alpha"])) * torch.ones_like(xs[0])
    return 0.0  # division: subnormal divisors are rejected at conversion


def _affine_linear(node, ac, rank):
    a, k = node.attrs, _affine_k(node, ac)
    if a["kind"] == "mul":
        return LinearForm((k,), 0.0, (1.0,), 0.0, (k,))
    if a["kind"] == "div":
        return LinearForm((1 / k,), 0.0, (0.0,), 0.0, (1 / k,))
    x_weight = abs(a["alpha"]) if a["tensor_position"] == 1 else 1.0
    k_weight = abs(a["alpha"]) if a["tensor_position"] == 0 else 1.0
    if a["alpha"] == 1:
        b, b0 = 0.0, 0.0
    else:
        b, b0 = (1.0, 0.0) if a["tensor_position"] == 1 else (0.0, k + abs(a["alpha"]))
    return LinearForm((x_weight,), k * k_weight, (b,), b0, (x_weight,))


def _exact(carry=_same_op) -> BoundRule:
    return BoundRule(None, lambda n, s, c: 0, carry)


BOUND_RULES: dict[str, BoundRule] = {
    "Linear": BoundRule(_linear_mag, dot_roundings, _linear_carry),
    "Conv2d": BoundRule(lambda n, xs, ac: EVALUATORS["Conv2d"](n, xs, ac), dot_roundings,
                        _conv_carry),
    "BatchNorm": BoundRule(_bn_mag, lambda n, s, c: 10, _bn_carry, _bn_exposed, _bn_linear),
    "AdaptiveAvgPool2d": BoundRule(_same_op, _adaptive_roundings, _same_op),
    "AvgPool2d": BoundRule(_avg_pool, _window_roundings, _avg_pool),
    "MaxPool2d": _exact(),
    "Identity": _exact(_identity_carry),
    "ReLU": _exact(_identity_carry),
    "LeakyReLU": BoundRule(_leaky_mag, lambda n, s, c: 2, _identity_carry, _first_input,
                           _leaky_linear),
    "Flatten": _exact(),
    "Add": BoundRule(_sum_mag, _sum_roundings, _sum_carry, _sum_exposed, _sum_linear),
    "Sub": BoundRule(_sum_mag, _sum_roundings, _sum_carry, _sum_exposed, _sum_linear),
    "ElementwiseAffine": BoundRule(_affine_mag, _affine_roundings, _affine_carry,
                                   _affine_exposed, _affine_linear),
    "Concat": _exact(),
    "ReduceMean": BoundRule(_same_op, _mean_roundings, _same_op),
    "Reshape": _exact(),
    "Permute": _exact(),
    "Transpose": _exact(),
    "GetItem": _exact(),
    "Slice": _exact(),
}
"""Every op_type's bound rule."""

assert set(BOUND_RULES) | {"Input", "Output"} == set(OP_SCHEMAS), "an op_type has no bound rule"


@dataclass(frozen=True, slots=True)
class Rounding:
    """One node's rounding bound, split so several precisions can share the work:
    bound(dtype) = arithmetic.gamma(dtype, op, k) * magnitude + k eta + 2 eta exposed."""

    k: float
    magnitude: torch.Tensor | None  # None for exact ops
    exposed: torch.Tensor | float

    def bound(self, node: IRNode, dtype: torch.dtype, arithmetic: ArithmeticModel,
              magnitude: torch.Tensor | None = None) -> torch.Tensor | float:
        """The bound in `dtype`, optionally on another (larger) magnitude."""
        magnitude = self.magnitude if magnitude is None else magnitude
        if magnitude is None:
            return 0.0
        eta = SMALLEST_NORMAL[dtype]
        return arithmetic.gamma(dtype, node.op_type, self.k) * magnitude \
            + self.k * eta + 2 * eta * self.exposed

    def bound_pair(self, node: IRNode, dtype: torch.dtype, arithmetic: ArithmeticModel,
                   extra_magnitude: torch.Tensor | None = None,
                   extra_exposed: torch.Tensor | float = 0.0) -> torch.Tensor:
        """bound(dtype) + bound(float64, magnitude + extra_magnitude) in a few fused passes:
        PyTorch's rounding on its inputs plus the reference's on inputs up to
        `extra_magnitude` (and `extra_exposed`) larger."""
        assert self.magnitude is not None
        f64 = torch.float64
        g_torch = arithmetic.gamma(dtype, node.op_type, self.k)
        g_ref = arithmetic.gamma(f64, node.op_type, self.k)
        eta_torch, eta_ref = SMALLEST_NORMAL[dtype], SMALLEST_NORMAL[f64]
        out = self.magnitude * (g_torch + g_ref)
        out.add_(self.k * (eta_torch + eta_ref))
        if extra_magnitude is not None:
            out = out.add_(extra_magnitude, alpha=g_ref) if extra_magnitude.shape == out.shape \
                else out + g_ref * extra_magnitude
        exposed = 2 * (eta_torch + eta_ref) * self.exposed + 2 * eta_ref * extra_exposed
        return out + exposed if isinstance(exposed, torch.Tensor) \
            and exposed.shape != out.shape else out.add_(exposed)


def rounding(node: IRNode, inputs: Tensors, abs_consts: Consts, consts: Consts,
             magnitude: torch.Tensor | None = None) -> Rounding:
    """Evaluate a node's rule on its inputs (absolute values are taken here) and absolute
    constants (`consts`: original dtypes); `magnitude`, when given, is an upper bound on S
    computed elsewhere."""
    rule = BOUND_RULES[node.op_type]
    if rule.magnitude is None:
        return Rounding(0, None, 0.0)
    abs_inputs = [x.abs() for x in inputs]
    shapes = [tuple(x.shape[1:]) for x in abs_inputs]
    exposed = rule.exposed(node, abs_inputs, abs_consts) if rule.exposed else 0.0
    if magnitude is None:
        magnitude = rule.magnitude(node, abs_inputs, abs_consts)
    return Rounding(rule.roundings(node, shapes, consts), magnitude, exposed)


def local_bound(node: IRNode, inputs: Tensors, consts: Consts, dtype: torch.dtype,
                arithmetic: ArithmeticModel | None = None) -> torch.Tensor:
    """Certified bound on |fl(f(x)) - f(x)| for one node computed in `dtype` on `inputs`.

    Args:
        node: The IR node.
        inputs: Its input values (batched; any float dtype, read exactly).
        consts: The IR's constants in their own dtypes (read exactly).
        dtype: The precision the node is computed in.
        arithmetic: The arithmetic model (flags); read from PyTorch when None.
    """
    xs = [x.to(torch.float64) for x in inputs]
    abs_consts = {k: v.to(torch.float64).abs() for k, v in consts.items()}
    r = rounding(node, xs, abs_consts, consts)
    if r.magnitude is None:
        return torch.zeros_like(EVALUATORS[node.op_type](node, xs, abs_consts))
    return r.bound(node, dtype, arithmetic or read_arithmetic_model()) * SAFETY


def enclose(ir, *inputs: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The float64 reference value of every node with a certified radius around the exact
    real value: |value - [[G]](x)| <= radius elementwise (inputs taken as exact).

    Returns:
        node name -> (value, radius), for the Input nodes and every operator node.

    Raises:
        RuntimeError: The arithmetic in force is outside the declared model.
    """
    consts = {k: v.to(torch.float64) for k, v in ir.constants.items()}
    arithmetic = read_arithmetic_model()
    if not arithmetic.certified:
        raise RuntimeError("no certified enclosure: " + arithmetic.describe())
    abs_consts = {k: v.abs() for k, v in consts.items()}
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for node, x in zip(ir.inputs, inputs):
        out[node.name] = (x.to(torch.float64), torch.zeros((), dtype=torch.float64))
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        values = [out[i][0] for i in node.inputs]
        radii = [out[i][1].expand_as(out[i][0]) for i in node.inputs]
        value = EVALUATORS[node.op_type](node, values, consts)
        r = rounding(node, values, abs_consts, ir.constants)
        carried = BOUND_RULES[node.op_type].carry(node, radii, abs_consts)
        out[node.name] = (value, (carried + r.bound(node, torch.float64, arithmetic)) * SAFETY)
    return out
