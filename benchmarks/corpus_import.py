"""The ONNX import on the VNN-COMP corpus (issue 32; not a test): per network, what
`ncet.diagnose_onnx` makes of it (imported, or refused: which op types, which reason codes),
its ONNX and GraphIR node counts, and `ncet.from_onnx`'s time against onnxruntime's
`InferenceSession` creation for the same file (medians of --repeats, after a warm-up;
target: from_onnx <= 1x) and against `onnx2torch.convert` where that succeeds (imported
with tests/torchvision_stub when torchvision is missing; --no-onnx2torch leaves it out);
with --check, whether `ncet.check_onnx` certifies the import.

`--markdown` prints the table of docs/onnx-import.md ("The corpus"); tests/test_docs.py
holds its outcome columns to what `outcomes()` reports today.

Usage: python benchmarks/corpus_import.py [--corpus DIR] [--repeats 3] [--check]
       [--no-onnx2torch] [--markdown] [--json out.json]
Times are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import onnxruntime as ort

import ncet

CORPUS = (Path(__file__).resolve().parent.parent / ".." / "shared" / "vnncomp").resolve()
STUB = Path(__file__).resolve().parent.parent / "tests" / "torchvision_stub"


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


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def onnx2torch_convert():
    """onnx2torch.convert, or None when onnx2torch cannot be imported (it imports
    torchvision for ops NCET never meets: tests/torchvision_stub stands in when missing)."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        sys.path.insert(0, str(STUB))
    try:
        import onnx2torch
    except ImportError:
        return None
    return onnx2torch.convert


def timings(path: Path, repeats: int, convert=None) -> dict:
    """from_onnx's, onnxruntime's session creation's and (given `convert`) onnx2torch's
    median seconds for one file; onnx2torch None where it fails."""
    options = ort.SessionOptions()
    options.log_severity_level = 3

    def session():
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    found = {"from_onnx_s": _median_time(lambda: ncet.from_onnx(path), repeats),
             "session_s": _median_time(session, repeats)}
    if convert is not None:
        try:
            found["onnx2torch_s"] = _median_time(lambda: convert(str(path)), repeats)
        except Exception:  # noqa: BLE001 - onnx2torch's NotImplementedError, KeyError, ...
            found["onnx2torch_s"] = None
    return found


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
        if "from_onnx_s" in row and o.imported:
            cells += [f"{row['from_onnx_s'] * 1e3:.1f}", f"{row['session_s'] * 1e3:.1f}",
                      f"{row['from_onnx_s'] / row['session_s']:.2f}"]
            if "onnx2torch_s" in row:
                cells.append("fails" if row["onnx2torch_s"] is None
                             else f"{row['onnx2torch_s'] * 1e3:.1f}")
            else:
                cells.append("")
        else:
            cells += ["", "", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="certify each import")
    parser.add_argument("--no-onnx2torch", action="store_true",
                        help="leave onnx2torch.convert out")
    parser.add_argument("--markdown", action="store_true", help="print the docs table")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    convert = None if args.no_onnx2torch else onnx2torch_convert()
    rows = []
    for found in outcomes(args.corpus):
        row = asdict(found)
        path = args.corpus / found.network
        if found.imported:
            row.update(timings(path, args.repeats, convert))
            if args.check:
                row["certified"] = certified(path)
        rows.append(row)
        if not args.markdown:
            times = (f"from_onnx {row['from_onnx_s'] * 1e3:.1f} ms, session "
                     f"{row['session_s'] * 1e3:.1f} ms" if found.imported else "")
            print(f"{found.network}: {'imported' if found.imported else 'refused'} "
                  f"{found.refused_text()} {times}", flush=True)
    imported = [r for r in rows if r["imported"]]
    ratios = [r["from_onnx_s"] / r["session_s"] for r in imported]
    against = [r["from_onnx_s"] / r["onnx2torch_s"] for r in imported
               if r.get("onnx2torch_s")]
    summary = (f"{len(imported)} of {len(rows)} imported"
               + (f", {sum(bool(r.get('certified')) for r in imported)} certified"
                  if args.check else "")
               + (f"; from_onnx / session creation: median {statistics.median(ratios):.2f}, "
                  f"max {max(ratios):.2f}" if ratios else "")
               + (f"; onnx2torch converts {len(against)} of {len(imported)}, from_onnx / "
                  f"onnx2torch: median {statistics.median(against):.2f}" if against else "")
               + f" ({platform.processor() or platform.machine()}, "
               f"onnxruntime {ort.__version__}, Python {platform.python_version()})")
    if args.markdown:
        print(markdown(rows))
    print(summary)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
