"""Certified forward error bounds: the arithmetic model and one bound rule per op_type.

For a node v with inputs x and exact real operation f, a rule gives
  * `magnitude(x)`: the sum of absolute values of the terms f adds up (S, elementwise),
  * `roundings`: how many roundings any evaluation order of f applies to a term (k),
  * `carry(e)`: how input error radii e pass through f (f is Lipschitz in this sense),
so that, computed in unit roundoff u, |fl(f(x)) - f(x)| <= gamma_k(u) * S + k * eta * (1 + M)
with M the largest constant magnitude of the node. Derivations: docs/exactness.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from .evaluate import EVALUATORS
from .ir import OP_SCHEMAS, IRNode

UNIT_ROUNDOFF: dict[torch.dtype, float] = {
    torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24,
    torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11,
}
"""u = 2^-p for a p-bit significand, round to nearest."""

SMALLEST_NORMAL: dict[torch.dtype, float] = {
    d: torch.finfo(d).tiny for d in UNIT_ROUNDOFF}
"""eta: the underflow unit; the smallest normal covers flush-to-zero and denormals-are-zero."""

REDUCED_PRECISION_U = {"tf32": 2.0 ** -11, "bf16": 2.0 ** -8, "high": 2.0 ** -11,
                       "medium": 2.0 ** -8}
"""Unit roundoff of float32 matmul/convolution under a reduced-precision backend mode."""

SAFETY = 1.0 + 2.0 ** -20
"""Bounds are computed in float64 (relative error far below 2^-30 for any layer size NCET
handles) and multiplied by this factor, so they are rounded up."""


def gamma(k: float, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u)."""
    if k * u >= 1:
        return math.inf
    return k * u / (1 - k * u)


@dataclass(frozen=True)
class ArithmeticModel:
    """The floating-point arithmetic the bounds assume, read from the backend flags in force.

    Attributes:
        matmul_u: Unit roundoff for float32 Linear/Conv2d (2^-24 unless a reduced-precision
            mode is on).
        flags: The flags read, by name.
        notes: Plain-language statements of what is assumed.
    """

    matmul_u: float
    flags: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def unit_roundoff(self, dtype: torch.dtype, op_type: str) -> float:
        """u for an op of `op_type` computed in `dtype`."""
        u = UNIT_ROUNDOFF[dtype]
        if dtype == torch.float32 and op_type in ("Linear", "Conv2d"):
            return max(u, self.matmul_u)
        return u

    def describe(self) -> str:
        flags = ", ".join(f"{k}={v}" for k, v in self.flags.items())
        return "; ".join((*self.notes, f"flags: {flags}"))


def read_arithmetic_model() -> ArithmeticModel:
    """Read PyTorch's precision flags and declare the arithmetic they imply."""
    mkldnn = torch.backends.mkldnn
    flags = {
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "mkldnn.fp32_precision": str(getattr(mkldnn, "fp32_precision", "n/a")),
        "mkldnn.matmul.fp32_precision": str(getattr(getattr(mkldnn, "matmul", None),
                                                    "fp32_precision", "n/a")),
        "mkldnn.conv.fp32_precision": str(getattr(getattr(mkldnn, "conv", None),
                                                  "fp32_precision", "n/a")),
        "cuda.matmul.allow_tf32": str(torch.backends.cuda.matmul.allow_tf32),
        "cudnn.allow_tf32": str(torch.backends.cudnn.allow_tf32),
    }
    reduced = [v for k, v in flags.items() if v in REDUCED_PRECISION_U]
    matmul_u = max([UNIT_ROUNDOFF[torch.float32]] + [REDUCED_PRECISION_U[v] for v in reduced])
    notes = ["IEEE 754 binary arithmetic, round to nearest, any summation order, FMA allowed",
             "u = 2^-24 (float32), 2^-53 (float64); eta = smallest normal (covers FTZ/DAZ)",
             "CPU kernels; the CUDA TF32 flags are read but apply to CUDA only"]
    if matmul_u > UNIT_ROUNDOFF[torch.float32]:
        notes.append(f"reduced-precision float32 matmul/convolution in force: "
                     f"u = 2^{round(math.log2(matmul_u))} for Linear and Conv2d")
    return ArithmeticModel(matmul_u, flags, tuple(notes))


# --- the rules --------------------------------------------------------------------------
Magnitude = Callable[[IRNode, list[torch.Tensor], dict[str, torch.Tensor]], torch.Tensor]


@dataclass(frozen=True, slots=True)
class BoundRule:
    """How one op_type rounds and carries error (see the module docstring)."""

    magnitude: Magnitude | None  # None: the op is exact (no rounding)
    roundings: Callable[[IRNode, list[tuple[int, ...]], dict[str, torch.Tensor]], float]
    carry: Callable[[IRNode, list[torch.Tensor], dict[str, torch.Tensor]], torch.Tensor]


def _c(consts, name):
    return None if name is None else consts[name]


def _same_op(node, es, consts):
    """For ops monotone and positively homogeneous in each input (pools, means, moves of
    data), the error radius goes through the op itself."""
    return EVALUATORS[node.op_type](node, es, consts)


def _identity_carry(node, es, consts):
    return es[0]


def _linear_mag(node, xs, ac):
    return F.linear(xs[0], ac[node.attrs["weight"]], _c(ac, node.attrs["bias"]))


def _linear_carry(node, es, ac):
    return F.linear(es[0], ac[node.attrs["weight"]])


def _conv_attrs_without_bias(node):
    attrs = dict(node.attrs)
    attrs["bias"] = None
    return attrs


def _conv_mag(node, xs, ac):
    return EVALUATORS["Conv2d"](node, xs, ac)


def _conv_carry(node, es, ac):
    stripped = IRNode(node.name, node.op_type, node.inputs, _conv_attrs_without_bias(node),
                      node.shape, node.dtype, node.source)
    return EVALUATORS["Conv2d"](stripped, es, ac)


def _dot_roundings(node, shapes, consts):
    weight = consts[node.attrs["weight"]]
    n = weight[0].numel()  # terms per output: in_features, or (C/groups)*kh*kw
    return n + 2  # n products summed in any order, plus the bias, plus FMA slack


def _bn_scale(node, ac):
    a = node.attrs
    scale = 1.0 / torch.sqrt(ac[a["var"]] + a["eps"])
    if a["weight"] is not None:
        scale = scale * ac[a["weight"]]
    return scale


def _channel(t: torch.Tensor, rank: int) -> torch.Tensor:
    """A per-channel vector shaped to broadcast over batched (N, C, ...) tensors."""
    return t.reshape(t.shape[0], *([1] * (rank - 2)))


def _bn_mag(node, xs, ac):
    rank = xs[0].dim()
    scale = _channel(_bn_scale(node, ac), rank)
    mag = (xs[0] + _channel(ac[node.attrs["mean"]], rank)) * scale
    if node.attrs["bias"] is not None:
        mag = mag + _channel(ac[node.attrs["bias"]], rank)
    return mag


def _bn_carry(node, es, ac):
    return es[0] * _channel(_bn_scale(node, ac), es[0].dim())


def _window_roundings(node, shapes, consts):
    kh, kw = node.attrs["kernel_size"]
    return kh * kw + 3  # window sum, the division (or a reciprocal and a product), slack


def _adaptive_roundings(node, shapes, consts):
    (_, h, w), (oh, ow) = shapes[0], node.attrs["output_size"]
    return (math.ceil(h / oh) + 1) * (math.ceil(w / ow) + 1) + 3


def _mean_roundings(node, shapes, consts):
    shape = shapes[0]
    return math.prod(shape[a] for a in node.attrs["axes"]) + 2


def _leaky_mag(node, xs, ac):
    return xs[0] * node.attrs["negative_slope"]


def _sum_mag(node, xs, ac):
    return xs[0] + abs(node.attrs["alpha"]) * xs[1]


def _sum_carry(node, es, ac):
    return es[0] + abs(node.attrs["alpha"]) * es[1]


def _sum_roundings(node, shapes, consts):
    return 1 if node.attrs["alpha"] == 1 else 3  # alpha rounded, the product, the sum


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


def _affine_roundings(node, shapes, consts):
    a = node.attrs
    # The constant is rounded to the op's dtype when it is a Python scalar or of another dtype.
    converted = a["constant"] is None or consts[a["constant"]].dtype != _dtype(node)
    k = 1 + int(converted)
    if a["kind"] == "div":
        k += 1  # a kernel may multiply by a rounded reciprocal
    if a["kind"] in ("add", "sub") and a["alpha"] != 1:
        k += 2  # alpha rounded, and its product
    return k


def _dtype(node: IRNode) -> torch.dtype:
    return getattr(torch, node.dtype)


def _exact(carry=_same_op) -> BoundRule:
    return BoundRule(None, lambda n, s, c: 0, carry)


BOUND_RULES: dict[str, BoundRule] = {
    "Linear": BoundRule(_linear_mag, _dot_roundings, _linear_carry),
    "Conv2d": BoundRule(_conv_mag, _dot_roundings, _conv_carry),
    "BatchNorm": BoundRule(_bn_mag, lambda n, s, c: 10, _bn_carry),
    "AdaptiveAvgPool2d": BoundRule(_same_op, _adaptive_roundings, _same_op),
    "AvgPool2d": BoundRule(_same_op, _window_roundings, _same_op),
    "MaxPool2d": _exact(),
    "Identity": _exact(_identity_carry),
    "ReLU": _exact(_identity_carry),
    "LeakyReLU": BoundRule(_leaky_mag, lambda n, s, c: 2, _identity_carry),
    "Flatten": _exact(),
    "Add": BoundRule(_sum_mag, _sum_roundings, _sum_carry),
    "Sub": BoundRule(_sum_mag, _sum_roundings, _sum_carry),
    "ElementwiseAffine": BoundRule(_affine_mag, _affine_roundings, _affine_carry),
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


def constant_magnitude(node: IRNode, abs_consts: dict[str, torch.Tensor]) -> float:
    """M: the largest absolute constant the node multiplies by (1 when it has none)."""
    _, schema = OP_SCHEMAS[node.op_type]
    largest = 1.0
    for attr, kind in schema.items():
        name = node.attrs[attr]
        if kind.startswith("const") and name is not None and abs_consts[name].numel():
            largest = max(largest, float(abs_consts[name].max()))
    for attr in ("scalar", "alpha", "negative_slope"):
        value: Any = node.attrs.get(attr)
        if isinstance(value, float):
            largest = max(largest, abs(value))
    if node.op_type == "BatchNorm":
        largest = max(largest, float(_bn_scale(node, abs_consts).abs().max()))
    if node.op_type == "ElementwiseAffine" and node.attrs["kind"] == "div":
        k = _affine_k(node, abs_consts)
        smallest = float(k.min()) if isinstance(k, torch.Tensor) else k
        largest = max(largest, 1.0 / smallest)
    return largest


def local_bound(node: IRNode, inputs: list[torch.Tensor], consts: dict[str, torch.Tensor],
                dtype: torch.dtype, arithmetic: ArithmeticModel | None = None) -> torch.Tensor:
    """Certified bound on |fl(f(x)) - f(x)| for one node computed in `dtype` on `inputs`.

    Args:
        node: The IR node.
        inputs: Its input values (batched; any float dtype, read exactly).
        consts: The IR's constants (any float dtype, read exactly).
        dtype: The precision the node is computed in.
        arithmetic: The arithmetic model (flags); read from PyTorch when None.
    """
    rule = BOUND_RULES[node.op_type]
    xs = [x.to(torch.float64).abs() for x in inputs]
    if rule.magnitude is None:
        return torch.zeros_like(EVALUATORS[node.op_type](node, xs, _f64(consts)))
    abs_consts = {k: v.abs() for k, v in _f64(consts).items()}
    arithmetic = arithmetic or read_arithmetic_model()
    u = arithmetic.unit_roundoff(dtype, node.op_type)
    k = rule.roundings(node, [tuple(x.shape[1:]) for x in xs], abs_consts)
    underflow = k * SMALLEST_NORMAL[dtype] * (1 + constant_magnitude(node, abs_consts))
    return (gamma(k, u) * rule.magnitude(node, xs, abs_consts) + underflow) * SAFETY


def enclose(ir, *inputs: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The float64 reference value of every node with a certified radius around the exact
    real value: |value - [[G]](x)| <= radius elementwise (inputs taken as exact).

    Returns:
        node name -> (value, radius), for the Input nodes and every operator node.
    """
    consts = _f64(ir.constants)
    abs_consts = {k: v.abs() for k, v in consts.items()}
    arithmetic = read_arithmetic_model()
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for node, x in zip(ir.inputs, inputs):
        out[node.name] = (x.to(torch.float64), torch.zeros((), dtype=torch.float64))
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        values = [out[i][0] for i in node.inputs]
        radii = [out[i][1].expand_as(out[i][0]) for i in node.inputs]
        value = EVALUATORS[node.op_type](node, values, consts)
        # The rounding is bounded on |inputs|; the error carried from the inputs is added.
        radius = local_bound(node, values, ir.constants, torch.float64, arithmetic) \
            + BOUND_RULES[node.op_type].carry(node, radii, abs_consts) * SAFETY
        out[node.name] = (value, radius)
    return out


def _f64(consts) -> dict[str, torch.Tensor]:
    return {k: v.to(torch.float64) for k, v in consts.items()}
