"""What `simplify` returns beside the simplified graph: every change (pass, nodes removed
and added, constants computed and how), the refusals with their reasons, and the
graph-to-graph certificate: the bound on the outputs' difference, and a violation named by
its pass and node."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .certificate import Agreement
from .records import Change


@dataclass(frozen=True)
class Violation:
    """The first place (in the simplified graph's order) where the two graphs differ by
    more than the certified bound, and the passes whose changes reach it."""

    passes: tuple[str, ...]
    node: str
    output: int | None
    difference: float
    bound: float

    def __str__(self) -> str:
        where = f"node {self.node}" if self.output is None else \
            f"output {self.output} ({self.node})"
        return (f"VIOLATION at {where}, changed by pass {', '.join(self.passes) or '(none)'}: "
                f"the simplified graph differs from the original by {self.difference:.3g}, "
                f"beyond the certified bound {self.bound:.3g}")


@dataclass(frozen=True)
class SimplificationReport:
    """The changes `simplify` made and the certificate that the simplified graph computes
    what the original computes.

    Attributes:
        changes: Every rewrite, in order, and every refusal (`Change.refused`).
        nodes_before, nodes_after: Operator nodes (not Input/Output) of the two graphs.
        bound: float64 (m,), per output element (the outputs flattened row-major in output
            order): the largest certified bound on |simplified - original| over the
            samples, both in the network's dtype as PyTorch computes them. Infinite where
            nothing is certified.
        ok: Every shared node and output agreed within its bound on every sample, and the
            arithmetic is within the certificate's model.
        agreements: The shared nodes', then the outputs'.
        violation: The first violation, or None.
        produced_by: Node name -> the passes that put it there.
        samples: How many inputs were run, and how they were made.
        notes: Anything that keeps the certificate from being complete.
        exact_bound: float64 (m,), per output element: the largest certified bound on
            |[[simplified]](x) - [[original]](x)|, the two graphs' exact real values, over
            the samples (|r_s - r_o| + R_s + R_o from the float64 references and their own
            radii; it assumes nothing about the passes; 0 when nothing changed). Much
            smaller than `bound` on deep networks, whose end-to-end float32 radii grow with
            depth.
    """

    changes: tuple[Change, ...]
    nodes_before: int
    nodes_after: int
    bound: torch.Tensor
    ok: bool
    agreements: tuple[Agreement, ...]
    violation: Violation | None
    produced_by: dict
    samples: str
    notes: tuple[str, ...] = ()
    exact_bound: torch.Tensor | None = None

    @property
    def applied(self) -> tuple[Change, ...]:
        """The rewrites made (not the refusals)."""
        return tuple(c for c in self.changes if not c.refused)

    @property
    def refusals(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.refused)

    @property
    def max_bound(self) -> float:
        return float(self.bound.max()) if self.bound.numel() else 0.0

    @property
    def max_exact_bound(self) -> float:
        b = self.exact_bound
        return float(b.max()) if b is not None and b.numel() else 0.0

    def verdict(self) -> str:
        """One line: the certified statement, or what stands in its way."""
        if self.violation is not None:
            return str(self.violation)
        if not self.ok:
            return "NOT CERTIFIED: " + (self.notes[0] if self.notes else "a bound is not finite")
        return (f"CERTIFIED: the simplified network's outputs agree with the original's within "
                f"{self.max_bound:.3g} (certified), both in float arithmetic; their exact "
                f"values within {self.max_exact_bound:.3g}; at {self.samples}")

    def __str__(self) -> str:
        counts: dict[str, int] = {}
        for c in self.applied:
            counts[c.pass_name] = counts.get(c.pass_name, 0) + 1
        lines = [self.verdict(),
                 f"simplify: {self.nodes_before} operator nodes -> {self.nodes_after} ("
                 + (", ".join(f"{k} x{v}" for k, v in counts.items()) or "no change") + ")"]
        lines += [f"  {c}" for c in self.changes]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok, "verdict": self.verdict(), "max_bound": self.max_bound,
            "bound": self.bound.tolist(), "max_exact_bound": self.max_exact_bound,
            "exact_bound": None if self.exact_bound is None else self.exact_bound.tolist(),
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after, "changes": [c.to_dict() for c in self.changes],
            "violation": None if self.violation is None else {
                "passes": list(self.violation.passes), "node": self.violation.node,
                "output": self.violation.output, "difference": self.violation.difference,
                "bound": self.violation.bound},
            "samples": self.samples, "notes": list(self.notes),
        }
