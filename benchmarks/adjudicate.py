"""Adjudicate every corpus counterexample (issue 33): the verdict counts per benchmark, the
witnesses the competition would accept that are no counterexample in exact arithmetic or in
float32, and the time per witness (target: median <= 1 s, every witness <= 30 s).

Each witness `witnesses/<benchmark>/<year>__<tool>__<onnx>_<vnnlib>.counterexample` is matched
to its network and property through the benchmark's `instances_included.csv`; a network that
does not import (`diagnose_onnx(f).ok` False) is counted and skipped. The time per witness is
the wall time of one `ncet.adjudicate(onnx_path, vnnlib_path, witness_path)` (the import and
the property read included; each network and property is read once before, so the first
witness of a network does not also pay for onnx's and onnxruntime's own imports).

Usage: python benchmarks/adjudicate.py [--corpus ../shared/vnncomp] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = (ROOT / ".." / "shared" / "vnncomp").resolve()
VERDICT_ORDER = ("counterexample", "float32-only", "exact-only", "tolerance-only",
                 "not-a-counterexample", "undecided")


def witness_instances(corpus: Path) -> list[dict]:
    """One row per corpus witness: benchmark, year, tool, onnx, vnnlib, witness (paths),
    matched as `ncet adjudicate --many` matches them (`corpus_rows`)."""
    from ncet.cli.adjudicating import corpus_rows

    rows = []
    for onnx, vnnlib, path in corpus_rows(corpus):
        year, tool, _ = path.name.split("__", 2)
        rows.append({"benchmark": path.parent.name, "year": year, "tool": tool,
                     "onnx": onnx, "vnnlib": vnnlib, "witness": path})
    return rows


def run(corpus: Path) -> dict:
    import ncet

    rows = witness_instances(corpus)
    imports: dict[Path, bool] = {}
    results = []
    for row in rows:
        if row["onnx"] not in imports:
            imports[row["onnx"]] = ncet.diagnose_onnx(row["onnx"]).ok
            ncet.read_vnnlib(row["vnnlib"])
        if not imports[row["onnx"]]:
            results.append({**row, "verdict": "network outside the op set", "seconds": None})
            continue
        start = time.perf_counter()
        answer = ncet.adjudicate(row["onnx"], row["vnnlib"], row["witness"])
        seconds = time.perf_counter() - start
        results.append({**row, "verdict": answer.verdict, "seconds": seconds,
                        "answer": answer.to_dict()})
        print(f"{seconds:7.2f} s  {answer.verdict:22s} {row['witness'].name}", file=sys.stderr,
              flush=True)
    return {"results": results}


def table(results: list[dict]) -> str:
    """The markdown table of verdict counts per benchmark, and the accepted non-witnesses."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        counts[r["benchmark"]][r["verdict"]] += 1
    columns = [v for v in VERDICT_ORDER if any(c[v] for c in counts.values())]
    columns.append("network outside the op set")
    lines = ["| benchmark | " + " | ".join(columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    total: collections.Counter = collections.Counter()
    for benchmark in sorted(counts):
        total.update(counts[benchmark])
        lines.append(f"| {benchmark} | " + " | ".join(
            str(counts[benchmark][c]) for c in columns) + " |")
    lines.append("| **all** | " + " | ".join(f"**{total[c]}**" for c in columns) + " |")
    accepted = [r for r in results if r["verdict"] == "tolerance-only"]
    lines += ["", "Accepted by the competition's rule, yet no counterexample in exact "
              "arithmetic nor in float32 (X outside the input region exactly, or the output "
              "outside the unsafe set in both):", "",
              "| witness | X outside the region by | inside its float32 rounding | exact margin "
              "| float32 margin |", "|---|---:|---|---:|---:|"]
    lines += [f"| `{r['benchmark']}/{r['witness'].name.removesuffix('.counterexample')}` | "
              f"{r['answer']['outside_by']:.3g} | {r['answer']['inside_float32_box']} | "
              f"{r['answer']['exact']['margin']:.3g} | "
              f"{r['answer']['float32']['margin']:.3g} |" for r in accepted] or ["| none | | | | |"]
    judged = [r["answer"] for r in results if "answer" in r]
    matches = sum(a["claimed_matches"] is True for a in judged)
    accepted = sum(a["competition"]["accepted"] for a in judged)
    lines += ["", f"The claimed Y reproduces (`claimed_matches`) for {matches} of {len(judged)} "
              f"witnesses; the competition's rule accepts {accepted}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = run(args.corpus)
    times = [r["seconds"] for r in out["results"] if r["seconds"] is not None]
    print(table(out["results"]))
    print()
    print(f"{len(times)} witnesses adjudicated of {len(out['results'])}: median "
          f"{statistics.median(times):.2f} s, max {max(times):.2f} s, total {sum(times):.1f} s")
    if args.json:
        args.json.write_text(json.dumps(out, default=str, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
