"""The table of docs/onnx-import.md, "The corpus" (issue 32; not a test): per VNN-COMP
network, what `ncet.diagnose_onnx` makes of it (imported, or refused: which op types, which
reason codes), its ONNX and GraphIR node counts; with --check, whether `ncet.check_onnx`
certifies the import (one sample per scale); and, for the networks that import,
`ncet.from_onnx`'s time against onnxruntime's `InferenceSession` creation and
`onnx2torch.convert`, timed as benchmarks/onnx_import.py times them (`network_row`: CPU
time on one torch thread, medians of --rounds rounds; --no-times leaves them out).

`--markdown` prints the table; tests/test_docs.py holds its outcome columns to what
`outcomes()` reports today.

Usage: python benchmarks/corpus_import.py [--corpus DIR] [--rounds 3] [--check]
       [--no-times] [--markdown] [--json out.json]
Times are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import ncet

if __package__:  # imported as benchmarks.corpus_import (the tests)
    from .onnx_import import load_onnx2torch, machine, network_row
else:  # run as a script: benchmarks/ itself is on sys.path
    from onnx_import import load_onnx2torch, machine, network_row

CORPUS = (Path(__file__).resolve().parent.parent / ".." / "shared" / "vnncomp").resolve()


@dataclass(frozen=True)
class Outcome:
    """What the import makes of one corpus network (no timing: the same on every machine)."""

    network: str
    imported: bool
    onnx_nodes: int
    ir_nodes: int | None
    refused: tuple[tuple[str, str, int], ...]  # (reason code, op type, nodes), file order

    def refused_text(self) -> str:
        """"code: Op, Op (n); code: Op" in order of first appearance, "" when imported."""
        by_code: dict[str, list[str]] = {}
        for code, op, n in self.refused:
            by_code.setdefault(code, []).append(f"{op} ({n})" if n > 1 else op)
        return "; ".join(f"`{code}`: {', '.join(ops)}" for code, ops in by_code.items())

    def cells(self) -> tuple[str, ...]:
        """The table's outcome columns: network, outcome, ONNX nodes, IR nodes, refused."""
        return (f"`{self.network}`", "imported" if self.imported else "refused",
                str(self.onnx_nodes), "" if self.ir_nodes is None else str(self.ir_nodes),
                self.refused_text())


def networks(corpus: Path = CORPUS) -> list[str]:
    return sorted(str(p.relative_to(corpus)) for p in corpus.rglob("*.onnx"))


def outcome(corpus: Path, network: str) -> Outcome:
    report = ncet.diagnose_onnx(corpus / network)
    counts = Counter((r.code, r.spelling) for r in report.errors)
    refused = tuple((code, op, n) for (code, op), n in counts.items())
    nodes = sum(1 for r in report.rows if r.location.rsplit(" ", 2)[-2] == "node")
    ir_nodes = None if report.graph is None else sum(
        1 for n in report.graph.nodes if n.op_type not in ("Input", "Output"))
    return Outcome(network, report.ok, nodes, ir_nodes, refused)


def outcomes(corpus: Path = CORPUS) -> list[Outcome]:
    """Every corpus network's outcome, in path order."""
    return [outcome(corpus, n) for n in networks(corpus)]


def certified(path: Path) -> bool:
    """check_onnx of the import against the file, one sample per scale."""
    ir = ncet.from_onnx(path)
    return ncet.check_onnx(ir, path, samples_per_scale=1).ok


HEADER = ("| network | outcome | ONNX nodes | IR nodes | refused: reason code: op types "
          "(nodes) | from_onnx ms | session ms | ratio | onnx2torch ms |\n"
          "|---|---|---:|---:|---|---:|---:|---:|---:|")


def markdown(rows: list[dict]) -> str:
    lines = [HEADER]
    for row in rows:
        o = Outcome(**{k: row[k] for k in Outcome.__dataclass_fields__})
        cells = list(o.cells())
        if o.imported and row.get("certified") is not None:
            cells[1] = "imported, certified" if row["certified"] else "imported, NOT certified"
        if o.imported and row.get("ncet_s") is not None:
            peer = row["onnx2torch_failure"] or f"{row['onnx2torch_s'] * 1e3:.1f}"
            cells += [f"{row['ncet_s'] * 1e3:.1f}", f"{row['ort_s'] * 1e3:.1f}",
                      f"{row['ncet_over_ort']:.2f}", peer]
        else:
            cells += ["", "", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="certify each import")
    parser.add_argument("--no-times", action="store_true", help="leave the timings out")
    parser.add_argument("--markdown", action="store_true", help="print the docs table")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as benchmarks/onnx_import.py times
    try:
        onnx2torch = None if args.no_times else load_onnx2torch()
        rows = []
        for found in outcomes(args.corpus):
            row = asdict(found)
            if found.imported:
                if not args.no_times:
                    row.update(network_row(args.corpus, found.network, args.rounds,
                                           onnx2torch, False))
                if args.check:
                    row["certified"] = certified(args.corpus / found.network)
            rows.append(row)
            print(f"{found.network}: {'imported' if found.imported else 'refused'} "
                  f"{found.refused_text()}", file=sys.stderr, flush=True)
    finally:
        torch.set_num_threads(threads)
    imported = [r for r in rows if r["imported"]]
    ratios = [r["ncet_over_ort"] for r in imported if r.get("ncet_over_ort")]
    m = machine()
    summary = (f"{len(imported)} of {len(rows)} imported"
               + (f", {sum(bool(r.get('certified')) for r in imported)} certified"
                  if args.check else "")
               + (f"; from_onnx / session creation: median {statistics.median(ratios):.2f}, "
                  f"max {max(ratios):.2f}" if ratios else "")
               + f" ({m['date']}, {m['cpu']}, nproc {m['nproc']}, onnxruntime "
                 f"{m['onnxruntime']}, onnx2torch {m['onnx2torch']})")
    if args.markdown:
        print(markdown(rows))
    print(summary)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1,
                                        default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
