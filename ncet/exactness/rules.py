"""The bound rules: for every op_type, what its exact real operation f adds up, how often
any evaluation order rounds one term, what a rounded constant multiplies, and how input
error passes through f (docs/exactness.md §3, one section per rule).

A rule is four named functions of the node, its inputs (absolute values or error radii,
float64, batched) and the absolute float64 constants; `bounds.py` turns them into bounds.
Nothing here is about speed: the fused forms of the same rules are in `fused_bounds.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from ..evaluate import EVALUATORS
from ..ir import OP_SCHEMAS, IRNode

Tensors = list[torch.Tensor]
Consts = dict[str, torch.Tensor]
Shapes = list[tuple[int, ...]]

# --- rounding counts beyond the terms, by rule (the derivations are in §3) --------------
DOT_SLACK = 2
"""Linear/Conv2d (§3.1, §3.2): k = n + 2 for n products: one rounding per product, at most
n additions (the bias one of the n + 1 leaves), and one of slack."""

BATCH_NORM_ROUNDINGS = 10
"""BatchNorm (§3.3): at most 8 roundings on any term's path on either CPU path, plus 2 of
slack."""

WINDOW_DIVISION = 3
"""AvgPool2d and AdaptiveAvgPool2d (§3.4, §3.5): beyond the window sum, the divisor's
conversion and a division (or two reciprocals and products), with slack."""

ADAPTIVE_WINDOW_OVERHANG = 1
"""An adaptive window is at most ceil(H / oh) + 1 rows (and columns) long (§3.4)."""

MEAN_DIVISION = 2
"""ReduceMean (§3.9): beyond the sum, the division (or a reciprocal and a product), plus the
count's conversion."""

LEAKY_RELU_ROUNDINGS = 2
"""LeakyReLU (§3.7): the slope rounded to the compute dtype, and its product."""

SCALED_OPERAND = 2
"""Add, Sub and ElementwiseAffine with alpha != 1 (§3.8): alpha rounded, and its product."""

RECIPROCAL = 1
"""ElementwiseAffine's division (§3.8, §2.4 item 4): a kernel may multiply by a rounded
reciprocal."""


@dataclass(frozen=True, slots=True)
class BoundRule:
    """How one op_type rounds and carries error; every function takes (node, inputs,
    constants) as in the module docstring, `roundings` per-sample input shapes instead.

    Attributes:
        magnitude: S(|x|), the sum of the absolute values of the terms f adds up; None for
            an exact op (no rounding: the local bound is 0).
        roundings: k, how many roundings any evaluation order applies to one term.
        carry: C(E), a bound on |f(a) - f(b)| given |a - b| <= E.
        exposed: X(|x|), what a constant rounded into the compute dtype (maybe to a
            subnormal) multiplies; None where nothing does (X = 0).
    """

    magnitude: Callable[[IRNode, Tensors, Consts], torch.Tensor] | None
    roundings: Callable[[IRNode, Shapes, Consts], float]
    carry: Callable[[IRNode, Tensors, Consts], torch.Tensor]
    exposed: Callable[[IRNode, Tensors, Consts], torch.Tensor | float] | None = None


def same_op(node: IRNode, values: Tensors, consts: Consts) -> torch.Tensor:
    """For ops monotone and positively homogeneous in each input (pools, means, moves of
    data), magnitudes and error radii go through the op itself."""
    return EVALUATORS[node.op_type](node, values, consts)


def first_input(node: IRNode, values: Tensors, consts: Consts) -> torch.Tensor:
    return values[0]


def no_roundings(node: IRNode, shapes: Shapes, consts: Consts) -> float:
    return 0


def exact(carry=same_op) -> BoundRule:
    """The rule of an op that does no arithmetic: no magnitude, no rounding."""
    return BoundRule(None, no_roundings, carry)


# --- Linear and Conv2d: dot products (§3.1, §3.2) ---------------------------------------
def dot_length(node: IRNode, consts: Consts) -> int:
    """n, the products in one output: in_features, or (C / groups) kh kw."""
    return math.prod(consts[node.attrs["weight"]].shape[1:])


def dot_roundings(node: IRNode, shapes: Shapes, consts: Consts) -> float:
    return dot_length(node, consts) + DOT_SLACK


def _bias(consts: Consts, name: str | None) -> torch.Tensor | None:
    return None if name is None else consts[name]


def linear_magnitude(node, xs, consts):
    """|W| |x| + |b|."""
    return F.linear(xs[0], consts[node.attrs["weight"]], _bias(consts, node.attrs["bias"]))


def linear_carry(node, es, consts):
    """|W| E."""
    return F.linear(es[0], consts[node.attrs["weight"]])


def conv_magnitude(node, xs, consts):
    """conv(pad |x|, |W|) + |b|."""
    return EVALUATORS["Conv2d"](node, xs, consts)


def conv_carry(node, es, consts):
    """conv(pad E, |W|): the convolution without its bias."""
    return EVALUATORS["Conv2d"](replace(node, attrs={**node.attrs, "bias": None}), es, consts)


# --- BatchNorm (§3.3) -------------------------------------------------------------------
def batch_norm_scale(node: IRNode, consts: Consts) -> torch.Tensor:
    """|w| / sqrt(v + eps) per channel (on |v|, which is v for every variance conversion
    admits)."""
    a = node.attrs
    scale = 1.0 / torch.sqrt(consts[a["var"]] + a["eps"])
    return scale * consts[a["weight"]] if a["weight"] is not None else scale


def channel(t: torch.Tensor, rank: int) -> torch.Tensor:
    """A per-channel vector shaped to broadcast over batched (N, C, ...) tensors."""
    return t.reshape(t.shape[0], *([1] * (rank - 2)))


def _centred(node, xs, consts):
    return xs[0] + channel(consts[node.attrs["mean"]], xs[0].dim())


def batch_norm_magnitude(node, xs, consts):
    """(|x| + |mu|) |w| / sqrt(v + eps) + |b|."""
    rank = xs[0].dim()
    magnitude = _centred(node, xs, consts) * channel(batch_norm_scale(node, consts), rank)
    if node.attrs["bias"] is not None:
        magnitude = magnitude + channel(consts[node.attrs["bias"]], rank)
    return magnitude


def batch_norm_roundings(node, shapes, consts):
    return BATCH_NORM_ROUNDINGS


def batch_norm_carry(node, es, consts):
    """E |w| / sqrt(v + eps)."""
    return es[0] * channel(batch_norm_scale(node, consts), es[0].dim())


def batch_norm_exposed(node, xs, consts):
    """|x| + |mu| + |w|: |x - mu| meets a folded scale that may round near zero, and a
    kernel that normalises first may underflow before multiplying by the weight."""
    exposed = _centred(node, xs, consts)
    if node.attrs["weight"] is not None:
        exposed = exposed + channel(consts[node.attrs["weight"]], xs[0].dim())
    return exposed


# --- pooling and means (§3.4, §3.5, §3.9) -----------------------------------------------
def _positive_divisor(node: IRNode) -> IRNode:
    """AvgPool2d with |divisor_override|: magnitudes and radii must stay non-negative."""
    divisor = node.attrs["divisor_override"]
    if divisor is None or divisor > 0:
        return node
    return replace(node, attrs={**node.attrs, "divisor_override": -divisor})


def avg_pool(node, values, consts):
    """avgpool with |d| on |x| or E."""
    return EVALUATORS["AvgPool2d"](_positive_divisor(node), values, consts)


def window_roundings(node, shapes, consts):
    kh, kw = node.attrs["kernel_size"]
    return kh * kw + WINDOW_DIVISION


def adaptive_roundings(node, shapes, consts):
    (_, h, w), (oh, ow) = shapes[0], node.attrs["output_size"]
    return (math.ceil(h / oh) + ADAPTIVE_WINDOW_OVERHANG) \
        * (math.ceil(w / ow) + ADAPTIVE_WINDOW_OVERHANG) + WINDOW_DIVISION


def mean_roundings(node, shapes, consts):
    return math.prod(shapes[0][a] for a in node.attrs["axes"]) + MEAN_DIVISION


# --- elementwise arithmetic (§3.7, §3.8) ------------------------------------------------
def leaky_relu_magnitude(node, xs, consts):
    """s |x|."""
    return xs[0] * node.attrs["negative_slope"]


def leaky_relu_roundings(node, shapes, consts):
    return LEAKY_RELU_ROUNDINGS


def sum_magnitude(node, xs, consts):
    """|a| + |alpha| |b|."""
    return xs[0] + abs(node.attrs["alpha"]) * xs[1]


def sum_carry(node, es, consts):
    """E_a + |alpha| E_b."""
    return es[0] + abs(node.attrs["alpha"]) * es[1]


def sum_roundings(node, shapes, consts):
    return 1 if node.attrs["alpha"] == 1 else 1 + SCALED_OPERAND


def sum_exposed(node, xs, consts):
    """|b| when alpha != 1 (alpha rounded near zero, times b), else 0."""
    return 0.0 if node.attrs["alpha"] == 1 else xs[1]


def affine_constant(node: IRNode, consts: Consts) -> torch.Tensor | float:
    """|c|: the Python scalar or the lifted constant."""
    a = node.attrs
    return abs(a["scalar"]) if a["constant"] is None else consts[a["constant"]]


def affine_weights(node: IRNode) -> tuple[float, float]:
    """(w_x, w_c) of add/sub: |alpha| on whichever of x and c is the right operand."""
    alpha, x_is_right = abs(node.attrs["alpha"]), node.attrs["tensor_position"] == 1
    return (alpha, 1.0) if x_is_right else (1.0, alpha)


def affine_magnitude(node, xs, consts):
    """|x| |c|, |x| / |c|, or w_x |x| + w_c |c|."""
    kind, c = node.attrs["kind"], affine_constant(node, consts)
    if kind == "mul":
        return xs[0] * c
    if kind == "div":
        return xs[0] / c
    w_x, w_c = affine_weights(node)
    return xs[0] * w_x + c * w_c


def affine_carry(node, es, consts):
    """|c| E, E / |c|, or w_x E."""
    kind, c = node.attrs["kind"], affine_constant(node, consts)
    if kind == "mul":
        return es[0] * c
    if kind == "div":
        return es[0] / c
    return es[0] * affine_weights(node)[0]


def affine_converted(node: IRNode, consts: Consts) -> bool:
    """kappa: the constant is rounded to the op's dtype (a Python scalar, or a tensor of
    another dtype), judged on the constants' original dtypes."""
    name = node.attrs["constant"]
    return name is None or consts[name].dtype != getattr(torch, node.dtype)


def affine_roundings(node, shapes, consts):
    """1 + kappa, plus a reciprocal for div, plus alpha and its product for add/sub."""
    a = node.attrs
    k = 1 + int(affine_converted(node, consts))
    if a["kind"] == "div":
        k += RECIPROCAL
    if a["kind"] in ("add", "sub") and a["alpha"] != 1:
        k += SCALED_OPERAND
    return k


def affine_exposed(node, xs, consts):
    a = node.attrs
    if a["kind"] == "mul":
        return xs[0]  # c rounded (maybe to a subnormal) multiplies x
    if a["kind"] in ("add", "sub") and a["alpha"] != 1:
        if a["tensor_position"] == 1:
            return xs[0]  # alpha rounded near zero, times x
        # alpha rounded near zero times c, and c rounded near zero times alpha
        return (affine_constant(node, consts) + abs(a["alpha"])) * torch.ones_like(xs[0])
    return 0.0  # division: subnormal divisors are rejected at conversion


BOUND_RULES: dict[str, BoundRule] = {
    "Linear": BoundRule(linear_magnitude, dot_roundings, linear_carry),
    "Conv2d": BoundRule(conv_magnitude, dot_roundings, conv_carry),
    "BatchNorm": BoundRule(batch_norm_magnitude, batch_norm_roundings, batch_norm_carry,
                           batch_norm_exposed),
    "AdaptiveAvgPool2d": BoundRule(same_op, adaptive_roundings, same_op),
    "AvgPool2d": BoundRule(avg_pool, window_roundings, avg_pool),
    "MaxPool2d": exact(),
    "Identity": exact(first_input),
    "ReLU": exact(first_input),
    "LeakyReLU": BoundRule(leaky_relu_magnitude, leaky_relu_roundings, first_input,
                           first_input),
    "Flatten": exact(),
    "Add": BoundRule(sum_magnitude, sum_roundings, sum_carry, sum_exposed),
    "Sub": BoundRule(sum_magnitude, sum_roundings, sum_carry, sum_exposed),
    "ElementwiseAffine": BoundRule(affine_magnitude, affine_roundings, affine_carry,
                                   affine_exposed),
    "Concat": exact(),
    "ReduceMean": BoundRule(same_op, mean_roundings, same_op),
    "Reshape": exact(),
    "Permute": exact(),
    "Transpose": exact(),
    "GetItem": exact(),
    "Slice": exact(),
}
"""Every op_type's bound rule, in the order of docs/exactness.md's §3 table."""

assert set(BOUND_RULES) | {"Input", "Output"} == set(OP_SCHEMAS), "an op_type has no bound rule"


# --- constants a flush would change beyond the underflow term (§2.2) ---------------------
_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}
_MANTISSA_BITS = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23, torch.float64: 52}


def subnormal_elements(values: torch.Tensor) -> torch.Tensor:
    """Where a float tensor holds subnormal numbers of its own dtype, read from the bits
    (zero exponent field, non-zero significand), so that denormals-are-zero on the calling
    thread cannot hide them."""
    mant = _MANTISSA_BITS[values.dtype]  # the dtypes a GraphIR holds
    bits = values.contiguous().view(_BITS[values.element_size()])
    width = 8 * values.element_size() - 1 - mant
    return ((bits >> mant) & ((1 << width) - 1) == 0) & (bits & ((1 << mant) - 1) != 0)


def subnormal_constants(nodes, consts: Consts, native: tuple[str, ...] = ()) -> list[str]:
    """"node.attr" for every float tensor constant of a node with an element below the
    smallest normal of the dtype the node's kernel computes in (or subnormal in its own
    dtype): read as zero under flushing, it changes a result by |c| times what it multiplies
    (a weight times a large operand, a variance that divides), which the underflow term does
    not bound, so such a graph is NOT CERTIFIED under flushing (§2.2).

    CPU kernels compute float16 and bfloat16 in float32 (ATen's opmath; oneDNN's kernels
    accumulate in float32), where a float16 subnormal is a normal number that no flag
    flushes: a float16 node's constants are held to float32's smallest normal, unless its
    dtype is in `native` (`ArithmeticModel.flushing_kernels`: its matrix products were seen
    flushing their own subnormal operands). A bfloat16 subnormal is subnormal in float32
    too."""
    found = []
    for node in nodes:
        widened = node.dtype in ("float16", "bfloat16") and node.dtype not in native
        for attr, name in node.attrs.items():
            if not isinstance(name, str) or name not in consts \
                    or consts[name].dtype not in _MANTISSA_BITS:
                continue
            tiny = torch.finfo(torch.float32 if widened else getattr(torch, node.dtype)).tiny
            value = consts[name]
            below = (value.double().abs() < tiny) & (value != 0)
            own = subnormal_elements(value) if not (
                widened and value.dtype == torch.float16) else torch.zeros((), dtype=torch.bool)
            if bool(own.any() | below.any()):
                found.append(f"{node.name}.{attr}")
    return found
