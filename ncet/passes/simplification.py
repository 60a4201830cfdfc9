"""`simplify`: the passes of `PASSES` run in order until none applies, then the
graph-to-graph certificate on sampled inputs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from ..errors import from_caller
from ..exactness.arithmetic import read_arithmetic_model
from ..exactness.check import generate_inputs
from ..exactness.rules import subnormal_constants
from ..ir import GraphIR
from .certificate import compare_graphs
from .pass_table import PASSES
from .records import Change, Pass
from .report import SimplificationReport, Violation

MAX_ROUNDS = 32
"""The pass table is run again while a round changes something, at most this often."""


def _passes(passes) -> list[Pass]:
    if passes is None:
        return list(PASSES.values())
    chosen = []
    for p in passes:
        if isinstance(p, Pass):
            chosen.append(p)
        elif p in PASSES:
            chosen.append(PASSES[p])
        else:
            raise ValueError(f"no simplification pass {p!r}; choose from {', '.join(PASSES)}")
    return chosen


def run_passes(ir: GraphIR, passes: Iterable[Pass]) -> tuple[GraphIR, list[Change]]:
    """The passes in order, again and again until a round changes nothing; every change
    and every refusal (each refusal once)."""
    passes = list(passes)
    changes: list[Change] = []
    seen: set = set()
    for _ in range(MAX_ROUNDS):
        changed = False
        for p in passes:
            ir, made = p.run(ir)
            for change in made:
                if change.refused:
                    key = (change.pass_name, change.removed, change.note)
                    if key in seen:
                        continue
                    seen.add(key)
                else:
                    changed = True
                changes.append(change)
        if not changed:
            break
    return ir, changes


def _ops(ir: GraphIR) -> int:
    return sum(n.op_type not in ("Input", "Output") for n in ir.nodes)


def _per_output(outputs, key: str) -> torch.Tensor:
    """One of the outputs' per-element maxima, concatenated (inf for an output never held)."""
    parts = [getattr(o, key) if getattr(o, key) is not None
             else torch.full((1,), float("inf"), dtype=torch.float64) for o in outputs]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _blame(simplified: GraphIR, name: str, produced: dict) -> tuple[str, ...]:
    """The passes that made `name`, or those of its nearest ancestors that a pass made."""
    frontier, seen = [name], set()
    while frontier:
        found = sorted({p for n in frontier for p in produced.get(n, ())})
        if found:
            return tuple(found)
        seen.update(frontier)
        frontier = [i for n in frontier for i in simplified.node(n).inputs if i not in seen]
    return ()


@from_caller
def simplify(ir: GraphIR, passes: Sequence[str | Pass] | None = None, *,
             inputs: Sequence[torch.Tensor] | None = None, samples_per_scale: int = 8,
             seed: int = 0) -> tuple[GraphIR, SimplificationReport]:
    """Fold and merge for the verifiers' sake, and certify that the simpler graph computes
    what the original computes.

    The passes (`ncet.passes.PASSES`, docs/simplification.md) run in order until none
    applies: Identity and no-op moves removed, reshape chains collapsed, elementwise
    constants merged, an input normalisation folded into the first Linear/Conv2d, BatchNorm
    folded into the Conv2d/Linear before it, consecutive affine layers merged. Every
    computed constant is computed in float64 with a carried error bound and rounded once
    to the network's dtype, under a new name. Then both graphs run on the samples (in
    their dtype, and in the float64 reference with certified radii) and every node they
    share and every output is held to |simplified - original| <= E_s + E_o + D_s
    (docs/simplification.md, "The certificate").

    Args:
        ir: The graph (from `convert` or `from_onnx`).
        passes: Pass names or `Pass` records, in order; None for all of `PASSES`.
        inputs: Batched inputs for the certificate, one per Input node; generated as
            `check_exactness` generates them (at scales 1e-6, 1 and 1e4) when None.
        samples_per_scale, seed: For the generated inputs.

    Returns:
        (the simplified GraphIR, a SimplificationReport: `.ok`, `.bound`, `.changes`).

    Raises:
        TypeError: `ir` is not a GraphIR.
        ValueError: An unknown pass name, or inputs that do not match the graph.

    Example:
        >>> simple, report = ncet.simplify(ncet.convert(net, (3, 32, 32)))
        >>> print(report.verdict())
    """
    if not isinstance(ir, GraphIR):
        raise TypeError(f"ir must be a GraphIR (from ncet.convert or ncet.from_onnx), not "
                        f"{type(ir).__name__}")
    chosen = _passes(passes)
    simplified, changes = run_passes(ir, chosen)
    produced: dict[str, list[str]] = {}
    for change in changes:
        if not change.refused:
            for name in change.added:
                produced.setdefault(name, []).append(change.pass_name)
    if inputs is None:
        inputs, text = generate_inputs(ir, samples_per_scale, seed)
    else:
        inputs = [torch.as_tensor(x) for x in inputs]
        if len(inputs) != len(ir.inputs) or any(
                tuple(x.shape[1:]) != n.shape or x.shape[0] == 0
                for x, n in zip(inputs, ir.inputs)):
            raise ValueError("inputs must be one batched tensor per Input node, with its "
                             "per-sample shape and at least one sample")
        inputs = [x.to(getattr(torch, n.dtype)) for x, n in zip(inputs, ir.inputs)]
        text = f"{inputs[0].shape[0]} given samples"
    arithmetic = read_arithmetic_model()
    notes: list[str] = []
    for graph in (ir, simplified):
        if arithmetic.flush and (found := subnormal_constants(
                graph.nodes, graph.constants, arithmetic.flushing_kernels)):
            arithmetic = arithmetic.outside(f"subnormal constants ({', '.join(found[:5])}) "
                                            "may be flushed to zero")
    if not arithmetic.certified:
        notes.append(arithmetic.describe())
    nodes, outputs = compare_graphs(ir, simplified, inputs, arithmetic)
    agreements = (*nodes, *outputs)
    bound, exact_bound = (_per_output(outputs, key) for key in ("per_element",
                                                                  "exact_per_element"))
    if simplified is ir:  # nothing changed: the simplified graph is the original
        exact_bound = torch.zeros_like(exact_bound)
    violation = None
    order = {n.name: i for i, n in enumerate(simplified.nodes)}
    bad = sorted((a for a in agreements if a.violated),
                 key=lambda a: (order.get(a.name, len(order)), a.output is not None))
    if bad:
        first = bad[0]
        violation = Violation(_blame(simplified, first.name, produced), first.name,
                              first.output, *first.worst)
    unchecked = [a for a in agreements if a.unchecked]
    if unchecked:
        notes.append(f"the bound at {unchecked[0].name} is not finite: nothing is certified "
                     "there")
    ok = violation is None and not unchecked and arithmetic.certified
    report = SimplificationReport(tuple(changes), _ops(ir), _ops(simplified), bound, ok,
                                  agreements, violation,
                                  {k: tuple(v) for k, v in produced.items()}, text,
                                  tuple(notes), exact_bound)
    return simplified, report
