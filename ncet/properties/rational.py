"""Exact constants and their float views.

A constant is kept as one of two exact forms: the decimal numeral as the file wrote it (a
`str`, e.g. "0.1", "-1e-06", "-0.0"; read as the rational it denotes, never as a float) or a
`fractions.Fraction` (a value computed by the reader, e.g. 1/3 from `(<= (* 3 X_0) 1)`).
This module validates numerals, turns either form into a Fraction, compares it exactly with
a float, rounds arrays of them to float64 or float32 in a chosen direction (vectorised; the
exact comparison is made only where the float64 view cannot decide it), and writes a
Fraction back as a decimal.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import numpy as np

NUMERAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A decimal numeral as VNN-COMP files write them: SMT-LIB's decimals with an optional sign
and exponent (0.5, -0.5, 5, 5., .5, 1e-06, -1.5E+3)."""

MAX_DIGITS = 4000
"""The longest numeral read (Python refuses to turn longer digit strings into integers)."""
MAX_EXPONENT = 1000
"""The largest |exponent| read: 1e1000 is far outside every float format already."""

ZERO = Fraction(0)
ONE = Fraction(1)

Value = str | Fraction
"""An exact constant: a validated decimal numeral as written, or a Fraction."""


_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)$")


def numeral_problem(text: str, _match=NUMERAL.fullmatch) -> str:
    """Why `text` is not a numeral this reader takes ("" when it is one)."""
    if _match(text) is None:
        return "not a decimal number"
    if len(text) > 30:
        if len(text) > MAX_DIGITS:
            return f"a numeral longer than {MAX_DIGITS} characters"
    if "e" in text or "E" in text:
        exponent = _EXPONENT.search(text).group(1)
        if len(exponent) > 6 or abs(int(exponent)) > MAX_EXPONENT:
            return f"an exponent beyond +-{MAX_EXPONENT}"
    return ""


def fraction(value: Value | int) -> Fraction:
    """The exact rational a value denotes (a numeral through `decimal`, which reads it
    exactly and twice as fast as Fraction's own parser)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, str):
        return Fraction(*Decimal(value).as_integer_ratio())
    return Fraction(value)


def fractions_of(values) -> list[Fraction]:
    """`fraction` of each value, each distinct numeral converted once."""
    seen: dict = {}
    out = []
    for v in values:
        f = seen.get(v)
        if f is None:
            f = seen[v] = fraction(v)
        out.append(f)
    return out


def exact(value) -> Value:
    """An exact constant from what a caller gives: a numeral string (validated), a Fraction,
    an int, or a float / numpy float (its exact binary value)."""
    if isinstance(value, str):
        problem = numeral_problem(value)
        if problem:
            raise ValueError(f"{value!r} is {problem}")
        return value
    if isinstance(value, Fraction):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return Fraction(int(value))
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
        return Fraction(float(value))
    raise TypeError(f"an exact constant must be a numeral string, Fraction, int or float, "
                    f"not {type(value).__name__}")


def negate(value: Value) -> Value:
    """-value, a numeral staying a numeral (its text with the sign flipped)."""
    if isinstance(value, Fraction):
        return -value
    if value[0] == "-":
        return value[1:]
    return "-" + (value[1:] if value[0] == "+" else value)


def compare(a: Value, b: Value) -> int:
    """-1, 0 or 1 as a < b, a == b, a > b, exactly."""
    if a is b or (isinstance(a, str) and a == b):
        return 0
    fa, fb = fraction(a), fraction(b)
    return (fa > fb) - (fa < fb)


def compare_float(value: Value, f: float) -> int:
    """The sign of value - f, exactly (f may be infinite)."""
    if f == np.inf:
        return -1
    if f == -np.inf:
        return 1
    if isinstance(value, str):
        d, e = Decimal(value), Decimal(float(f))  # both exact: no context rounding here
        return (d > e) - (d < e)
    g = Fraction(float(f))
    return (value > g) - (value < g)


def nearest64(values) -> np.ndarray:
    """The float64 nearest to each value (round half to even): Python's float() of the
    numeral or of the Fraction, which is correctly rounded."""
    return np.fromiter(map(float, values), dtype=np.float64, count=len(values))


def _directed(values, nearest: np.ndarray, dtype, up: bool) -> np.ndarray:
    """Each value rounded to `dtype` toward +inf (up) or -inf: the least float >= value, or
    the greatest float <= value. `nearest` is `nearest64(values)`.

    Where the candidate float differs from the float64 view, the float64 view says on which
    side of the value it lies (the float64 view is the float64 nearest to the value, so a
    float64 strictly above it is strictly above the value); only where they coincide is the
    value compared exactly."""
    with np.errstate(over="ignore"):
        candidate = nearest.astype(dtype)
    wide = candidate.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf: decided exactly below
        side = np.sign(nearest - wide)  # sign(value - candidate) where the views differ
    tied = wide == nearest  # equal, or both infinite of one sign
    sides: dict = {}  # one exact comparison per distinct value (its candidate is the same)
    for i in np.flatnonzero(tied).tolist():
        value = values[i]
        known = sides.get(value)
        if known is None:
            known = sides[value] = compare_float(value, float(wide[i]))
        side[i] = known
    step = side > 0 if up else side < 0
    if step.any():
        target = np.array(np.inf if up else -np.inf, dtype=dtype)
        with np.errstate(over="ignore"):  # the largest float stepping up to inf
            candidate[step] = np.nextafter(candidate[step], target)
    return candidate


def rounded(values, dtype=np.float64, rounding: str = "nearest", up: bool = False):
    """`values` (a sequence of exact constants) as a float array of `dtype`.

    rounding: "nearest" (round half to even, exactly: the float nearest to each value, not
    the float32 of its float64), "up" or "down" (directed), or "outward" / "inward" with
    `up` saying which way outward goes for these values (True: upper bounds and right-hand
    sides, which outward rounds up; False: lower bounds, which outward rounds down).
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.float64, np.float32):
        raise ValueError(f"float views are float64 or float32, not {dtype}")
    values = list(values)
    nearest = nearest64(values)
    if rounding == "outward":
        return _directed(values, nearest, dtype, up)
    if rounding == "inward":
        return _directed(values, nearest, dtype, not up)
    if rounding in ("up", "down"):
        return _directed(values, nearest, dtype, rounding == "up")
    if rounding != "nearest":
        raise ValueError(f"rounding is 'nearest', 'outward', 'inward', 'up' or 'down', "
                         f"not {rounding!r}")
    if dtype == np.float64:
        return nearest
    low = _directed(values, nearest, dtype, False)
    high = _directed(values, nearest, dtype, True)
    result = low.copy()
    for i in np.flatnonzero(low != high):  # pick the nearer; a tie goes to the even one
        lo, hi = float(low[i]), float(high[i])
        if not (np.isfinite(lo) and np.isfinite(hi)):
            result[i] = low[i] if np.isfinite(lo) else high[i]
            continue
        side = compare_float(values[i], (lo + hi) / 2)  # exact in float64
        if side > 0 or (side == 0 and int(high[i:i + 1].view(np.uint32)[0]) % 2 == 0):
            result[i] = high[i]
    return result


def decimal_text(value: Fraction) -> str | None:
    """The exact decimal numeral of a Fraction whose denominator has no prime factor but 2
    and 5 (None for any other: its decimal expansion does not terminate)."""
    d, twos, fives = value.denominator, 0, 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    if d != 1:
        return None
    places = max(twos, fives)
    scaled = abs(value.numerator) * 10 ** places // value.denominator
    sign = "-" if value < 0 else ""
    if places == 0:
        return f"{sign}{scaled}"
    digits = str(scaled).rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def directed_text(value: Fraction, up: bool, digits: int = 20) -> str:
    """A decimal numeral of `digits` significant digits at or above (up) / at or below the
    value: the one closest to it in that direction."""
    if value == 0:
        return "0"
    magnitude = len(str(abs(value.numerator))) - len(str(value.denominator))
    places = digits - magnitude  # decimal places keeping about `digits` significant ones
    scale = Fraction(10) ** places
    scaled = value * scale
    whole = -((-scaled.numerator) // scaled.denominator) if up else \
        scaled.numerator // scaled.denominator
    text = decimal_text(Fraction(whole) / scale)
    assert text is not None
    return text
