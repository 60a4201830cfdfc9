"""The declared floating-point arithmetic: unit roundoffs, underflow, backend precision flags."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from . import probes

UNIT_ROUNDOFF: dict[torch.dtype, float] = {
    torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24,
    torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11,
}
"""u = 2^-p for a p-bit significand, round to nearest."""

SMALLEST_NORMAL: dict[torch.dtype, float] = {d: torch.finfo(d).tiny for d in UNIT_ROUNDOFF}
"""eta: bounds the absolute error of one rounding near zero, with gradual underflow or with
results flushed to zero, and the change of an operand that is flushed to zero."""

FLUSH_NOTE = ("flush-to-zero seen ({}): underflow term 2^-126 per operand, product and sum "
              "(eta, the smallest normal of the node's dtype: 2^-126 for float32 and "
              "bfloat16), (3 + 2 Gamma) C(eta m + eta_64) + 2 k eta per node, m the operands below "
              "eta (docs/exactness.md §2.2)")
"""The report's statement of the arithmetic assumed when the probes see flushing."""

FLUSH_VERDICT = ("assumed: flush-to-zero seen, underflow term 2^-126 per product (eta of the "
                 "node's dtype per operand, product and sum)")
"""What the verdict line adds when the bounds carry the underflow term."""

REDUCED_PRECISION_U = {"tf32": 2.0 ** -11, "bf16": 2.0 ** -8, "high": 2.0 ** -11,
                       "medium": 2.0 ** -8}
"""Unit roundoff of the operands of float32 matmul/convolution in a reduced-precision mode
(the products are accumulated in float32)."""

MATMUL_OPS = ("Linear", "Conv2d")

LOW_PRECISION = (torch.bfloat16, torch.float16)
"""Dtypes whose CPU matrix products accumulate in float32 and round once at the end."""


SUSPICION_LAMBDA = 6.0
"""lambda of the probabilistic bound: per inner product of length k, Higham and Mary's bound
fails with probability at most 2k exp(-lambda^2 (1 - u)^2 / 2) under their model of
independent, mean-zero rounding errors (about 3e-5 at k = 1026)."""


def probabilistic_gamma(k: float, u: float, lam: float = SUSPICION_LAMBDA) -> float:
    """Higham and Mary's probabilistic gamma~_k(lambda) = exp(lambda sqrt(k) u + k u^2 /
    (1 - u)) - 1 ("A new approach to probabilistic rounding error analysis", SIAM J. Sci.
    Comput. 41(5), 2019, Theorem 2.4): about lambda sqrt(k) u where gamma_k is k u. A
    statement about likely rounding, not a bound: NCET uses it only to flag nodes as
    suspicious, never in the certificate."""
    return math.expm1(lam * math.sqrt(k) * u + k * u * u / (1 - u))


def low_precision_dot_gamma(g32: float, u: float) -> float:
    """The relative error factor of a bfloat16/float16 matrix product whose float32
    accumulation errs by at most g32 relative: (1 + g32)(1 + u)^2 - 1. The products are exact
    in float32; the sum is rounded to the dtype once, and once more where ATen adds the bias
    after the product (`F.linear` on a non-contiguous input of 3 or more dimensions)."""
    return (1 + g32) * (1 + u) ** 2 - 1


def gamma(k: float, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u); infinite when k u >= 1."""
    if k * u >= 1:
        return math.inf
    return k * u / (1 - k * u)


@dataclass(frozen=True)
class ArithmeticModel:
    """The arithmetic the bounds assume, read from the backend flags in force.

    Attributes:
        operand_u: Unit roundoff to which float32 Linear/Conv2d operands are rounded
            (0 in IEEE float32 mode; 2^-11 for TF32, 2^-8 for bfloat16 modes).
        certified: False when a mode outside the model is on (the report says which).
        flags: The flags read, by name.
        notes: Plain-language statements of what is assumed.
        flush: True when the probes saw subnormal operands or results flushed to zero
            (flush-to-zero or denormals-are-zero on a thread, low-precision kernels, a
            reduced-precision mode): every rounding node's bounds then carry the underflow
            term of docs/exactness.md §2.2 (`flush_bounds.flush_term`).
        flushing_kernels: The low-precision dtypes ("float16", "bfloat16") whose matrix
            products and convolutions were seen flushing their own subnormal operands
            (`probes.probe_low_precision_subnormals`); elsewhere CPU kernels compute these
            dtypes in float32 (`rules.subnormal_constants`).
    """

    operand_u: float = 0.0
    certified: bool = True
    flags: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    flush: bool = False
    flushing_kernels: tuple[str, ...] = ()

    def outside(self, reason: str) -> ArithmeticModel:
        """This model, NOT CERTIFIED for `reason` (added to the notes)."""
        return replace(self, certified=False, notes=(*self.notes, f"NOT CERTIFIED: {reason}"))

    def gamma(self, dtype: torch.dtype, op_type: str, k: float,
              probable: bool = False) -> float:
        """The relative error factor of `k` roundings of an op computed in `dtype`; with
        `probable`, Higham and Mary's probabilistic factor in its place (the second tier,
        never the certificate).

        A bfloat16/float16 Linear or Conv2d multiplies its operands exactly in float32 and
        accumulates there (`low_precision_dot_gamma`), not gamma_k(u), which is infinite
        from 254 (bfloat16) or 2,046 (float16) terms on."""
        of = probabilistic_gamma if probable else gamma
        if dtype in LOW_PRECISION and op_type in MATMUL_OPS:
            return low_precision_dot_gamma(of(k, UNIT_ROUNDOFF[torch.float32]),
                                           UNIT_ROUNDOFF[dtype])
        g = of(k, UNIT_ROUNDOFF[dtype])
        if dtype == torch.float32 and op_type in MATMUL_OPS and self.operand_u:
            g += gamma(2, self.operand_u) * (1 + g)  # both operands rounded, then the sum
        return g

    def describe(self) -> str:
        flags = ", ".join(f"{k}={v}" for k, v in self.flags.items())
        return "; ".join((*self.notes, f"flags: {flags}"))


def _read(getter) -> str:
    """A flag's value as text; a getter that raises (PyTorch refuses to mix its old and new
    precision APIs) gives "unreadable", which the caller treats as outside the model."""
    try:
        return str(getter())
    except Exception as error:  # noqa: BLE001 - any failure to read is reported, not raised
        return f"unreadable ({type(error).__name__})"


def _attr(path: str):
    """A getter of `torch.backends.<path>`, "n/a" when this PyTorch has no such flag."""
    def getter():
        value = torch.backends
        for part in path.split("."):
            value = getattr(value, part, None)
            if value is None:
                return "n/a"
        return value
    return getter


PRECISION_FLAGS = {
    "float32_matmul_precision": torch.get_float32_matmul_precision,
    "fp32_precision": _attr("fp32_precision"),
    "mkldnn.fp32_precision": _attr("mkldnn.fp32_precision"),
    "mkldnn.matmul.fp32_precision": _attr("mkldnn.matmul.fp32_precision"),
    "mkldnn.conv.fp32_precision": _attr("mkldnn.conv.fp32_precision"),
    "mkldnn.enabled": torch._C._get_mkldnn_enabled,
    "nnpack.enabled": torch._C._get_nnpack_enabled,
    "cuda.matmul.allow_tf32": _attr("cuda.matmul.allow_tf32"),
    "cudnn.allow_tf32": _attr("cudnn.allow_tf32"),
}
"""PyTorch's precision flags, old API and new, by the name the report shows them under."""

CPU_PRECISION_FLAGS = ("float32_matmul_precision", "fp32_precision", "mkldnn.fp32_precision",
                       "mkldnn.matmul.fp32_precision", "mkldnn.conv.fp32_precision")
"""The flags that can lower the precision of float32 matmul/convolution on the CPU."""


def _effective(flags: dict[str, str], name: str) -> str:
    """A precision flag's effective value: in PyTorch's new API "none" inherits from the
    parent (`mkldnn.matmul` from `mkldnn`, `mkldnn` from the root `fp32_precision`)."""
    chain = {"mkldnn.matmul.fp32_precision": ("mkldnn.fp32_precision", "fp32_precision"),
             "mkldnn.conv.fp32_precision": ("mkldnn.fp32_precision", "fp32_precision"),
             "mkldnn.fp32_precision": ("fp32_precision",)}.get(name, ())
    for key in (name, *chain):
        if flags[key] not in ("none", "n/a"):
            return flags[key]
    return flags[name]


def read_arithmetic_model(low_precision: tuple[torch.dtype, ...] = ()) -> ArithmeticModel:
    """Read PyTorch's precision flags and oneDNN's math mode, probe what no flag shows
    (flush-to-zero and denormals-are-zero on every intra-op thread, the rounding mode, and,
    for the dtypes in `low_precision`, whether their matrix products flush subnormal
    operands), and declare the arithmetic they imply. Flushing seen anywhere turns on the
    underflow term (`ArithmeticModel.flush`, a note says so); a rounding mode other than
    round to nearest, an unreadable precision flag or NNPACK is outside the model. Never
    raises for a flag it cannot read: that is itself outside the model."""
    flags = {name: _read(getter) for name, getter in PRECISION_FLAGS.items()}
    fpmath_u, fpmath = probes.read_fpmath_mode()
    if fpmath:
        flags["onednn.fpmath_mode"] = fpmath.partition("=")[2]
    flags["mkldnn.available"] = _read(torch.backends.mkldnn.is_available)
    notes = ["IEEE 754 binary arithmetic, round to nearest, any summation order, FMA allowed",
             "u = 2^-24 (float32), 2^-53 (float64); underflow: eta = smallest normal per "
             "rounding, results may flush to zero",
             "CPU kernels; the CUDA TF32 flags are read but apply to CUDA only"]
    outside, flushed = [], []
    unreadable = [k for k in CPU_PRECISION_FLAGS if flags[k].startswith("unreadable")]
    if unreadable == ["float32_matmul_precision"] and all(
            flags[k] not in ("n/a",) for k in CPU_PRECISION_FLAGS[1:]):
        unreadable = []  # the legacy getter refuses once the new API is used: read that one
    if unreadable:
        outside.append(f"the precision flag(s) {', '.join(unreadable)} cannot be read "
                       "(PyTorch's old and new precision APIs are mixed), so the precision "
                       "of float32 matmul/convolution is unknown")
    lowered = [k for k in CPU_PRECISION_FLAGS if _effective(flags, k) in REDUCED_PRECISION_U]
    reduced = [REDUCED_PRECISION_U[_effective(flags, k)] for k in lowered]
    operand_u = max([*reduced, fpmath_u], default=0.0)
    if operand_u:
        source = ", ".join([*(f"{k}={_effective(flags, k)}" for k in lowered),
                            *([fpmath] if fpmath else [])])
        notes.append(f"reduced-precision float32 matmul/convolution ({source}): operands "
                     f"rounded to u = 2^{round(math.log2(operand_u))}, accumulated in float32")
        flushed.append(f"{source}: oneDNN flushes subnormal float32 operands in this mode")
    if fpmath and fpmath.partition("=")[2].strip().upper() not in probes.FPMATH_CERTIFIED:
        outside.append(f"oneDNN's math mode {fpmath} may round float32 operands to float16, "
                       "which lacks float32's exponent range (subnormal below 6.1e-5, inf "
                       "above 65504): no relative bound holds; certified: BF16, TF32")
    subnormals, rounding = probes.probe_subnormals(), probes.probe_rounding()
    if rounding:
        outside.append(rounding)
    if subnormals:
        flushed.append(subnormals)
    if not (subnormals or rounding):
        notes.append("probed on every intra-op thread: subnormals kept, round to nearest")
    flags["flush_denormal"] = str(subnormals is not None)
    kernels = []
    for dtype in dict.fromkeys(low_precision):
        found = probes.probe_low_precision_subnormals(dtype)
        if found:
            flushed.append(found)
            kernels.append(str(dtype).removeprefix("torch."))
    if flushed:
        notes.append(FLUSH_NOTE.format("; ".join(flushed)))
    if "False" in (flags["mkldnn.enabled"], flags["mkldnn.available"]) \
            and flags["nnpack.enabled"] == "True":
        outside.append("oneDNN is disabled, so float32 convolutions may run in NNPACK "
                       "(Winograd/FFT), whose error the Conv2d bound does not cover")
    notes.extend(f"NOT CERTIFIED: {reason}" for reason in outside)
    return ArithmeticModel(operand_u, not outside, flags, tuple(notes), bool(flushed),
                           tuple(kernels))


def changed_since(first: ArithmeticModel,
                  low_precision: tuple[torch.dtype, ...] = ()) -> str | None:
    """Read and probe the arithmetic again (`read_arithmetic_model`) after the model ran,
    and say what differs from `first`, the reading the bounds were built on, or None.

    A forward() that calls `torch.set_flush_denormal(True)` or changes a precision flag (or
    a library it calls that does) changes the arithmetic under the check's feet: the first
    reading did not see it, so the bounds do not cover it."""
    now = read_arithmetic_model(low_precision)
    changes = [f"{k}: {first.flags.get(k, 'unset')} -> {v}" for k, v in now.flags.items()
               if first.flags.get(k) != v]
    changes += [f"{k}: {v} -> unset" for k, v in first.flags.items() if k not in now.flags]
    for note in now.notes:  # what the probes now see
        if note not in first.notes:
            changes.append(note.partition("): underflow term")[0] + ")"
                           if note.startswith("flush-to-zero seen (") else note)
    if not changes:
        return None
    return ("the model changed the floating-point environment during the check ("
            + "; ".join(changes) + "), after the arithmetic was read and probed: the bounds "
            "assume the arithmetic of that first reading")
