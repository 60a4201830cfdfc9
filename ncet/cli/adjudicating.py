"""`ncet adjudicate NET PROPERTY WITNESS`: a verifier's counterexample judged
(`ncet.adjudicate`, docs/adjudication.md): inside the region exactly, a violation in exact
arithmetic, in float32 as deployed, accepted by VNN-COMP's rule, the claimed output
reproduced, and the verdict."""

from __future__ import annotations

import argparse
import collections
import csv
import sys
from pathlib import Path

import ncet

from .commands import UsageError
from .progress import ProgressBar
from .records import document, dumps
from .terminal import name_text

OK, FAILED = 0, 1
"""Exit statuses: 0 a counterexample (exact and float32), 1 any other verdict or an input
refused; argparse and UsageError give 2."""

DESCRIPTION = (
    "Judge a verifier's counterexample: NET is an ONNX file (imported with ncet.from_onnx and "
    "run in onnxruntime) or a GraphIR file (.ncet); PROPERTY a VNN-LIB file; WITNESS a "
    "VNN-COMP .counterexample file ((X_0 v) ... (Y_0 v) ..., optionally after `sat`). Prints "
    "each answer on its own line: X inside the input region exactly; the output in exact "
    "arithmetic against the unsafe set, with its margin; the same in float32 as deployed; "
    "VNN-COMP's rule (relative 1e-3 on the claimed output, 1e-4 on the box and the "
    "property); whether the claimed output reproduces; and the verdict (docs/adjudication.md). "
    "Exit status 0 when the verdict is `counterexample`, 1 for any other verdict or when an "
    "input is refused (one line on stderr), 2 for usage errors (a missing file). With "
    "--many PATH, many at once: PATH a CSV of net,property,witness rows (paths relative to "
    "the CSV's folder; a header row and # comments allowed) or a VNN-COMP corpus folder "
    "(witnesses/<benchmark>/<year>__<tool>__<onnx>_<vnnlib>.counterexample matched through "
    "<benchmark>/instances_included.csv); one line per witness, the counts per verdict, a "
    "progress bar unless -q; exit status 0 when every witness was adjudicated, 1 when any "
    "was refused.")


def add_arguments(command: argparse.ArgumentParser) -> None:
    """The positional NET, PROPERTY and WITNESS."""
    command.add_argument("net", metavar="NET", nargs="?", help="an ONNX model (net.onnx) or "
                         "a GraphIR file (net.ncet)")
    command.add_argument("property", metavar="PROPERTY", nargs="?",
                         help="a VNN-LIB file (prop.vnnlib)")
    command.add_argument("witness", metavar="WITNESS", nargs="?",
                         help="a .counterexample file")
    command.add_argument("--many", metavar="PATH", default=None, help=(
        "adjudicate many: a CSV of net,property,witness rows, or a VNN-COMP corpus folder"))
    command.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def corpus_rows(corpus: Path) -> list[tuple[Path, Path, Path]]:
    """(onnx, vnnlib, witness) for every witness of a VNN-COMP corpus folder: each
    `witnesses/<benchmark>/<year>__<tool>__<onnx>_<vnnlib>.counterexample` matched to the
    one row of `<benchmark>/instances_included.csv` whose file stems join to its name.

    Raises:
        UsageError: a witness that matches no row, or several.
    """
    rows = []
    for path in sorted((corpus / "witnesses").glob("*/*.counterexample")):
        benchmark = corpus / path.parent.name
        rest = path.name[:-len(".counterexample")].split("__", 2)[-1]
        found = set()
        listing = benchmark / "instances_included.csv"
        lines = listing.read_text(encoding="utf-8").splitlines() if listing.is_file() else []
        for line in csv.reader(x for x in lines if not x.startswith("#")):
            if len(line) >= 2:
                stems = [Path(f).name.removesuffix(".gz").rsplit(".", 1)[0] for f in line[:2]]
                if "_".join(stems) == rest:
                    found.add((benchmark / line[0], benchmark / line[1], path))
        if len(found) != 1:
            raise UsageError(f"{path}: {len(found)} rows of {listing} match its name")
        rows.append(found.pop())
    return rows


def _csv_rows(path: Path) -> list[tuple[Path, Path, Path]]:
    rows = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(csv.reader(x for x in lines if x.strip() and
                                        not x.startswith("#"))):
        if i == 0 and [c.strip().lower() for c in line] == ["net", "property", "witness"]:
            continue
        if len(line) != 3:
            raise UsageError(f"{path}: a row of {len(line)} fields; each row is "
                             "net,property,witness")
        rows.append(tuple(path.parent / c.strip() for c in line))
    return rows


def run_many(args: argparse.Namespace) -> int:
    """`ncet adjudicate --many PATH`."""
    where = Path(args.many)
    if not where.exists():
        raise UsageError(f"--many {args.many!r}: no such file or folder")
    rows = corpus_rows(where) if where.is_dir() else _csv_rows(where)
    progress = None if args.quiet or args.json else ProgressBar("adjudicating")
    results, counts, refused = [], collections.Counter(), 0
    for done, (net, prop, witness) in enumerate(rows):
        try:
            answer = ncet.adjudicate(ncet.load(net) if net.suffix == ".ncet" else net, prop,
                                     witness)
            record = {"net": str(net), "property": str(prop), "witness": str(witness),
                      "error": None, "adjudication": answer.to_dict()}
            counts[answer.verdict] += 1
            line = f"{answer.verdict:22s} {witness.name}"
        except (ncet.NCETError, ValueError, OSError) as error:
            refused += 1
            code = getattr(error, "code", None)
            first = str(error).strip().splitlines()[0] if str(error).strip() else \
                type(error).__name__
            record = {"net": str(net), "property": str(prop), "witness": str(witness),
                      "error": {"code": code if isinstance(code, str) else None,
                                "message": str(error)}, "adjudication": None}
            counts["refused"] += 1
            line = f"{'refused':22s} {witness.name}: {first}"
        results.append(record)
        if not args.json:
            print(name_text(line))
        if progress is not None:
            progress(done + 1, len(rows))
    if args.json:
        print(dumps(document("adjudicate", ok=refused == 0, counts=dict(counts),
                             results=results)))
    else:
        print(", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())) or
              "no witnesses")
    return OK if refused == 0 else FAILED


def run_adjudicate(args: argparse.Namespace) -> int:
    """`ncet adjudicate NET PROPERTY WITNESS`, or `--many PATH`."""
    given = [getattr(args, name) for name in ("net", "property", "witness")]
    if args.many is not None:
        if any(given):
            raise UsageError("give either NET PROPERTY WITNESS or --many PATH, not both")
        return run_many(args)
    if not all(given):
        raise UsageError("give NET PROPERTY WITNESS (or --many PATH)")
    for name in ("net", "property", "witness"):
        if not Path(getattr(args, name)).is_file():
            raise UsageError(f"{name.upper()} {getattr(args, name)!r}: no such file")
    try:
        net = ncet.load(args.net) if args.net.endswith(".ncet") else args.net
        answer = ncet.adjudicate(net, args.property, args.witness)
    except (ncet.NCETError, ValueError, OSError) as error:
        code = getattr(error, "code", None)
        record = {"code": code if isinstance(code, str) else None, "message": str(error)}
        if args.json:
            print(dumps(document("adjudicate", ok=False, error=record, adjudication=None)))
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"ncet adjudicate: error: {name_text(first)}", file=sys.stderr)
        return FAILED
    ok = answer.verdict == "counterexample"
    if args.json:
        print(dumps(document("adjudicate", ok=ok, error=None, adjudication=answer.to_dict())))
    else:
        print("\n".join(name_text(line) for line in str(answer).splitlines()))
    return OK if ok else FAILED
