"""The records of an exactness check: one `ExactnessEntry` per IR node, one `OutputEntry`
per model output, and the rule that calls an end-to-end bound vacuous."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..ir import IRNode, Source
from .stats import NodeStats

STATUSES = ("root cause", "violated", "not certified", "not checked", "vacuous", "certified")
"""What `ExactnessReport.status` says of a node or an output: a violation singled out as a
root cause; a violation at an output with nothing violated upstream; downstream of a
violation (violated or not, nothing is certified there); a check could not run; certified,
but with a vacuous end-to-end bound (`vacuous`); certified."""


def vacuous(max_bound: float, max_value: float) -> bool:
    """The vacuous-bound rule: an end-to-end bound is vacuous at a node or output when its
    largest elementwise bound is at least the largest |reference value| there (and some
    value is not zero): the enclosure [reference - bound, reference + bound] is then as wide
    as the largest value, so where the bound is largest neither size nor sign is certified.
    Lenient: small elements whose own bound exceeds them are not counted."""
    return max_value > 0 and max_bound >= max_value


def _relative(max_bound: float, max_value: float) -> float:
    if math.isnan(max_bound) or math.isnan(max_value):
        return math.nan
    if max_value == 0:
        return 0.0 if max_bound == 0 else math.inf
    return max_bound / max_value


@dataclass(frozen=True, slots=True)
class ExactnessEntry:
    """One IR node: the largest observed |torch - reference|, the bound there, their ratio.

    `source` is the IR node's own provenance record (`Source`: FX node, spelling, module,
    file:line); `fx_name`, `fx_op`, `spelling`, `module_path` and `location` read it.
    `inputs` names the IR node's inputs (() in entries made without them: then the report
    takes the node to depend on every node before it). `e2e_max_bound` and
    `e2e_max_value` are the largest finite end-to-end bound and the largest |reference
    value| over all elements (NaN: not recorded), which `e2e_vacuous` compares.
    `structural`: the node does not correspond to what the runtime runs (its note says how),
    found before any number.
    """

    name: str
    op_type: str
    source: Source
    local_max_error: float
    local_max_rel_error: float
    local_bound: float
    local_ratio: float
    local_median_ratio: float
    local_ulps: float
    local_violations: int
    e2e_max_error: float
    e2e_bound: float
    e2e_ratio: float
    e2e_median_ratio: float
    e2e_violations: int
    note: str
    source_text: str = ""
    checked: bool = True
    local_error_at_worst: float = 0.0
    e2e_error_at_worst: float = 0.0
    sensitivity: float = math.nan
    suspicion: float = 0.0
    inputs: tuple[str, ...] = ()
    e2e_max_bound: float = math.nan
    e2e_max_value: float = math.nan
    structural: bool = False

    fx_name = property(lambda self: self.source.fx_name, doc="The FX node's name.")
    fx_op = property(lambda self: self.source.fx_op, doc="The FX node's op.")
    spelling = property(lambda self: self.source.target, doc="The spelling NCET mapped.")
    module_path = property(lambda self: self.source.module_path, doc="The module's path.")
    location = property(lambda self: self.source.location, doc="file:line, or \"\".")

    @property
    def suspicious(self) -> bool:
        """Flagged by the probabilistic second tier (`suspicion` above 1) without violating
        the certified bound: likely a fault the certified bound is too wide to see."""
        return self.suspicion > 1 and not self.violated

    @property
    def violated(self) -> bool:
        """True when an element exceeded its bound in either check, or the node does not
        correspond to the model (its note says how)."""
        return self.local_violations > 0 or self.e2e_violations > 0

    @property
    def e2e_relative_bound(self) -> float:
        """Largest end-to-end bound / largest |reference value| at the node (NaN: not
        recorded; inf: a bound over values that are all zero)."""
        return _relative(self.e2e_max_bound, self.e2e_max_value)

    @property
    def e2e_vacuous(self) -> bool:
        """The end-to-end bound is vacuous here (`vacuous`): it certifies nothing about the
        node's values, though the node-local check still does."""
        return vacuous(self.e2e_max_bound, self.e2e_max_value)

    @classmethod
    def from_stats(cls, node: IRNode, stats: NodeStats, local_median: float,
                   e2e_median: float, source_text: str = "", exact: bool = False,
                   tier_two: float = 1.0) -> ExactnessEntry:
        """`source_text`: the text of the line at `node.source.location`, "" if unknown;
        `exact`: the op does no rounding (any change is seen: sensitivity 0); `tier_two`:
        certified / probabilistic bound of the node (>= 1), which scales the node-local
        ratio into its suspicion."""
        lo, e2e = stats.local, stats.end_to_end
        unbounded = max(lo.unbounded, e2e.unbounded)
        if unbounded:
            stats.note(f"{unbounded} element(s) with an infinite or NaN bound: not checked")
        return cls(node.name, node.op_type, node.source, lo.max_error, lo.max_rel_error,
                   lo.bound_at_worst, lo.ratio, local_median, lo.ulps_at_worst, lo.violations,
                   e2e.max_error,
                   e2e.bound_at_worst, e2e.ratio, e2e_median, e2e.violations,
                   "; ".join(stats.notes), source_text, not (stats.unchecked or unbounded),
                   lo.error_at_worst, e2e.error_at_worst, 0.0 if exact else lo.sensitivity,
                   lo.ratio * tier_two if math.isfinite(lo.ratio) else lo.ratio,
                   tuple(node.inputs), *_scale(e2e), stats.structural)


def _scale(check) -> tuple[float, float]:
    """(largest bound, largest |value|) of an end-to-end check, NaN when it saw nothing."""
    return (check.max_bound, check.max_value) if check.elements else (math.nan, math.nan)


@dataclass(frozen=True, slots=True)
class OutputEntry:
    """One model output: the user's eager model(x) against the reference and its bound.

    `name` is the output's IR node (`GraphIR.outputs`; `ExactnessReport.entry` finds its
    entry). `max_bound`, `max_value`: the largest finite bound and |reference value| over
    its elements (NaN: not recorded), which `vacuous` compares. `ratio_sample`: observed /
    bound of an evenly strided sample of its elements, as the check computed them (chunks
    in which every element was exact add none).
    """

    name: str
    max_error: float
    bound: float
    ratio: float
    violations: int
    traced_differs: bool = False
    checked: bool = True
    max_bound: float = math.nan
    max_value: float = math.nan
    ratio_sample: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @property
    def relative_bound(self) -> float:
        """Largest bound / largest |reference value| (NaN: not recorded)."""
        return _relative(self.max_bound, self.max_value)

    @property
    def vacuous(self) -> bool:
        """The end-to-end bound is vacuous at this output (the rule `vacuous`)."""
        return vacuous(self.max_bound, self.max_value)

    @classmethod
    def from_stats(cls, name: str, stats: NodeStats) -> OutputEntry:
        e = stats.end_to_end
        return cls(name, e.max_error, e.bound_at_worst, e.ratio, e.violations,
                   bool(stats.notes), not (stats.unchecked or e.unbounded), *_scale(e),
                   tuple(e.ratios.kept().tolist()))
