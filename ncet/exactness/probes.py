"""Probes of the arithmetic where PyTorch runs it: what no flag shows.

Each probe runs a few PyTorch operations whose IEEE results are known exactly, and says what
departs from IEEE 754 round-to-nearest with gradual underflow. The element-wise probes run
on tensors large enough that ATen splits them over every intra-op worker thread, because
the floating-point environment (flush-to-zero, denormals-are-zero, the rounding mode) is per
thread: OpenMP workers copy the creating thread's state when they start and keep it, so
`torch.set_flush_denormal` or `fesetround` on one thread tells nothing about the others.

A probe returns None when the arithmetic is as declared, or the reason it is not. Flushing
(of operands or results) turns on the bounds' underflow term (docs/exactness.md §2.2); any
other departure makes the report NOT CERTIFIED.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

PER_THREAD = 1 << 16
"""Elements per intra-op thread in the element-wise probes: twice ATen's grain size (32,768),
so that every thread of the pool takes a share."""

FPMATH_VARIABLES = ("ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE")
"""oneDNN's environment variables for its default math mode: anything but STRICT lets it
compute float32 operations with lower-precision operands."""

FPMATH_OPERAND_U = {"BF16": 2.0 ** -8, "F16": 2.0 ** -11, "TF32": 2.0 ** -11,
                    "ANY": 2.0 ** -8}
"""Unit roundoff of the operands in each of oneDNN's implicit down-conversion modes (ANY
allows any of them, bf16 the coarsest)."""

FPMATH_CERTIFIED = ("BF16", "TF32")
"""The modes whose operands keep float32's exponent range (8 exponent bits), so that the
widened bound and the underflow term cover them; F16 (float16 operands: subnormal below
6.1e-5, inf above 65504) and ANY (which allows F16) do not, nor does an unknown mode."""


def _spread(pattern: list[float], dtype: torch.dtype) -> torch.Tensor:
    """`pattern` repeated over enough elements for every intra-op thread to take some."""
    n = max(torch.get_num_threads(), 1) * PER_THREAD
    reps = -(-n // len(pattern))
    return torch.tensor(pattern, dtype=dtype).repeat(reps)


def _where(bad: torch.Tensor) -> str:
    """Which part of a probe tensor went wrong: the calling thread takes the first share."""
    n = bad.numel()
    shares = max(torch.get_num_threads(), 1)
    hit = sorted({int(i) * shares // n for i in bad.nonzero().flatten().tolist()[:: 997]})
    return ("on the calling thread" if hit == [0] else
            f"on {len(hit)} of {shares} intra-op threads")


SPACING = 1024
"""One probed value per this many elements (the rest are 1.0): every thread's share holds
dozens of them, and arithmetic on subnormals, which is slow on most CPUs, stays rare."""


def _sparse(value: float, dtype: torch.dtype) -> torch.Tensor:
    pattern = [value] + [1.0] * (SPACING - 1)
    return _spread(pattern, dtype)


def probe_subnormals() -> str | None:
    """Subnormal numbers survive on every intra-op thread: neither denormals-are-zero
    (subnormal operands read as 0) nor flush-to-zero (subnormal results stored as 0)."""
    for dtype in (torch.float32, torch.float64):
        name = str(dtype).removeprefix("torch.")
        tiny = torch.finfo(dtype).tiny
        read = (_sparse(tiny / 2, dtype) * 3) == 0  # a normal result from a subnormal operand
        if bool(read.any()):
            return (f"denormals-are-zero is set {_where(read)}: subnormal {name} operands "
                    "read as zero")
        stored = (_sparse(tiny, dtype) * 0.5) == 0  # a subnormal result from normal operands
        if bool(stored.any()):
            return (f"flush-to-zero is set {_where(stored)}: subnormal {name} results are "
                    "stored as zero")
    return None


def probe_rounding() -> str | None:
    """Every intra-op thread rounds to nearest: 1 ± e and -1 ± e, with e far below half an
    ulp of 1, round back to ±1 exactly (upward, downward and toward-zero rounding do not)."""
    for dtype, e in ((torch.float64, 2.0 ** -60), (torch.float32, 2.0 ** -30)):
        a = _spread([1.0, 1.0, -1.0, -1.0], dtype)
        b = _spread([e, -e, e, -e], dtype)
        wrong = (a + b) != a
        if bool(wrong.any()):
            return (f"the rounding mode is not round-to-nearest {_where(wrong)} "
                    "(fesetround?): every bound assumes it")
    return None


def read_fpmath_mode() -> tuple[float, str | None]:
    """oneDNN's default math mode from the environment: (operand unit roundoff, the
    variable's text), (0, None) when it is unset or STRICT; an unknown value counts as
    the coarsest mode."""
    for name in FPMATH_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value and value.upper() not in ("STRICT", "F32"):
            return FPMATH_OPERAND_U.get(value.upper(), 2.0 ** -8), f"{name}={value}"
    return 0.0, None


LOW_PRECISION_PROBE_ROWS = 64
"""Rows of the low-precision matmul probe: at this batch a bfloat16 Linear takes oneDNN's
path (on CPUs with AVX512-BF16 or AMX); at a handful of rows it takes ATen's own."""


def probe_low_precision_subnormals(dtype: torch.dtype) -> str | None:
    """`dtype` (bfloat16 or float16) matrix products and convolutions keep subnormal
    operands: oneDNN's low-precision kernels (AVX512-BF16, AMX) flush them whatever the
    flags say.

    The probe multiplies rows of subnormal values by weights whose exact products and sums
    are representable normal numbers, so any flushed operand shows as a zero.
    """
    tiny = torch.finfo(dtype).tiny
    k = 16
    x = torch.full((LOW_PRECISION_PROBE_ROWS, k), tiny / 4, dtype=dtype)  # subnormal
    w = torch.full((k, k), 64.0, dtype=dtype)  # each sum: 16 * 64 * tiny/4 = 256 tiny
    image = x.reshape(LOW_PRECISION_PROBE_ROWS, k, 1, 1).expand(-1, -1, 4, 4).contiguous()
    products = {"matrix products": lambda rows: F.linear(x[:rows], w),
                "convolutions": lambda rows: F.conv2d(image[:rows], w.reshape(k, k, 1, 1))}
    for kind, product in products.items():
        for rows in (LOW_PRECISION_PROBE_ROWS, 4):
            if bool((product(rows) == 0).any()):
                return (f"{str(dtype).removeprefix('torch.')} {kind} flush subnormal "
                        f"operands to zero (seen at {rows} rows: oneDNN's low-precision "
                        "kernels)")
    return None
