"""VNN-COMP's rule for accepting a counterexample, as its scoring scripts apply it.

Source: github.com/ChristopherBrix/vnncomp2023_results, SCORING/counterexamples.py
(commit 1d7bb238e299feede279a63d6506d8fedcb77c87), `get_ce_diff` and
`is_specification_vio`, with COUNTEREXAMPLE_RTOL = 1e-3 and COUNTEREXAMPLE_ATOL = 1e-4
(docs/adjudication.md). In float64, on the numbers as Python's float() reads them:

1. the file's X is cast to the network's input dtype (float32) and run in onnxruntime; with
   e the executed output and y the claimed Y, rel = max|e - y| / max|y| (0 when
   max|y| < 1e-6); the output "matches" when rel <= RTOL;
2. then, for the boxes in order: X is inside a box when lb - ATOL <= x <= ub + ATOL for
   every element; inside one, the property is violated when some polytope of its unsafe set
   has A y <= b + ATOL on the *claimed* y (strict rows as non-strict);
3. accepted = matched and violated in some box.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .property import Property

RTOL = 1e-3
"""COUNTEREXAMPLE_RTOL: the claimed output against the executed one, relative (inf-norm)."""
ATOL = 1e-4
"""COUNTEREXAMPLE_ATOL: the box and the property on the claimed output, absolute."""
TINY_NORM = 1e-6
"""Below this inf-norm of the claimed output, the relative error is taken as 0."""


@dataclass(frozen=True)
class Competition:
    """The competition's answer.

    Attributes:
        accepted: matched, and the claimed output violates the property within ATOL in a box
            that holds X within ATOL.
        relative_error: max|executed - claimed| / max|claimed| (0 below TINY_NORM).
        matched: relative_error <= RTOL.
        in_box: X within ATOL of some box.
        property_violated: the claimed output within ATOL of the unsafe set of a box that
            holds X within ATOL.
        claimed_from: "witness" (the tool's Y) or the runtime whose output stood in for a
            witness without one.
        executed_by: the runtime whose output is "executed".
    """

    accepted: bool
    relative_error: float
    matched: bool
    in_box: bool
    property_violated: bool
    claimed_from: str
    executed_by: str


def competition_rule(prop: Property, x64: np.ndarray, executed: np.ndarray,
                     claimed: np.ndarray, *, claimed_from: str = "witness",
                     executed_by: str = "") -> Competition:
    """Apply the rule (module docstring) to float64 X, executed and claimed outputs."""
    diff = float(np.max(np.abs(executed - claimed))) if claimed.size else float("inf")
    norm = float(np.max(np.abs(claimed))) if claimed.size else 0.0
    rel = 0.0 if norm < TINY_NORM else diff / norm
    matched = not rel > RTOL  # as the scripts test it: a NaN error does not refuse
    in_box = violated = False
    for box, polytopes in prop.reachability(np.float64, "nearest"):
        bounds = np.asarray(box, dtype=np.float64).reshape(-1, 2)
        if not bool(np.all((x64 >= bounds[:, 0] - ATOL) & (x64 <= bounds[:, 1] + ATOL))):
            continue
        in_box = True
        if any(bool(np.all(a.astype(np.float64) @ claimed <= b.astype(np.float64) + ATOL))
               for a, b in polytopes):
            violated = True
            break
    return Competition(matched and violated, rel, matched, in_box, violated, claimed_from,
                       executed_by)
