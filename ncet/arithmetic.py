"""The declared floating-point arithmetic: unit roundoffs, underflow, backend precision flags."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

UNIT_ROUNDOFF: dict[torch.dtype, float] = {
    torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24,
    torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11,
}
"""u = 2^-p for a p-bit significand, round to nearest."""

SMALLEST_NORMAL: dict[torch.dtype, float] = {d: torch.finfo(d).tiny for d in UNIT_ROUNDOFF}
"""eta: bounds the absolute error of one rounding near zero, with gradual underflow or with
results flushed to zero."""

REDUCED_PRECISION_U = {"tf32": 2.0 ** -11, "bf16": 2.0 ** -8, "high": 2.0 ** -11,
                       "medium": 2.0 ** -8}
"""Unit roundoff of the operands of float32 matmul/convolution in a reduced-precision mode
(the products are accumulated in float32)."""

MATMUL_OPS = ("Linear", "Conv2d")


def gamma(k: float, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u); infinite when k u >= 1."""
    if k * u >= 1:
        return math.inf
    return k * u / (1 - k * u)


def _flushes_denormals() -> bool:
    tiny = torch.tensor([2.0 ** -140], dtype=torch.float32)
    return bool((tiny * 1.5)[0] == 0)


@dataclass(frozen=True)
class ArithmeticModel:
    """The arithmetic the bounds assume, read from the backend flags in force.

    Attributes:
        operand_u: Unit roundoff to which float32 Linear/Conv2d operands are rounded
            (0 in IEEE float32 mode; 2^-11 for TF32, 2^-8 for bfloat16 modes).
        certified: False when a mode outside the model is on (the report says which).
        flags: The flags read, by name.
        notes: Plain-language statements of what is assumed.
    """

    operand_u: float = 0.0
    certified: bool = True
    flags: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def gamma(self, dtype: torch.dtype, op_type: str, k: float) -> float:
        """The relative error factor of `k` roundings of an op computed in `dtype`."""
        g = gamma(k, UNIT_ROUNDOFF[dtype])
        if dtype == torch.float32 and op_type in MATMUL_OPS and self.operand_u:
            g += gamma(2, self.operand_u) * (1 + g)  # both operands rounded, then the sum
        return g

    def describe(self) -> str:
        flags = ", ".join(f"{k}={v}" for k, v in self.flags.items())
        return "; ".join((*self.notes, f"flags: {flags}"))


def read_arithmetic_model() -> ArithmeticModel:
    """Read PyTorch's precision flags and declare the arithmetic they imply."""
    mkldnn = torch.backends.mkldnn
    flags = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "mkldnn.fp32_precision": str(getattr(mkldnn, "fp32_precision", "n/a")),
        "mkldnn.matmul.fp32_precision": str(getattr(getattr(mkldnn, "matmul", None),
                                                    "fp32_precision", "n/a")),
        "mkldnn.conv.fp32_precision": str(getattr(getattr(mkldnn, "conv", None),
                                                  "fp32_precision", "n/a")),
        "mkldnn.enabled": str(torch._C._get_mkldnn_enabled()),
        "nnpack.enabled": str(torch._C._get_nnpack_enabled()),
        "flush_denormal": str(_flushes_denormals()),
        "cuda.matmul.allow_tf32": str(torch.backends.cuda.matmul.allow_tf32),
        "cudnn.allow_tf32": str(torch.backends.cudnn.allow_tf32),
    }
    reduced = [REDUCED_PRECISION_U[v] for v in flags.values() if v in REDUCED_PRECISION_U]
    operand_u = max(reduced, default=0.0)
    notes = ["IEEE 754 binary arithmetic, round to nearest, any summation order, FMA allowed",
             "u = 2^-24 (float32), 2^-53 (float64); underflow: eta = smallest normal per "
             "rounding, results may flush to zero",
             "CPU kernels; the CUDA TF32 flags are read but apply to CUDA only"]
    certified = True
    if operand_u:
        notes.append(f"reduced-precision float32 matmul/convolution: operands rounded to "
                     f"u = 2^{round(math.log2(operand_u))}, accumulated in float32")
    if flags["flush_denormal"] == "True":
        certified = False
        notes.append("NOT CERTIFIED: denormals-are-zero is on (torch.set_flush_denormal(True)): "
                     "subnormal inputs and constants read as zero")
    flags["mkldnn.available"] = str(torch.backends.mkldnn.is_available())
    if "False" in (flags["mkldnn.enabled"], flags["mkldnn.available"]) \
            and flags["nnpack.enabled"] == "True":
        certified = False
        notes.append("NOT CERTIFIED: oneDNN is disabled, so float32 convolutions may run "
                     "in NNPACK (Winograd/FFT), whose error the Conv2d bound does not cover")
    return ArithmeticModel(operand_u, certified, flags, tuple(notes))
