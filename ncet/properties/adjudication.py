"""adjudicate: is a verifier's counterexample a real violation of the network, in exact
arithmetic, in float32 as deployed, or only inside the competition's tolerances?
(docs/adjudication.md)"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..ir import GraphIR
from .competition import Competition, competition_rule
from .exact_eval import RationalUnavailable, enclose_at, rational_at, single_input
from .float32_runs import Run, deployed_runs
from .margins import cases_at, exact_margin, margin_bounds
from .property import Property
from .rational import fractions_of
from .witness import Witness, WitnessError, read_witness, witness_of_tensor

VERDICTS = {
    "counterexample": "X inside the input region, the output unsafe in exact arithmetic and in "
                      "float32 as deployed",
    "float32-only": "X inside; unsafe in float32 as deployed, not in exact arithmetic",
    "tolerance-only": "accepted by the competition's rule, but not unsafe in float32 as "
                      "deployed (X outside the region, or the output safe in float32; "
                      "`.exact.violated` says whether it is unsafe in exact arithmetic)",
    "not-a-counterexample": "none of the above",
    "undecided": "the exact margin's enclosure holds 0 and a BatchNorm's square root keeps "
                 "exact rational evaluation from settling it (never seen on the corpus)",
}
"""Every verdict, with what it means."""


def _f(v: Fraction | None) -> float | None:
    return None if v is None else _float(v)


@dataclass(frozen=True)
class Exact:
    """The network's output at X in exact arithmetic against the unsafe set.

    Attributes:
        violated: the exact output lies in the unsafe set (None: undecided).
        margin: the margin (margins.py) as a float: exact (rounded once) with method
            "rational", a float64 value inside `margin_bounds` with "enclosure".
        margin_bounds: (lo, hi), Fractions: a certified interval holding the exact margin
            (lo == hi, the margin itself, with "rational").
        method: "enclosure" (decided by the certified float64 enclosure, clear of 0) or
            "rational" (exact rational evaluation).
    """

    violated: bool | None
    margin: float
    margin_bounds: tuple[Fraction, Fraction]
    method: str


@dataclass(frozen=True)
class Float32:
    """The output in float32 as deployed. `violated` and `margin` are those of the worst run
    (violated in any; the largest margin); `runs` holds each: (runtime, violated, margin)."""

    violated: bool
    margin: float
    runs: tuple[tuple[str, bool, float], ...]
    input_rounded: bool


@dataclass(frozen=True)
class Adjudication:
    """The five answers about one counterexample, and the verdict (VERDICTS).

    Attributes:
        inside: X lies in the input region exactly (rational comparison, strict bounds
            strict, no tolerance).
        box: the index of the first box holding X (None when none does).
        outside_by: 0 when inside; else the least over boxes of the largest distance of an
            element of X beyond its bound (a Fraction).
        inside_float32_box: X rounded to nearest float32 (what a float32 network is fed)
            lies in some box with its bounds rounded outward to float32: True when `inside`;
            for a point outside, it is outside only by float32 rounding (of X as the tool
            printed it, or of a bound).
        exact: `Exact`: the network's output at X in exact arithmetic against the unsafe sets
            of every box holding X (of every box when X is in none).
        float32: `Float32`: the same for each float32 run at X rounded to float32.
        competition: `Competition`: VNN-COMP's rule.
        claimed_matches: the claimed Y is what the network computes (`_claimed_matches`);
            None without a claimed Y.
        verdict: one of VERDICTS.
        source: the witness's path, "<text>" or "<tensor>".
    """

    inside: bool
    box: int | None
    outside_by: Fraction
    inside_float32_box: bool
    exact: Exact
    float32: Float32
    competition: Competition
    claimed_matches: bool | None
    verdict: str
    source: str = ""

    def to_dict(self) -> dict:
        """The answers as JSON-serialisable values (exact margins also as "p/q" strings)."""
        lo, hi = self.exact.margin_bounds
        return {
            "inside": self.inside, "box": self.box, "outside_by": _float(self.outside_by),
            "inside_float32_box": self.inside_float32_box,
            "exact": {"violated": self.exact.violated, "margin": self.exact.margin,
                      "margin_bounds": [_text(lo), _text(hi)], "method": self.exact.method},
            "float32": {"violated": self.float32.violated, "margin": self.float32.margin,
                        "input_rounded": self.float32.input_rounded,
                        "runs": [{"runtime": r, "violated": v, "margin": m}
                                 for r, v, m in self.float32.runs]},
            "competition": {k: getattr(self.competition, k) for k in (
                "accepted", "relative_error", "matched", "in_box", "property_violated",
                "claimed_from", "executed_by")},
            "claimed_matches": self.claimed_matches, "verdict": self.verdict,
            "source": self.source}

    def __str__(self) -> str:
        def yes(v):
            return "undecided" if v is None else "violated" if v else "not violated"
        e, f, c = self.exact, self.float32, self.competition
        lo, hi = e.margin_bounds
        where = f"outside every box, the nearest by {_float(self.outside_by):.3g}" \
            if self.box is None else f"box {self.box}"
        runs = "; ".join(f"{r}: {yes(v)}, margin {m:.6g}" for r, v, m in f.runs)
        exact = (f"margin {e.margin:.6g} exactly" if e.margin or not lo else
                 f"margin {'+' if lo > 0 else '-'}{_float(abs(lo)):.3g} exactly, below "
                 "float64's range") if e.method == "rational" else \
            f"margin in [{_float(lo):.6g}, {_float(hi):.6g}] (certified float64 enclosure)"
        return "\n".join([
            f"inside:          {self.inside} ({where}; exact rational comparison)",
            f"exact:           {yes(e.violated)}, {exact}",
            f"float32:         {yes(f.violated)} ({runs})"
            + (" at X rounded to float32" if f.input_rounded else ""),
            f"competition:     {'accepted' if c.accepted else 'rejected'} (relative error "
            f"{c.relative_error:.3g}, matched {c.matched}; X in a box within 1e-4 {c.in_box};"
            f" property on the claimed Y within 1e-4 {c.property_violated})",
            f"claimed matches: {self.claimed_matches}",
            f"verdict:         {self.verdict}"])


def _network(network, input_shape):
    """(ir, onnx bytes or None, module or None)."""
    import torch

    if isinstance(network, GraphIR):
        return network, None, None
    if isinstance(network, (str, os.PathLike)) and str(network).endswith(".ncet"):
        from ..format.file import load
        return load(network), None, None
    if isinstance(network, torch.nn.Module):
        from ..frontend.conversion import convert
        if input_shape is None:
            raise ValueError("an nn.Module needs input_shape= (one sample's shape; the "
                             "property's X_i number its elements row-major)")
        return convert(network, tuple(input_shape)), None, network
    from ..onnx.importer import from_onnx
    from ..onnx.onnx_file import read_model
    model = read_model(network, "adjudicate", accept_bytes=True, weights_as_inputs=True)
    return from_onnx(model), model.SerializeToString(), None


def _witness(witness) -> Witness:
    if isinstance(witness, Witness):  # built by hand: its values as the reader checks them
        for side, values in (("X", witness.x), ("Y", witness.y or ())):
            for i, v in enumerate(values):
                try:
                    fractions_of([v])
                except (ValueError, OverflowError, ArithmeticError, TypeError):
                    code = "witness-not-finite" if isinstance(v, float) else \
                        "witness-not-a-number"
                    raise WitnessError(code, f"{side}_{i} is {v!r}",
                                       source=witness.source) from None
        return witness
    if isinstance(witness, (str, bytes, os.PathLike)):
        return read_witness(witness)
    return witness_of_tensor(witness)


def _verdict(inside, exact, float32, accepted) -> str:
    if inside and exact is None:
        return "undecided"
    if inside and exact and float32:
        return "counterexample"
    if inside and float32:
        return "float32-only"
    # unsafe in exact arithmetic only is no counterexample to the network as deployed; the
    # issue's four verdicts say so, and `.exact.violated` keeps the exact answer
    return "tolerance-only" if accepted else "not-a-counterexample"


def adjudicate(network, property, witness, *, input_shape=None,
               exact: str = "auto") -> Adjudication:
    """Judge a counterexample (docs/adjudication.md).

    Args:
        network: a GraphIR (or a `.ncet` file's path); an ONNX file (path, bytes or
            ModelProto: imported with `from_onnx`, and the file run in onnxruntime for
            float32); or an nn.Module
            (converted with `convert(module, input_shape)`, and run in eager PyTorch).
        property: a Property, or a VNN-LIB path or text (`read_vnnlib`).
        witness: a `.counterexample` path or text, a `Witness`, or a tensor / array of X
            (then no claimed Y: the competition's rule takes the executed output as the
            claim, and `claimed_matches` is None).
        input_shape: one sample's input shape, for an nn.Module only.
        exact: "auto" (the certified float64 enclosure, exact rationals when it cannot
            decide) or "rational" (exact rationals always, when the graph allows).

    Returns:
        An Adjudication.

    Raises:
        WitnessError: an unreadable witness, or one of the wrong length for the property.
        VNNLIBError: an unreadable property.
        ValueError: the network's input or output size is not the property's, it has
            several inputs or outputs, an nn.Module without input_shape, or an unknown
            `exact`.
        ONNXImportError: an ONNX file with a node outside the op set (`from_onnx`).
        RuntimeError: the arithmetic in force is outside the certificate's model.
    """
    from .reader import read_vnnlib

    if exact not in ("auto", "rational"):
        raise ValueError(f"exact={exact!r}: use 'auto' or 'rational'")
    prop = property if isinstance(property, Property) else read_vnnlib(property)
    w = _witness(witness)
    w.check_sizes(prop.num_inputs, None)  # a claimed Y of the wrong length: rejected below
    ir, data, module = _network(network, input_shape)
    node = single_input(ir)
    if int(np.prod(node.shape)) != prop.num_inputs:
        raise ValueError(f"the network's input {node.name!r} has shape {list(node.shape)}, "
                         f"and the property {prop.num_inputs} inputs")
    x = w.x_exact
    boxes = [i for i, case in enumerate(prop.cases) if case.box.contains(x)]
    box = boxes[0] if boxes else None
    outside = Fraction(0) if box is not None else _outside_by(prop, x)
    rounded_box = box is not None or _inside_float32_box(prop, w.x_as(np.float32))
    polytopes = cases_at(prop.cases, boxes)

    value, radius = enclose_at(ir, x)
    if value.size != prop.num_outputs:
        raise ValueError(f"the network has {value.size} outputs, the property "
                         f"{prop.num_outputs}")
    finite = bool(np.isfinite(value).all() and np.isfinite(radius).all())
    lo, hi = margin_bounds(polytopes, value, radius) if finite else (-_HUGE, _HUGE)
    decided = finite and exact != "rational" and (lo > 0 or hi < 0)
    if decided:
        answer = Exact(lo > 0, _float(exact_margin(polytopes, [Fraction(float(v))
                                                               for v in value])[0]),
                       (lo, hi), "enclosure")
    else:
        try:
            y = rational_at(ir, x)
            margin, violated = exact_margin(polytopes, y)
            answer = Exact(violated, _float(margin), (margin, margin), "rational")
        except RationalUnavailable:  # the enclosure's word, when it has one
            clear = lo > 0 or hi < 0
            answer = Exact(bool(lo > 0) if clear else None, _float((lo + hi) / 2), (lo, hi),
                           "enclosure")

    x64 = w.x_as(np.float64)
    runs: list[Run] = deployed_runs(data, module, ir, x64, input_shape)
    judged = []
    for run in runs:
        if np.isnan(run.output).any():  # no output to be unsafe: as the scripts' <= reads NaN
            judged.append((run.runtime, False, float("-inf")))
            continue
        margin, violated = exact_margin(polytopes, [_finite(v) for v in run.output])
        judged.append((run.runtime, violated, _float(margin)))
    x32 = w.x_as(np.float32)
    f32 = Float32(any(v for _, v, _ in judged), max(m for _, _, m in judged), tuple(judged),
                  any(_finite(a) != b for a, b in zip(x32, x)))

    claimed = w.y_as(np.float64)
    if claimed is not None and claimed.size != prop.num_outputs:
        competition = Competition(False, float("inf"), False, False, False,
                                  f"witness ({claimed.size} Y values for "
                                  f"{prop.num_outputs} outputs)", runs[0].runtime)
        verdict = _verdict(box is not None, answer.violated, f32.violated, False)
        return Adjudication(box is not None, box, outside, rounded_box, answer, f32,
                            competition, False, verdict, w.source)
    if claimed is None and not w.from_tensor:  # the scripts cannot match a file's missing Y
        competition = Competition(False, float("inf"), False, False, False,
                                  "witness (no Y values)", runs[0].runtime)
        verdict = _verdict(box is not None, answer.violated, f32.violated, False)
        return Adjudication(box is not None, box, outside, rounded_box, answer, f32,
                            competition, None, verdict, w.source)
    competition = competition_rule(
        prop, x64, runs[0].output, runs[0].output if claimed is None else claimed,
        claimed_from="witness" if claimed is not None else runs[0].runtime,
        executed_by=runs[0].runtime)
    matches = None if claimed is None else _claimed_matches(w, runs, value, radius)
    verdict = _verdict(box is not None, answer.violated, f32.violated, competition.accepted)
    return Adjudication(box is not None, box, outside, rounded_box, answer, f32, competition,
                        matches, verdict, w.source)


def _inside_float32_box(prop: Property, x32: np.ndarray) -> bool:
    """X as fed (float32) inside some box rounded outward to float32, strict bounds kept
    strict."""
    for case in prop.cases:
        box = case.box
        lower, upper = box.as_floats(np.float32, "outward")
        above = np.array([x > lo if i in box.strict_lower else x >= lo
                          for i, (x, lo) in enumerate(zip(x32, lower))])
        below = np.array([x < hi if i in box.strict_upper else x <= hi
                          for i, (x, hi) in enumerate(zip(x32, upper))])
        if above.all() and below.all():
            return True
    return False


def _outside_by(prop: Property, x: list[Fraction]) -> Fraction:
    """How far X lies outside the region: over boxes, the least of the largest distance of
    an element beyond its bound (0 for a point on a strict bound)."""
    best = None
    for lower, upper in prop.input_boxes:
        far = max((max(lo - v, v - hi) for lo, v, hi in zip(lower, x, upper)),
                  default=Fraction(0))
        far = max(far, Fraction(0))
        best = far if best is None else min(best, far)
    return Fraction(0) if best is None else best


def _claimed_matches(w: Witness, runs: list[Run], value, radius) -> bool:
    """The claimed Y is what the network computes: rounded to nearest float32 it equals a
    float32 run's output bit for bit, or every Y_j lies within the certified enclosure of
    the exact output widened by half a float32 ulp of its magnitude (the exact output,
    written to float32 precision or better)."""
    y32 = w.y_as(np.float32)
    if np.isfinite(y32).all() and any(
            np.array_equal(y32, run.output.astype(np.float32)) for run in runs):
        return True
    y = w.y_exact
    with np.errstate(all="ignore"):
        ulp = np.spacing((np.abs(value) + radius).astype(np.float32)).astype(np.float64)
    if not (np.isfinite(value).all() and np.isfinite(radius).all() and np.isfinite(ulp).all()):
        return False  # beyond float32's range: no float32 output to match
    return all(abs(yj - Fraction(float(v))) <= Fraction(float(r)) + Fraction(float(u)) / 2
               for yj, v, r, u in zip(y, value, radius, ulp))


_HUGE = Fraction(2) ** 2000
"""Stands for an infinite float output in exact margins: beyond any float64 constraint."""


def _finite(v: float) -> Fraction:
    """A float output as an exact rational, an infinity as +-_HUGE."""
    return Fraction(float(v)) if np.isfinite(v) else (_HUGE if v > 0 else -_HUGE)


def _text(v: Fraction) -> str:
    """A Fraction as "p/q", or, past Python's digit limit for int-to-str, a decimal of 17
    significant digits marked as rounded."""
    try:
        return str(v)
    except ValueError:
        return f"~{_float(v):.17g}" if _float(v) else f"~{'-' if v < 0 else ''}0 (|v| < 1e-308)"


def _float(v: Fraction) -> float:
    """A Fraction as the nearest float, +-inf beyond float64's range."""
    try:
        return float(v)
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")
