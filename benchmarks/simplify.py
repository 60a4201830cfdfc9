"""Certified simplification (issue 35): `ncet.simplify` plus its certificate against onnxsim
on the same files, in one run, and the table of docs/simplification.md.

For every network of the VNN-COMP corpus that imports (`../shared/vnncomp` beside the
repository, as tests/corpus.py finds it; `--corpus` to point elsewhere):
  * `ncet.simplify(ir, inputs=...)` (the passes and the graph-to-graph certificate) on
    --samples points of the first property's box the competition pairs with the network
    (its corners and points drawn inside, tests/corpus.py's `box_samples`), or on 3 x
    --samples generated samples (scales 1e-6, 1, 1e4) for a network without one; wall time,
    median of --rounds after a warm-up: operator nodes before and after, the certified
    bound on the outputs' difference (largest element), and whether it certified;
  * the lint findings per tool (`ncet.lint_onnx`: abcrown, marabou, nnv, eran) of the
    verifier-profile export of the imported graph and of the simplified one (the canonical
    profile for both when the verifier profile refuses the graph);
  * `onnxsim.simplify(path, check_n=C)` (constant folding, its fusions, and its own check:
    C random inputs compared with rtol 1e-4, atol 1e-5) when onnxsim is installed: wall
    time, ONNX nodes before and after, and its check's answer.

Usage: python benchmarks/simplify.py [--networks acasxu,oval21] [--rounds 3] [--samples 2]
       [--check-n 1] [--markdown] [--json out.json]
Times are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ncet  # noqa: E402
from ncet.exactness.check import generate_inputs  # noqa: E402
from ncet.onnx.builder import ExportError  # noqa: E402
from ncet.onnx.lint import LINT_TOOLS  # noqa: E402
from tests.corpus import box_samples, first_property  # noqa: E402

CORPUS = (ROOT / ".." / "shared" / "vnncomp").resolve()


def _timed(call, rounds: int):
    """The last result and the median wall time of `rounds` calls after one warm-up."""
    result = call()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times) if times else float("nan")


def _lint(ir) -> tuple[str, dict[str, int]]:
    for profile in ("verifier", "canonical"):
        try:
            model = ncet.to_onnx(ir, profile=profile)
        except ExportError:
            continue
        return profile, {tool: len(ncet.lint_onnx(model, tool).findings) for tool in LINT_TOOLS}
    return "refused", {}


def _onnxsim(path: Path, check_n: int, rounds: int) -> dict:
    import onnx
    import onnxsim

    before = len(onnx.load(str(path)).graph.node)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            (model, checked), seconds = _timed(lambda: onnxsim.simplify(str(path),
                                                                       check_n=check_n), rounds)
    except Exception as error:  # onnxsim's failures are data here
        return {"error": f"{type(error).__name__}: {str(error)[:80]}"}
    return {"nodes_before": before, "nodes_after": len(model.graph.node), "check": checked,
            "seconds": seconds}


def measure(network: str, corpus: Path, rounds: int, samples: int, check_n: int) -> dict | None:
    path = corpus / network
    report = ncet.diagnose_onnx(path)
    if not report.ok:
        return None
    ir = report.graph
    prop = first_property(network)
    if prop is not None and len(ir.inputs) == 1:
        inputs = [box_samples(ncet.read_vnnlib(corpus / prop), ir.inputs[0].shape, samples)]
        where = "box"
    else:
        inputs, where = generate_inputs(ir, samples)[0], "generated"
    (simplified, simplification), seconds = _timed(
        lambda: ncet.simplify(ir, inputs=inputs), rounds)
    profile, before = _lint(ir)
    _, after = _lint(simplified)
    row = {"network": network, "nodes_before": simplification.nodes_before,
           "nodes_after": simplification.nodes_after, "certified": simplification.ok,
           "bound": simplification.max_bound,
           "exact_bound": simplification.max_exact_bound, "samples": where, "seconds": seconds,
           "passes": sorted({c.pass_name for c in simplification.applied}),
           "refusals": [c.note for c in simplification.refusals],
           "lint_profile": profile, "lint_before": before, "lint_after": after}
    if importlib.util.find_spec("onnxsim") is not None:
        row["onnxsim"] = _onnxsim(path, check_n, rounds)
    return row


def markdown(rows: list[dict]) -> str:
    """The table of docs/simplification.md."""
    tools = list(LINT_TOOLS)
    head = ("| network | nodes | bound, float | bound, exact | lint before (" + ", ".join(tools)
            + ") | after | ncet s | onnxsim nodes | onnxsim s |")
    lines = [head, "|---|---|---:|---:|---|---|---:|---|---:|"]
    for r in rows:
        sim = r.get("onnxsim", {})
        sim_nodes = f"{sim['nodes_before']} → {sim['nodes_after']}" if "nodes_after" in sim \
            else sim.get("error", "not run")
        sim_time = f"{sim['seconds']:.3f}" if "seconds" in sim else ""
        lines.append(
            f"| {r['network']} | {r['nodes_before']} → {r['nodes_after']} | "
            f"{r['bound']:.2g}{'' if r['samples'] == 'box' else ' (generated)'}"
            f"{'' if r['certified'] else ' (NOT CERTIFIED)'} | {r['exact_bound']:.2g} | "
            + "/".join(str(r["lint_before"].get(t, "-")) for t in tools) + " | "
            + "/".join(str(r["lint_after"].get(t, "-")) for t in tools)
            + f" | {r['seconds']:.3f} | {sim_nodes} | {sim_time} |")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--networks", default="", help="comma-separated substrings")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=8,
                        help="points of the box (or generated samples per scale)")
    parser.add_argument("--check-n", type=int, default=1, help="onnxsim's random checks")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    wanted = [w for w in args.networks.split(",") if w]
    networks = sorted(str(p.relative_to(args.corpus)) for p in args.corpus.rglob("*.onnx"))
    rows = []
    for network in networks:
        if wanted and not any(w in network for w in wanted):
            continue
        row = measure(network, args.corpus, args.rounds, args.samples, args.check_n)
        if row is None:
            continue
        rows.append(row)
        if not args.markdown:
            print(json.dumps(row), flush=True)
    if args.markdown:
        print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
