"""ExactnessReport: per node and per output, observed error against the certified bound."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

import torch

from ..errors import quote_source
from ..ir import IRNode, Source
from .arithmetic import SUSPICION_LAMBDA, ArithmeticModel
from .stats import NodeStats

VALUE_SAMPLE_SIZE = 256
"""Default number of elements per node kept for `ExactnessReport.value_sample`."""

OUTPUT_ERROR_SAMPLE_SIZE = 4096
"""Elements per output kept for `ExactnessReport.output_error_sample`."""


_PROVENANCE_COLUMNS = ("fx_name", "fx_op", "spelling", "module_path", "location")
"""The columns `ExactnessReport.to_pandas` shows of an entry's `source`."""


def _no_samples() -> Mapping:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ExactnessEntry:
    """One IR node: the largest observed |torch - reference|, the bound there, their ratio.

    `source` is the IR node's own provenance record (`Source`: FX node, spelling, module,
    file:line); `fx_name`, `fx_op`, `spelling`, `module_path` and `location` read it.
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
                   lo.ratio * tier_two if math.isfinite(lo.ratio) else lo.ratio)


@dataclass(frozen=True, slots=True)
class OutputEntry:
    """One model output: the user's eager model(x) against the reference and its bound."""

    name: str
    max_error: float
    bound: float
    ratio: float
    violations: int
    traced_differs: bool = False
    checked: bool = True

    @classmethod
    def from_stats(cls, name: str, stats: NodeStats) -> OutputEntry:
        e = stats.end_to_end
        return cls(name, e.max_error, e.bound_at_worst, e.ratio, e.violations,
                   bool(stats.notes), not (stats.unchecked or e.unbounded))


@dataclass(frozen=True)
class ExactnessReport:
    """The result of `check_exactness`.

    Attributes:
        entries: One entry per IR operator node, in topological order.
        outputs: The eager model's outputs against the reference graph's.
        arithmetic: The declared arithmetic model (unit roundoffs, flags read).
        inputs: How the inputs were chosen.
        samples: How many samples were checked.
        traced_differs: The traced graph's outputs were not bit-identical to eager ones.
        value_samples: Node name -> (flat indices, PyTorch's values, reference values) of
            sampled elements; read with `value_sample`.
        output_samples: Output name -> (flat indices, eager values, reference values);
            read with `output_error_sample`.
        runtime: What computed the values checked: "PyTorch" (`check_exactness`), or
            another runtime (`check_onnx`: "onnxruntime <version>").
    """

    entries: tuple[ExactnessEntry, ...]
    outputs: tuple[OutputEntry, ...]
    arithmetic: ArithmeticModel
    inputs: str
    samples: int
    local: bool
    end_to_end: bool
    traced_differs: bool
    value_samples: Mapping[str, tuple[torch.Tensor, ...]] = field(
        default_factory=_no_samples, repr=False, compare=False)
    output_samples: Mapping[str, tuple[torch.Tensor, ...]] = field(
        default_factory=_no_samples, repr=False, compare=False)
    runtime: str = "PyTorch"

    def value_sample(self, node_name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """PyTorch's values and the float64 end-to-end reference values of one IR node at up
        to `keep_samples` (default 256) sampled elements, chosen from the seed.

        Args:
            node_name: An IR node name (an Input node or an operator node).

        Returns:
            (torch_values, reference_values): 1-D float64 tensors of equal length, in the
            order of `value_sample_indices`. PyTorch's values are converted exactly; a
            reference value is NaN where none was computed (`end_to_end=False`, or the node's
            inputs had already failed).

        Raises:
            KeyError: No sample for that name (an unknown node, or `keep_samples=0`).

        Example:
            >>> t, r = report.value_sample("conv1"); plt.scatter(r, t)
        """
        _, t, r = self._sample(self.value_samples, node_name, "value")
        return t.clone(), r.clone()

    def value_sample_indices(self, node_name: str) -> torch.Tensor:
        """Flat element indices of `value_sample(node_name)` into the node's batched value
        (samples x per-sample shape, row-major): `value.reshape(-1)[indices]`."""
        return self._sample(self.value_samples, node_name, "value")[0].clone()

    def output_error_sample(self, name: str | None = None) -> torch.Tensor:
        """|eager output - float64 reference| at up to 4096 sampled elements per output (all
        of them when there are fewer), chosen from the seed.

        Args:
            name: An output's IR node name (`GraphIR.outputs`), or None for all outputs
                concatenated in order.

        Returns:
            A 1-D float64 tensor, in the order of `output_error_sample_indices`; NaN where no
            reference was computed (`end_to_end=False`, or a failed node upstream).

        Raises:
            KeyError: `name` is not an output.
        """
        names = [o.name for o in self.outputs] if name is None else [name]
        parts = [self._sample(self.output_samples, n, "output")[1:] for n in names]
        if not parts:
            return torch.zeros(0, dtype=torch.float64)
        return torch.cat([(t - r).abs() for t, r in parts])

    def output_error_sample_indices(self, name: str) -> torch.Tensor:
        """Flat element indices of `output_error_sample(name)` into that batched output."""
        return self._sample(self.output_samples, name, "output")[0].clone()

    @staticmethod
    def _sample(samples, name: str, kind: str) -> tuple[torch.Tensor, ...]:
        try:
            return samples[name]
        except KeyError:
            known = ", ".join(list(samples)[:8]) or "none were kept (keep_samples=0?)"
            raise KeyError(f"no {kind} sample for node {name!r}; known: {known}") from None

    @property
    def ok(self) -> bool:
        """True when the arithmetic is within the declared model, every node and output was
        checked, none exceeded its certified bound, and the model's own eager outputs are
        the traced graph's, bit for bit."""
        return self.arithmetic.certified and self.first_violation is None \
            and not any(o.violations for o in self.outputs) and not self.traced_differs \
            and not self.unchecked

    @property
    def suspicious(self) -> tuple[str, ...]:
        """Nodes the probabilistic second tier flags (`ExactnessEntry.suspicious`): never
        part of the verdict, a pointer to where a fault below the certified bound may sit."""
        return tuple(e.name for e in self.entries if e.suspicious)

    @property
    def unchecked(self) -> tuple[str, ...]:
        """The nodes and outputs some check could not run at (see their notes): nothing is
        certified there."""
        return tuple([e.name for e in self.entries if not e.checked]
                     + [o.name for o in self.outputs if not o.checked])

    @property
    def first_violation(self) -> ExactnessEntry | None:
        """The first violating node in topological order, or None."""
        return next((e for e in self.entries if e.violated), None)

    def tightness(self) -> dict[str, tuple[float, float]]:
        """Per op_type with rounding: (median, worst) node-local observed/bound ratio."""
        per_op: dict[str, list[ExactnessEntry]] = {}
        for e in self.entries:
            if e.local_bound > 0 or e.local_median_ratio > 0:
                per_op.setdefault(e.op_type, []).append(e)
        return {op: (float(torch.tensor([e.local_median_ratio for e in es]).median()),
                     max(e.local_ratio for e in es)) for op, es in per_op.items()}

    def to_pandas(self):
        """One row per node: the columns of ExactnessEntry plus `violated`."""
        import pandas as pd

        names = [n for f in fields(ExactnessEntry)
                 for n in (_PROVENANCE_COLUMNS if f.name == "source" else (f.name,))]
        rows = [{**{n: getattr(e, n) for n in names}, "violated": e.violated}
                for e in self.entries]
        return pd.DataFrame(rows, columns=[*names, "violated"])

    def summary(self) -> str:
        """A few lines: the verdict, the first violation, the arithmetic model."""
        first = self.first_violation
        if not self.arithmetic.certified and first is None and not self.traced_differs \
                and not any(o.violations for o in self.outputs):
            reasons = [n.removeprefix("NOT CERTIFIED: ") for n in self.arithmetic.notes
                       if n.startswith("NOT CERTIFIED: ")]
            why = reasons[0] if reasons else "the arithmetic in force is outside the declared model"
            verdict = f"NOT CERTIFIED: {why} (see below); no violation was observed"
        elif self.ok:
            worst = max(self.entries, key=lambda e: max(e.local_ratio, e.e2e_ratio),
                        default=None)
            verdict = (f"exact within the certified bounds on {self.samples} samples "
                       f"({len(self.entries)} nodes")
            if worst is not None:
                verdict += (f"; worst observed/bound {max(worst.local_ratio, worst.e2e_ratio):.3g}"
                            f" at {worst.name!r}")
            verdict += ")"
        elif first is not None:
            local = first.local_violations > 0
            check = "node-local" if local else "end-to-end"
            error = first.local_max_error if local else first.e2e_max_error
            bound = first.local_bound if local else first.e2e_bound
            ratio = first.local_ratio if local else first.e2e_ratio
            where = f", {quote_source(first.location, first.source_text)}" \
                if first.location else ""
            measured = (f"{check} error {_g(error)} exceeds the bound {_g(bound)} "
                        f"(ratio {_g(ratio)})")
            # A node that could not be compared (a shape mismatch) has no error to speak of:
            # lead with what went wrong.
            numbers = error != 0 and not (math.isinf(ratio) and bound == 0)
            detail = first.note if first.note and not numbers else \
                measured + (f"; {first.note}" if first.note else "")
            verdict = (f"VIOLATION at node {first.name!r} ({first.op_type}, {first.fx_op} "
                       f"{first.spelling}{where}): {detail}")
        elif self.traced_differs:
            names = ", ".join(repr(o.name) for o in self.outputs if o.traced_differs)
            verdict = (f"VIOLATION at output {names}: the model's own eager output is not "
                       "bit-identical to its traced graph's on the same inputs, so the trace "
                       "the GraphIR follows is not what the model computes (tracing differs "
                       "from eager execution, e.g. an in-place update of an aliased tensor, "
                       "or a forward hook, which is not part of the graph)")
        elif any(o.violations for o in self.outputs):
            names = ", ".join(repr(o.name) for o in self.outputs if o.violations)
            who = "the eager model" if self.runtime == "PyTorch" else \
                f"{self.runtime}'s output"
            verdict = f"VIOLATION at output {names}: {who} differs from the reference beyond " \
                "the bound"
        else:
            entry = next((e for e in self.entries if not e.checked), None)
            where = f"; first node {entry.name!r}: {entry.note}" if entry is not None else \
                f"; first output {self.unchecked[0]!r}" if self.unchecked else ""
            verdict = (f"NOT CERTIFIED: {len(self.unchecked)} node(s) or output(s) could not "
                       f"be checked{where}")
        if not self.arithmetic.certified and not verdict.startswith("NOT CERTIFIED"):
            verdict += " (and NOT CERTIFIED: the arithmetic in force is outside the model)"
        lines = [verdict, f"inputs: {self.inputs}",
                 f"arithmetic: {self.arithmetic.describe()}"]
        if self.traced_differs:
            lines.append("note: the traced graph's outputs are not bit-identical to the "
                         "eager model's")
        if self.suspicious:
            worst = max((e for e in self.entries if e.suspicious), key=lambda e: e.suspicion)
            lines.append(f"suspicious (second tier, not part of the certificate: errors "
                         f"above Higham & Mary's probabilistic bound, lambda "
                         f"{SUSPICION_LAMBDA:g}): {', '.join(map(repr, self.suspicious))}; "
                         f"largest {worst.suspicion:.3g} at {worst.name!r}")
        return "\n".join(lines)

    def table(self) -> str:
        """Per-node text table: op_type, and per check the error and the bound at the element
        where error/bound is largest, their ratio (and the ulps there, node-local)."""
        header = ("node", "op_type", "local err at worst", "local bound", "ratio", "ulps",
                  "e2e err at worst", "e2e bound", "ratio", "")
        rows = [header] + [(
            e.name, e.op_type, _g(e.local_error_at_worst), _g(e.local_bound), _g(e.local_ratio),
            _g(e.local_ulps), _g(e.e2e_error_at_worst), _g(e.e2e_bound), _g(e.e2e_ratio),
            "VIOLATED" if e.violated else "" if e.checked else "NOT CHECKED")
            for e in self.entries]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                         for r in rows)

    def __repr__(self) -> str:
        return self.summary() + "\n" + self.table()

    def _repr_html_(self) -> str:
        frame = self.to_pandas()
        return f"<pre>{html.escape(self.summary())}</pre>" + frame.to_html(index=False)


def _g(value: float) -> str:
    return f"{value:.3g}"
