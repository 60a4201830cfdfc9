"""Float64 values that carry a certified bound on their distance from the exact real value
they stand for, so that every constant a pass computes comes with its own error: running
error analysis in float64 (Higham §3.3), each operation's rounding bounded by
`u |fl(z)| / (1 - u)` plus half the smallest subnormal spacing for underflow."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch

from ..exactness.arithmetic import gamma
from ..exactness.bounds import SAFETY

_F64 = torch.float64
U64 = 2.0 ** -53
"""The unit roundoff of float64."""
UNDERFLOW64 = 2.0 ** -1074
"""At least the absolute error of one float64 rounding in the subnormal range."""


_RADII: dict[int, tuple[weakref.ref, torch.Tensor]] = {}
"""id(tensor) -> (a weak reference to it, its radius); by identity, as tensors compare
elementwise; an entry goes with its tensor."""


def register(stored: torch.Tensor, radius: torch.Tensor) -> None:
    """Record that the constant `stored` (this tensor object, as a pass put it into a
    GraphIR) is within `radius` of the exact real value it stands for, so that a later
    pass computing from it, and the certificate, carry that radius."""
    key = id(stored)
    _RADII[key] = (weakref.ref(stored, lambda _, key=key: _RADII.pop(key, None)), radius)


def radius_of(stored: torch.Tensor) -> torch.Tensor | None:
    """The radius `register` recorded for this tensor object, or None (stored exactly)."""
    entry = _RADII.get(id(stored))
    return entry[1] if entry is not None and entry[0]() is stored else None


def _rounding(value: torch.Tensor, underflow: bool) -> torch.Tensor:
    """A bound on |fl(z) - z| where value = fl(z): u |fl(z)| / (1 - u), plus the underflow
    of a product, quotient or root (a sum that underflows is exact)."""
    bound = value.abs() * (U64 / (1 - U64))
    return bound + UNDERFLOW64 if underflow else bound


def _exact_zero(t: Carried) -> torch.Tensor:
    return (t.value == 0) & (t.error == 0)


@dataclass(frozen=True, slots=True)
class Carried:
    """A float64 tensor `value` and a tensor `error` >= 0 with |value - exact| <= error
    elementwise, where `exact` is the real value the computation stands for.

    Every operation returns the float64 result with the bound of its inputs' errors carried
    through and its own rounding added, multiplied by SAFETY (the bound's own float64
    arithmetic rounded up).
    """

    value: torch.Tensor
    error: torch.Tensor

    @staticmethod
    def exact(tensor: torch.Tensor | float) -> Carried:
        """A stored float (any real dtype), converted exactly to float64: error 0."""
        value = torch.as_tensor(tensor).to(_F64)
        return Carried(value, torch.zeros_like(value))

    @staticmethod
    def of(stored: torch.Tensor) -> Carried:
        """A graph's constant: exact, or within the radius a pass registered for it."""
        radius = radius_of(stored)
        value = stored.to(_F64)
        return Carried(value, torch.zeros_like(value) if radius is None
                       else radius.expand_as(value).clone())

    @staticmethod
    def _new(value: torch.Tensor, carried: torch.Tensor, underflow: bool = True,
             exact: torch.Tensor | None = None) -> Carried:
        error = (carried + _rounding(value, underflow)) * SAFETY
        if exact is not None:  # a product with, or a quotient of, an exact 0 is exact
            error = torch.where(exact, torch.zeros_like(error), error)
        return Carried(value, error)

    def __add__(self, other: Carried) -> Carried:
        return self._new(self.value + other.value, self.error + other.error, underflow=False)

    def __neg__(self) -> Carried:
        return Carried(-self.value, self.error)

    def __sub__(self, other: Carried) -> Carried:
        return self + (-other)

    def __mul__(self, other: Carried) -> Carried:
        return self._new(self.value * other.value,
                         self.value.abs() * other.error + other.value.abs() * self.error
                         + self.error * other.error,
                         exact=_exact_zero(self) | _exact_zero(other))

    def __truediv__(self, other: Carried) -> Carried:
        """a / b, for |b| > its error everywhere (else the quotient has no bound)."""
        margin = other.value.abs() - other.error
        if not bool((margin > 0).all()):
            raise ArithmeticError("a divisor within its own error of zero")
        value = self.value / other.value
        # |a / b| of the stored a and b, rounded up (also where the quotient underflows)
        quotient = value.abs() * (1 + 4 * U64) + UNDERFLOW64
        return self._new(value, (self.error + quotient * other.error) / margin,
                         exact=_exact_zero(self))

    def sqrt(self) -> Carried:
        """The square root of a non-negative value (`|sqrt(a*) - sqrt(a)| <= e / sqrt(a)`)."""
        if not bool((self.value >= 0).all()):
            raise ArithmeticError("the square root of a negative value")
        value = self.value.sqrt()
        spread = torch.where(value > 0, self.error / value.clamp_min(1e-300),
                             self.error.sqrt())
        return self._new(value, torch.minimum(spread, self.error.sqrt()))

    def matmul(self, other: Carried) -> Carried:
        """self @ other (2-D by 2-D or 1-D): any summation order, gamma_(n+1) on the terms."""
        n = self.value.shape[-1]
        value = self.value @ other.value
        terms = self.value.abs() @ other.value.abs()
        carried = (self.value.abs() @ other.error + self.error @ other.value.abs()
                   + self.error @ other.error)
        own = gamma(n + 1, U64) * terms + (n + 1) * UNDERFLOW64
        return Carried(value, (carried + own) * SAFETY)

    def rowdot(self, other: Carried) -> Carried:
        """Row by row inner products of two (rows, n) tensors: any summation order."""
        n = self.value.shape[-1]
        value = (self.value * other.value).sum(-1)
        terms = (self.value.abs() * other.value.abs()).sum(-1)
        carried = (self.value.abs() * other.error + self.error * other.value.abs()
                   + self.error * other.error).sum(-1)
        own = gamma(n + 1, U64) * terms + (n + 1) * UNDERFLOW64
        return Carried(value, (carried + own) * SAFETY)

    def reshape(self, *shape: int) -> Carried:
        return Carried(self.value.reshape(*shape), self.error.reshape(*shape))

    def expand(self, *shape: int) -> Carried:
        return Carried(self.value.expand(shape).clone(), self.error.expand(shape).clone())

    def __getitem__(self, index) -> Carried:
        return Carried(self.value[index], self.error[index])

    def rounded(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The value rounded once to `dtype` (to nearest), and the radius that bounds its
        distance from the exact real value: |rounded - value| + error, rounded up.

        Raises:
            ArithmeticError: The value does not fit in `dtype` (overflow) or is not finite.
        """
        stored = self.value.to(dtype)
        if self.value.dim() == 0 or stored.data_ptr() == self.value.data_ptr():
            stored = stored.clone()
        if not bool(torch.isfinite(stored).all()) or not bool(torch.isfinite(self.error).all()):
            raise ArithmeticError(f"a value outside {dtype}'s range")
        return stored, ((stored.to(_F64) - self.value).abs() + self.error) * SAFETY
