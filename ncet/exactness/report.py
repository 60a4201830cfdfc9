"""ExactnessReport: per node and per output, observed error against the certified bound."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

import torch

from ..errors import quote_source
from .arithmetic import FLUSH_VERDICT, SUSPICION_LAMBDA, ArithmeticModel
from .blame import Blame, trace_violations
from .entries import STATUSES, ExactnessEntry, OutputEntry, vacuous
from .report_view import consequences, cut_text, ratio_text, repr_html, styled_frame, text_table

__all__ = ["OUTPUT_ERROR_SAMPLE_SIZE", "STATUSES", "VALUE_SAMPLE_SIZE", "ExactnessEntry",
           "ExactnessReport", "OutputEntry", "vacuous"]

VALUE_SAMPLE_SIZE = 256
"""Default number of elements per node kept for `ExactnessReport.value_sample`."""

OUTPUT_ERROR_SAMPLE_SIZE = 4096
"""Elements per output kept for `ExactnessReport.output_error_sample`."""


_PROVENANCE_COLUMNS = ("fx_name", "fx_op", "spelling", "module_path", "location")
"""The columns `ExactnessReport.to_pandas` shows of an entry's `source`."""


def _no_samples() -> Mapping:
    return MappingProxyType({})


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
        cut: For a GraphIR cut short (`convert(stop_at=..., cut_trailing=...)`), the model's
            operations it leaves out, FX node name -> why (its Output node's `cut`): its
            outputs were checked against the model's values at the cut, not the model's
            outputs. Empty when the whole model was checked.
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
    cut: Mapping[str, str] = field(default_factory=_no_samples)

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

    # -- root causes, consequences, vacuous bounds ---------------------------------------

    @functools.cached_property
    def _blame(self) -> Blame:
        return trace_violations(self.entries, self.outputs)

    @functools.cached_property
    def _by_name(self) -> Mapping[str, ExactnessEntry]:
        return MappingProxyType({e.name: e for e in self.entries})

    def entry(self, name: str) -> ExactnessEntry:
        """The entry of one IR operator node.

        Raises:
            KeyError: The report has no entry of that name (an Input node, or unknown).
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"the exactness report has no node {name!r}") from None

    @property
    def root_causes(self) -> tuple[ExactnessEntry, ...]:
        """The violated nodes singled out from their consequences, in topological order:
        a node-local violation none of whose own inputs is violated, or a violation with
        nothing violated upstream (`blame.trace_violations`). One seeded fault gives one
        root cause, at its node."""
        return tuple(self._by_name[n] for n in self._blame.roots)

    @property
    def not_certified(self) -> tuple[str, ...]:
        """Names of the nodes and outputs downstream of a violation, violated or not (nodes
        in topological order, then outputs, each name once): their end-to-end comparison
        is against a reference a fault has already moved, so nothing is certified there."""
        blame = self._blame
        roots = set(blame.roots)
        nodes = [e.name for e in self.entries if e.name in blame.upstream
                 and e.name not in roots]
        seen = set(nodes)
        return tuple(nodes + [o.name for o in self.outputs if o.name in blame.outputs
                              and o.name not in seen])

    def caused_by(self, name: str, output: bool = False) -> tuple[str, ...]:
        """The root causes upstream of a node (or, with `output`, that an output depends on,
        its own node included), in topological order; () when none."""
        blame = self._blame
        found = (blame.outputs if output else blame.upstream).get(name, ())
        return tuple(r for r in blame.roots if r in found)

    def status(self, name: str) -> str:
        """What the report says of one node: one of `STATUSES` ("root cause", "not
        certified", "not checked", "vacuous" or "certified").

        Raises:
            KeyError: The report has no entry of that name.
        """
        entry = self.entry(name)
        if name in self._blame.roots:
            return "root cause"
        if name in self._blame.upstream:
            return "not certified"
        if not entry.checked:
            return "not checked"
        return "vacuous" if entry.e2e_vacuous else "certified"

    def output_status(self, output: OutputEntry) -> str:
        """What the report says of one output: "not certified" downstream of (or at) a
        violated node, "violated" for a violation of its own, else as `status`."""
        if output.name in self._blame.outputs:
            return "not certified"
        if output.violations or output.traced_differs:
            return "violated"
        if not output.checked:
            return "not checked"
        return "vacuous" if output.vacuous else "certified"

    @property
    def vacuous_outputs(self) -> tuple[OutputEntry, ...]:
        """The certified outputs whose end-to-end bound is vacuous (`vacuous`)."""
        return tuple(o for o in self.outputs if self.output_status(o) == "vacuous")

    @property
    def vacuous(self) -> tuple[str, ...]:
        """Names of the certified nodes whose end-to-end bound is vacuous (`vacuous`)."""
        return tuple(e.name for e in self.entries if self.status(e.name) == "vacuous")

    @property
    def worst_ratio(self) -> float:
        """The largest observed/bound ratio of any node, in either check (0 for none);
        `ratio_text` of it is what the summary and the report's card print."""
        ratios = [r for e in self.entries for r in (e.local_ratio, e.e2e_ratio)
                  if not math.isnan(r)]
        return max(ratios, default=0.0)

    def worst_entries(self, k: int) -> list[ExactnessEntry]:
        """The k worst entries: root causes, then other violations, then by largest
        observed/bound ratio; ties in topological order."""
        roots = set(self._blame.roots)

        def key(i: int):
            e = self.entries[i]
            ratios = [r for r in (e.local_ratio, e.e2e_ratio) if not math.isnan(r)]
            return (e.name not in roots, not e.violated, -max(ratios, default=-math.inf), i)

        return [self.entries[i] for i in sorted(range(len(self.entries)), key=key)[:k]]

    def output_ratio_sample(self, name: str | None = None) -> torch.Tensor:
        """|eager output - reference| / bound over a sample of output elements: the check's
        own ratios, evenly strided over each chunk (`OutputEntry.ratio_sample`; at most 1
        everywhere when the outputs are within their bounds).

        Args:
            name: An output's name, or None for all outputs concatenated in order.

        Raises:
            KeyError: `name` is not an output.
        """
        outputs = self.outputs if name is None else [o for o in self.outputs if o.name == name]
        if name is not None and not outputs:
            raise KeyError(f"the exactness report has no output {name!r}")
        return torch.tensor([r for o in outputs for r in o.ratio_sample], dtype=torch.float64)

    def tightness(self) -> dict[str, tuple[float, float]]:
        """Per op_type with rounding: (median, worst) node-local observed/bound ratio."""
        per_op: dict[str, list[ExactnessEntry]] = {}
        for e in self.entries:
            if e.local_bound > 0 or e.local_median_ratio > 0:
                per_op.setdefault(e.op_type, []).append(e)
        return {op: (float(torch.tensor([e.local_median_ratio for e in es]).median()),
                     max(e.local_ratio for e in es)) for op, es in per_op.items()}

    def to_pandas(self, styled: bool = False):
        """One row per node: the columns of ExactnessEntry plus `violated`.

        Args:
            styled: Return a pandas Styler of that frame instead, for notebooks: a
                `status` column (`status`), violated rows tinted red and those downstream of
                a violation amber, numbers right-aligned in one format (ratios as
                `ratio_text`, so an attained bound reads 1.000).
        """
        import pandas as pd

        names = [n for f in fields(ExactnessEntry)
                 for n in (_PROVENANCE_COLUMNS if f.name == "source" else (f.name,))]
        rows = [{**{n: getattr(e, n) for n in names}, "violated": e.violated}
                for e in self.entries]
        frame = pd.DataFrame(rows, columns=[*names, "violated"])
        return styled_frame(self, frame) if styled else frame

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
            worst = self.worst_entries(1)
            verdict = (f"exact within the certified bounds on {self.samples} samples "
                       f"({len(self.entries)} nodes")
            if worst:
                verdict += (f"; worst observed/bound {ratio_text(self.worst_ratio)}"
                            f" at {worst[0].name!r}")
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
                        f"(ratio {ratio_text(ratio)})")
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
        if self.cut:
            verdict += f"; {cut_text(self.cut)}"
        if self.arithmetic.flush:
            verdict += f"; {FLUSH_VERDICT}"
        if not self.arithmetic.certified and not verdict.startswith("NOT CERTIFIED"):
            verdict += " (and NOT CERTIFIED: the arithmetic in force is outside the model)"
        lines = [verdict, *consequences(self), f"inputs: {self.inputs}",
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
        where error/bound is largest, their ratio (and the ulps there, node-local), and the
        node's status."""
        return text_table(self)

    def __repr__(self) -> str:
        return self.summary() + "\n" + self.table()

    def _repr_html_(self) -> str:
        """The verdict, formatted, and the worst nodes (`report_view.repr_html`)."""
        return repr_html(self)


def _g(value: float) -> str:
    """An error or a bound in a verdict: enough digits to tell an error just above its
    bound from the bound."""
    return f"{value:.4g}"
