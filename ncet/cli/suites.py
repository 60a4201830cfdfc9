"""`ncet suite run INSTANCES.csv ...`: whole VNN-COMP suites on Dask (`ncet.run_suite`,
docs/suites.md): a progress bar, the rows that are not ok, and a summary."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from .commands import UsageError
from .records import document, dumps
from .terminal import name_text

OK, FAILED = 0, 1
"""Exit statuses: 0 every instance ok, 1 any other outcome; argparse and UsageError give 2."""

SHOWN = 20
"""Rows that are not ok listed as text (--json lists every row)."""

DESCRIPTION = (
    "Run whole VNN-COMP suites: for each INSTANCES.csv (rows onnx,vnnlib,timeout, paths "
    "relative to its folder), import each network once and certify the import against "
    "onnxruntime, then per instance read the property, bound the float32 margin, tighten "
    "the property and judge the counterexamples --results holds for it, on Dask: in this "
    "process by default, --workers N local worker processes, or a running cluster with "
    "--scheduler tcp://HOST:PORT. With --out FILE each finished row is appended to FILE "
    "(JSON lines, synced) and a second run computes only the rows FILE lacks. Exit status "
    "0 when every instance is ok, 1 when any is refused, not exact, an error or a timeout, "
    "2 for usage errors.")

EXAMPLES = (
    "ncet suite run vnncomp/acasxu/instances.csv --out acasxu.jsonl",
    "ncet suite run vnncomp/*/instances_included.csv --results vnncomp/witnesses --workers 2",
    "ncet suite run instances.csv --scheduler tcp://10.0.0.5:8786 --out run.jsonl --json",
)


def register(sub, json_only: argparse.ArgumentParser) -> None:
    """`ncet suite` and its one subcommand, `run`."""
    suite = sub.add_parser("suite", help="run whole VNN-COMP suites on Dask, resumable",
                           description=textwrap.fill(DESCRIPTION, 88))
    commands = suite.add_subparsers(dest="suite_command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run", parents=[json_only], help="run the instances of one or more instances.csv",
        description=textwrap.fill(DESCRIPTION, 88),
        epilog="examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.set_defaults(run=run_suite_command, parser=run)
    run.add_argument("instances", nargs="+", metavar="INSTANCES.csv",
                     help="a VNN-COMP instances.csv (onnx,vnnlib,timeout rows)")
    run.add_argument("--out", metavar="FILE", default=None,
                     help="the result table (JSON lines): rows appended as they finish, "
                     "rows already there not computed again")
    run.add_argument("--results", metavar="DIR", default=None,
                     help="VNN-COMP counterexamples: [<benchmark>/]<year>__<tool>__<onnx>_"
                     "<vnnlib>.counterexample")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="a running Dask scheduler, e.g. tcp://HOST:8786")
    where.add_argument("--workers", metavar="N", type=_positive, default=None,
                       help="N local worker processes (default: one worker in this process)")
    run.add_argument("--timeout", metavar="SECONDS", type=float, default=None,
                     help="seconds per instance (default: the CSV's timeout column)")
    run.add_argument("--splits", metavar="N", type=_positive, default=None,
                     help="pieces per box for each margin (default: ncet.suites."
                     "DEFAULT_SPLITS)")
    run.add_argument("--samples", metavar="N", type=_positive, default=8,
                     help="check_onnx samples per scale for each certificate (default 8)")
    run.add_argument("--no-check", action="store_true",
                     help="do not certify the imports against onnxruntime")
    run.add_argument("--tightened", metavar="DIR", default=None,
                     help="write each tightened property there")
    run.add_argument("--redo", metavar="OUTCOME", action="append", default=[],
                     choices=("refused", "not-exact", "error", "timeout"),
                     help="compute again the rows --out holds with this outcome (repeatable)")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def run_suite_command(args: argparse.Namespace) -> int:
    """`ncet suite run`."""
    import ncet
    from ncet.suites import DEFAULT_SPLITS, read_instances, summary

    for path in args.instances:
        if not Path(path).is_file():
            raise UsageError(f"INSTANCES {path!r}: no such file")
    if args.out is not None and Path(args.out).is_dir():
        raise UsageError(f"--out {args.out!r} is a folder: give a file, e.g. --out run.jsonl")
    if args.results is not None and not Path(args.results).is_dir():
        raise UsageError(f"--results {args.results!r}: no such folder")
    try:
        rows = [row for path in args.instances for row in read_instances(path)]
    except ValueError as error:
        raise UsageError(str(error)) from error
    try:
        table = ncet.run_suite(
            rows, client=args.scheduler, workers=args.workers, out=args.out,
            results=args.results, timeout=args.timeout, progress=not (args.quiet or args.json),
            samples=args.samples, splits=DEFAULT_SPLITS if args.splits is None else args.splits,
            check=not args.no_check, tightened=args.tightened, redo=tuple(args.redo))
    except ImportError as error:
        raise UsageError(f"{error}: install the suite extra (pip install 'ncet[suite]')"
                         ) from error
    except ValueError as error:  # an --out that is not a suite's table
        raise UsageError(str(error)) from error
    ok = bool((table["outcome"] == "ok").all())
    if args.json:
        counts = table["outcome"].value_counts().to_dict()
        print(dumps(document("suite run", ok=ok, counts=counts, out=args.out,
                             rows=table.to_dict("records"))))
        return OK if ok else FAILED
    bad = table[table["outcome"] != "ok"]
    for _, row in bad.head(SHOWN).iterrows():
        where = f"{Path(row['onnx']).name} {Path(row['vnnlib']).name}"
        first = (row["message"] or "").strip().splitlines()[:1]
        print(name_text(f"{row['outcome']:9s} {where}: {row['reason']}"
                        + (f": {first[0]}" if first else "")))
    if len(bad) > SHOWN:
        print(f"... and {len(bad) - SHOWN} more rows that are not ok"
              + (f" (all in {args.out})" if args.out else ""))
    for line in summary(table).splitlines():
        print(name_text(line))
    return OK if ok else FAILED
