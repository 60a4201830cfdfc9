"""Witness: a verifier's counterexample as VNN-COMP writes it, its numbers kept exactly.

The format (the competition's `.counterexample` file): an optional first line `sat`, then one
parenthesised list of pairs `(X_i v)` for every input element i = 0 .. n-1 (the network's
input flattened row-major) and `(Y_j v)` for the output the tool claims, j = 0 .. m-1; the Y
pairs may be absent. Every v is a decimal numeral read as the exact rational it denotes
(`rational.fraction`), never through a float.

Hostile input is refused with a `WitnessError` that carries a stable reason code (one of
`WITNESS_REASONS`) and the line and column of the offending token; reading is linear in the
file's size, and a file over `MAX_BYTES` is refused before it is read.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from pathlib import Path

import numpy as np

from .errors import PlacedError
from .rational import fractions_of, numeral_problem

MAX_BYTES = 16 * 2 ** 20
"""The largest witness read (the corpus's largest is 0.8 MB; an ImageNet-sized input of
150,528 elements is about 4 MB). A file of this size with a million pairs reads in about
2 s and 130 MB on this machine."""

WITNESS_REASONS = {
    "witness-unreadable": "the path cannot be read, or its bytes are not UTF-8 text",
    "witness-too-large": "a file or text over MAX_BYTES",
    "witness-empty": "no list of pairs (an empty file, or `unsat` / `unknown` alone)",
    "witness-syntax": "a parenthesis never closed or closing nothing, a pair that is not "
                      "(name value), or text after the list",
    "witness-bad-name": "a name other than X_<i> or Y_<j> (i, j decimal indices)",
    "witness-not-a-number": "text where a decimal number belongs",
    "witness-not-finite": "NaN or an infinity where a number belongs",
    "witness-out-of-range": "a number beyond float64's range (magnitude 2^1024 or more), which no "
                            "network is run on",
    "witness-duplicate": "the same X_i or Y_j twice",
    "witness-missing": "indices with a gap: X_0 .. X_(n-1) (and Y_0 .. Y_(m-1)) must all be "
                       "there",
    "witness-no-input": "no X_i at all",
    "witness-wrong-length": "n inputs (or m outputs) where the property has another number",
}
"""Every reason code a WitnessError can carry, with what it means."""

_NOT_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity",
               "-infinity"}
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_NAME = re.compile(r"([XY])_([0-9]{1,9})")


class WitnessError(PlacedError):
    """A counterexample NCET will not read; `.code` is one of `WITNESS_REASONS`, `.line`,
    `.column`, `.token`, `.source` as in `PlacedError`."""

    reasons = WITNESS_REASONS


@dataclass(frozen=True, eq=False)
class Witness:
    """A counterexample: the input X and, when the tool gave it, its claimed output Y.

    Attributes:
        x: X_0 .. X_(n-1), each the numeral as written (or a Fraction / float's exact value
            for a witness built from a tensor).
        y: Y_0 .. Y_(m-1) likewise, or None when the witness claims no output.
        source: The file's path, "<text>", or "<tensor>".
    """

    x: tuple
    y: tuple | None
    source: str = "<text>"

    @property
    def from_tensor(self) -> bool:
        """Built from a tensor (no claimed Y to hold it to), not read from a file or text."""
        return self.source == "<tensor>"

    @cached_property
    def x_exact(self) -> list[Fraction]:
        """X as exact rationals."""
        return fractions_of(self.x)

    @cached_property
    def y_exact(self) -> list[Fraction] | None:
        """The claimed Y as exact rationals (None without one)."""
        return None if self.y is None else fractions_of(self.y)

    def x_as(self, dtype=np.float64) -> np.ndarray:
        """X rounded to nearest in `dtype` (float64 nearest is Python's float() of the
        numeral, what the competition's scripts read; float32 is then its float32 cast, as
        they feed onnxruntime)."""
        return np.array([float(v) for v in self.x], dtype=np.float64).astype(dtype)

    def y_as(self, dtype=np.float64) -> np.ndarray | None:
        """The claimed Y rounded to nearest in `dtype` (None without one)."""
        return None if self.y is None else np.array([float(v) for v in self.y],
                                                    dtype=np.float64).astype(dtype)

    def check_sizes(self, num_inputs: int, num_outputs: int | None) -> None:
        """Raise `witness-wrong-length` unless X has num_inputs elements and Y (if any, and
        num_outputs is not None) num_outputs."""
        for name, values, n in (("X", self.x, num_inputs), ("Y", self.y, num_outputs)):
            if values is not None and n is not None and len(values) != n:
                raise WitnessError("witness-wrong-length", f"{len(values)} {name} values, where "
                                   f"the property has {n}", source=self.source)

    def __repr__(self) -> str:
        y = "no claimed Y" if self.y is None else f"{len(self.y)} Y"
        return f"Witness({len(self.x)} X, {y}, source={self.source!r})"


def _where(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _is_file(text: str) -> bool:
    """A str short and single-line enough to be a path, naming an existing file ("run (1)/
    ce.counterexample" is a path; a witness's text is not)."""
    return len(text) < 4096 and "\n" not in text and os.path.isfile(text)


def _text_of(path_or_text) -> tuple[str, str]:
    """(text, source) from a path or the text itself (bytes, or a str holding "(")."""
    if isinstance(path_or_text, (bytes, bytearray)):
        if len(path_or_text) > MAX_BYTES:
            raise WitnessError("witness-too-large", f"{len(path_or_text)} bytes, over "
                               f"MAX_BYTES = {MAX_BYTES}")
        return bytes(path_or_text).decode("utf-8", errors="strict"), "<text>"
    if isinstance(path_or_text, str) and "(" in path_or_text and \
            not _is_file(path_or_text):
        if len(path_or_text) > MAX_BYTES:
            raise WitnessError("witness-too-large", f"text of {len(path_or_text)} characters, "
                               f"over MAX_BYTES = {MAX_BYTES}")
        return path_or_text, "<text>"
    if not isinstance(path_or_text, (str, os.PathLike)):
        raise TypeError(f"a witness is a path or its text, not {type(path_or_text).__name__}")
    path = Path(path_or_text)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise WitnessError("witness-too-large", f"a file of {size} bytes, over MAX_BYTES "
                               f"= {MAX_BYTES}", source=str(path))
        return path.read_bytes().decode("utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as e:
        raise WitnessError("witness-unreadable", f"cannot read the witness: {e}",
                           source=str(path)) from None


def read_witness(path_or_text) -> Witness:
    """Read a VNN-COMP counterexample (module docstring) from a path, or its text (a str
    holding a parenthesis, or bytes).

    Raises:
        WitnessError: (a ValueError) the text is not a counterexample; `.code`, `.line`,
            `.column`, `.token` say what and where.
        TypeError: neither a path nor text.
    """
    try:
        text, source = _text_of(path_or_text)
    except UnicodeDecodeError as e:
        raise WitnessError("witness-unreadable", f"the bytes are not UTF-8: {e}") from None

    def fail(code: str, message: str, match=None) -> WitnessError:
        if match is None:
            return WitnessError(code, message, source=source)
        line, column = _where(text, match.start())
        return WitnessError(code, message, line=line, column=column, token=match.group(),
                            source=source)

    tokens = _TOKEN.finditer(text)
    first = next(tokens, None)
    if first is not None and first.group().lower() == "sat":
        first = next(tokens, None)
    if first is None:
        raise fail("witness-empty", "no counterexample: the text holds no list of pairs")
    if first.group() != "(":
        code = "witness-empty" if first.group().lower() in ("unsat", "unknown", "timeout") \
            else "witness-syntax"
        raise fail(code, "a counterexample is one list of (X_i v) and (Y_j v) pairs", first)
    values: dict[str, dict[int, str]] = {"X": {}, "Y": {}}
    closed = False
    for open_ in tokens:
        if open_.group() == ")":
            closed = True
            break
        if open_.group() != "(":
            raise fail("witness-syntax", "expected a pair (name value)", open_)
        name = next(tokens, None)
        value = next(tokens, None) if name is not None else None
        close = next(tokens, None) if value is not None else None
        if close is None:
            raise fail("witness-syntax", "a pair never closed", open_)
        for token in (name, value):
            if token.group() in "()":
                raise fail("witness-syntax", "a pair is (name value)", token)
        if close.group() != ")":
            raise fail("witness-syntax", "a pair holds one name and one value", close)
        m = _NAME.fullmatch(name.group())
        if m is None:
            raise fail("witness-bad-name", "a name must be X_<i> or Y_<j>", name)
        number = value.group()
        if number.lower() in _NOT_FINITE:
            raise fail("witness-not-finite", "a value must be a finite number", value)
        problem = numeral_problem(number)
        if problem:
            raise fail("witness-not-a-number", f"a value must be a decimal number ({problem})",
                       value)
        if ("e" in number or "E" in number or len(number) > 300) and \
                not math.isfinite(float(number)):
            raise fail("witness-out-of-range", "a value beyond float64's range", value)
        kind, index = m.group(1), int(m.group(2))
        if index in values[kind]:
            raise fail("witness-duplicate", f"{kind}_{index} given twice", name)
        values[kind][index] = number
    if not closed:
        raise fail("witness-syntax", "the list of pairs is never closed", first)
    extra = next(tokens, None)
    if extra is not None:
        raise fail("witness-syntax", "text after the list of pairs", extra)
    if not values["X"]:
        raise fail("witness-no-input", "no X_i in the counterexample")
    out = {}
    for kind, given in values.items():
        n = len(given)
        if n and max(given) != n - 1:
            gap = min(set(range(n)) - set(given))
            raise fail("witness-missing", f"{kind}_{gap} is missing ({n} {kind} values, the "
                       f"largest index {max(given)})")
        out[kind] = tuple(given[i] for i in range(n)) if n else None
    return Witness(out["X"], out["Y"], source)


def witness_of_tensor(x) -> Witness:
    """A witness from a tensor or array (flattened row-major; floats count by their exact
    binary value): no claimed Y.

    Raises:
        WitnessError: `witness-not-finite` for a NaN or infinity, `witness-no-input` when
            empty.
    """
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    flat = np.asarray(x).reshape(-1)
    if flat.size == 0:
        raise WitnessError("witness-no-input", "an empty tensor", source="<tensor>")
    if flat.dtype.kind == "f" and not np.isfinite(flat).all():
        i = int(np.flatnonzero(~np.isfinite(flat))[0])
        raise WitnessError("witness-not-finite", f"X_{i} is {flat[i]}", source="<tensor>")
    if flat.dtype.kind not in "fiu":
        raise WitnessError("witness-not-a-number", f"a tensor of dtype {flat.dtype}",
                           source="<tensor>")
    return Witness(tuple(Fraction(float(v)) if flat.dtype.kind == "f" else Fraction(int(v))
                         for v in flat), None, "<tensor>")
