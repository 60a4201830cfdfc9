"""The subcommands of `ncet`: each takes the parsed arguments and returns the exit status."""

from __future__ import annotations

import argparse
import copy
import importlib.util
import shlex
import sys
from pathlib import Path

import torch

from .. import check_exactness, evaluate, load, save
from ..errors import GraphIRFormatError
from ..exactness.check import DEFAULT_SCALES
from ..exactness.report import ExactnessReport
from ..examples import EXAMPLES, load_example
from ..format.atomic import atomic_writer
from ..frontend.report import ConversionReport
from ..render import render_report, verdict
from ..render.export_section import ExportFacts, batch_text
from .exporting import (
    EXPORT_OPTIONS,
    ExportOptionError,
    SimplificationRefused,
    asked_export,
    check_export_options,
    export_facts,
    simplification_record,
    simplification_text,
    simplified,
)
from .phrasing import diagnose  # ncet.diagnose, its hints naming the command's flags
from .progress import ProgressBar
from .records import (
    conversion_record,
    document,
    dumps,
    exactness_record,
    export_fields,
    graph_record,
)
from .targets import Target, TargetError, load_target
from .terminal import shown_exactness, shown_graphs

OK, FAILED = 0, 1
"""Exit statuses; argparse and UsageError give 2."""

class UsageError(Exception):
    """The arguments parse but do not name something usable; reported as exit status 2."""


def run_demo(args: argparse.Namespace) -> int:
    """`ncet demo [EXAMPLE]`: convert a bundled model, print its table, evaluate the IR."""
    model, shapes = load_example(args.example)
    report = diagnose(model, *shapes)
    worst = _evaluate_against_eager(model, report, shapes) if report.ok else None
    if args.json:
        _print_json("demo", target=args.example, input_shapes=[list(s) for s in shapes],
                    eval=False, ok=report.ok, conversion=conversion_record(report),
                    evaluate=None if worst is None else {"samples": 8, "dtype": "float64",
                                                         "max_abs_difference": worst})
        return _status(report.ok)
    print(f"NCET demo: {args.example} - {EXAMPLES[args.example].description}")
    print(f"per-sample input shape(s): {', '.join(str(list(s)) for s in shapes)}\n")
    print(report.table())
    print()
    print(report.summary())
    for row in report.errors:
        print(f"- {row.message}")
    if worst is not None:
        print(f"GraphIR: {len(report.graph.nodes)} nodes, {len(report.graph.constants)} "
              f"constants; max |evaluate(ir) - model(x)| in float64 on 8 inputs: {worst:.3g}")
    return _status(report.ok)


def run_inspect(args: argparse.Namespace) -> int:
    """`ncet inspect TARGET`: the mapping table, every problem, a one-line verdict."""
    target = _load(args)
    report = diagnose(target.model, *target.input_shapes, **_options(args))
    if args.json:
        _print_json("inspect", **_about(target, args), ok=report.ok,
                    conversion=conversion_record(report))
    else:
        _print_conversion(target, report)
    return _status(report.ok)


def run_check(args: argparse.Namespace) -> int:
    """`ncet check TARGET`: convert, then check_exactness with a progress bar."""
    target = _load(args)
    report = diagnose(target.model, *target.input_shapes, **_options(args))
    exactness = _check(args, target, report) if report.ok else None
    ok = exactness is not None and exactness.ok
    if args.json:
        _print_json("check", **_about(target, args), ok=ok,
                    conversion=conversion_record(report),
                    exactness=None if exactness is None else exactness_record(exactness))
    elif exactness is None:
        _print_conversion(target, report)
        print("not checked for exactness: the model does not convert")
    else:
        print(f"{target.text}: {report.summary()}\n")
        print(exactness.table())
        print()
        print(exactness.summary())
    return _status(ok)


def run_convert(args: argparse.Namespace) -> int:
    """`ncet convert TARGET -o FILE`: save the GraphIR, or list every problem."""
    target = _load(args)
    report = diagnose(target.model, *target.input_shapes, **_options(args))
    written = None
    if report.ok:
        try:
            save(report.graph, args.output)
        except OSError as error:
            raise UsageError(f"cannot write {args.output!r}: {error.strerror or error}. "
                             "Give a writable path, e.g. -o model.ncet") from error
        written = {"path": args.output, "bytes": Path(args.output).stat().st_size,
                   "nodes": len(report.graph.nodes), "constants": len(report.graph.constants)}
    if args.json:
        _print_json("convert", **_about(target, args), ok=report.ok,
                    conversion=conversion_record(report), output=written)
    elif written is None:
        _print_problems(target, report)
        print(f"nothing written to {args.output}")
    else:
        print(f"{target.text}: {report.summary()}")
        print(f"wrote {args.output}: GraphIR with {written['nodes']} nodes and "
              f"{written['constants']} constants ({written['bytes']:,} bytes)")
    return _status(report.ok)


def run_export(args: argparse.Namespace) -> int:
    """`ncet export TARGET -o FILE`: convert, write the ONNX file, then lint and check it when
    asked; a refusal writes nothing, lint findings and a failed check keep the file."""
    check_export(args)
    target = _load(args)
    report = diagnose(target.model, *target.input_shapes, **_options(args))
    try:
        graph, simplification = simplify_for_export(args, report.graph, args.output) \
            if report.ok else (None, None)
    except SimplificationRefused as refusal:  # one line, nothing written
        if args.json:
            _print_json("export", **_about(target, args), ok=False,
                        conversion=conversion_record(report),
                        simplification=simplification_record(refusal.report),
                        **export_fields(None))
        print(f"ncet export: error: {refusal}", file=sys.stderr)
        return FAILED
    facts = export_to(args, graph, args.output, simplification) if report.ok else None
    ok = facts is not None and facts.ok
    if args.json:
        _print_json("export", **_about(target, args), ok=ok,
                    conversion=conversion_record(report),
                    simplification=simplification_record(simplification),
                    **export_fields(facts))
    elif facts is None or not facts.exported:
        if facts is None:
            _print_problems(target, report)
        else:
            print(f"1 problem(s):\n- {facts.error}\n")
            print(f"{target.text}: {report.summary()}; export refused")
        print(f"nothing written to {args.output}")
    else:
        _print_export(target, report, facts, simplification)
    return _status(ok)


def _print_export(target: Target, report: ConversionReport, facts: ExportFacts,
                  simplification=None) -> None:
    print(f"{target.text}: {report.summary()}")
    if simplification is not None:
        print(simplification_text(simplification))
    print_export(facts)


def print_export(facts: ExportFacts) -> None:
    """An export written: the file, its nodes per op type, each tool's lint listing and the
    check in onnxruntime when asked."""
    print(f"wrote {facts.path}: ONNX opset {facts.opset}, {facts.profile} profile, "
          f"{batch_text(facts.batch_axis)}, {facts.nodes} nodes ({facts.size:,} bytes, sha256 "
          f"{facts.sha256})")
    print("nodes: " + ", ".join(f"{op} {n}" for op, n in facts.op_types))
    for _, lint in facts.lint:
        print()
        print(str(lint).rstrip("\n"))
    if facts.check is not None:
        check = shown_exactness(facts.check)  # an imported GraphIR's names are the file's
        print("\nonnxruntime against the GraphIR:")
        print(check.table())
        print()
        print(check.summary())


def run_show(args: argparse.Namespace) -> int:
    """`ncet show FILE`: print a saved GraphIR; a malformed file is exit status 1."""
    try:
        ir = load(args.file, max_check_bytes=args.max_check_bytes,
                  max_check_work=args.max_check_work)
    except GraphIRFormatError as error:
        if args.json:
            _print_json("show", path=args.file, ok=False, error=str(error), graph=None)
        limit = " (here: --max-check-bytes N or --max-check-work N)" \
            if "meaning check's" in str(error) else ""
        if args.file.lower().endswith(".onnx"):
            limit += f"; for an ONNX file, type `ncet import {args.file}`"
        print(f"ncet show: error: {error}{limit}", file=sys.stderr)
        return FAILED
    except FileNotFoundError as error:
        raise UsageError(f"no file {args.file!r}. Give the path of a GraphIR file, as "
                         "written by `ncet convert TARGET -o model.ncet`") from error
    except OSError as error:
        raise UsageError(f"cannot read {args.file!r}: {error.strerror or error}") from error
    if args.json:
        _print_json("show", path=args.file, ok=True, error=None, graph=graph_record(ir))
    else:
        print(repr(shown_graphs(ir)[0]))  # a name's line breaks escaped
    return OK


def run_report(args: argparse.Namespace) -> int:
    """`ncet report TARGET -o FILE`: one self-contained HTML report, even for a rejected
    model; with --export, an ONNX export section too."""
    given = [f"--{o}" for o in EXPORT_OPTIONS if getattr(args, o) not in (None, False, [])]
    if given and not args.export:
        raise UsageError(f"{', '.join(given)} shape(s) the report's ONNX export section: add "
                         "--export, e.g. ncet report TARGET -o report.html --export --lint eran")
    if args.export:
        check_export(args)
    target = _load(args)
    report = diagnose(target.model, *target.input_shapes, **_options(args))
    exactness = _check(args, target, report) if report.ok else None
    export = None
    if args.export:
        export = export_to(args, report.graph) if report.ok else asked_export(args)
    if importlib.util.find_spec("matplotlib") is None:
        print("ncet report: matplotlib is not installed, so the report has no plots "
              "(pip install 'ncet[report]')", file=sys.stderr)
    command = shlex.join(["ncet", *getattr(args, "argv", ())])
    page = render_report(report, exactness, title=target.text,
                         input_shapes=target.input_shapes, command=command, export=export)
    try:
        with atomic_writer(args.output) as f:  # the previous report survives a failed write
            f.write(page.encode("utf-8"))
    except OSError as error:
        raise UsageError(f"cannot write {args.output!r}: {error.strerror or error}. "
                         "Give a writable path, e.g. -o report.html") from error
    ok = exactness is not None and exactness.ok and (export is None or export.ok)
    if args.json:
        _print_json("report", **_about(target, args), ok=ok,
                    conversion=conversion_record(report),
                    exactness=None if exactness is None else exactness_record(exactness),
                    **export_fields(export if report.ok else None),
                    output={"path": args.output, "bytes": len(page.encode())})
    else:
        print(f"{target.text}: {verdict(report, exactness, export)[1]}")
        print(f"wrote {args.output}")
    return _status(ok)


def _load(args: argparse.Namespace) -> Target:
    try:
        return load_target(args.target, tuple(args.input_shapes), args.eval)
    except TargetError as error:
        raise UsageError(str(error)) from error


def check_export(args: argparse.Namespace) -> None:
    """Refuse export options that name nothing there is (`check_export_options`), as a
    usage error."""
    try:
        check_export_options(args)
    except ExportOptionError as error:
        raise UsageError(str(error)) from error


def simplify_for_export(args: argparse.Namespace, ir, path: str | None = None):
    """`simplified` (the graph to export and its simplification report, with --simplify);
    an option to_onnx refuses is a usage error, found before simplifying."""
    try:
        return simplified(args, ir, path)
    except ExportOptionError as error:
        raise UsageError(str(error)) from error


def export_to(args: argparse.Namespace, ir, path: str | None = None,
              simplification=None) -> ExportFacts:
    """`export_facts` (to `path`, or in memory; `ir` simplified by `simplification`, when
    given); an option to_onnx refuses, or a path that cannot be written, is a usage error."""
    try:
        return export_facts(args, ir, path, simplification)
    except ExportOptionError as error:
        raise UsageError(str(error)) from error


def _check(args: argparse.Namespace, target: Target, report: ConversionReport
           ) -> ExactnessReport:
    samples = args.samples * len(DEFAULT_SCALES)
    progress = False if args.quiet else ProgressBar(
        f"checking {len(report.graph.nodes)} nodes on {samples} samples")
    return check_exactness(target.model, report.graph, samples_per_scale=args.samples,
                           seed=args.seed, progress=progress)


def _evaluate_against_eager(model, report: ConversionReport, shapes) -> float:
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn((8, *s), generator=generator, dtype=torch.float64) for s in shapes]
    with torch.no_grad():
        eager = copy.deepcopy(model).double()(*inputs)
    reference = evaluate(report.graph, *inputs)
    eager = eager if isinstance(eager, tuple) else (eager,)
    reference = reference if isinstance(reference, tuple) else (reference,)
    return max((r - e).abs().max().item() for r, e in zip(reference, eager))


def _about(target: Target, args: argparse.Namespace) -> dict:
    return {"target": target.text, "input_shapes": [list(s) for s in target.input_shapes],
            "eval": args.eval, "rewrite": args.rewrite}


def _print_conversion(target: Target, report: ConversionReport) -> None:
    print(report.table())
    print()
    _print_problems(target, report)


def _print_problems(target: Target, report: ConversionReport) -> None:
    if report.errors:
        print(f"{len(report.errors)} problem(s):")
        for row in report.errors:
            print(f"- {row.message}")
        print()
    print(f"{target.text}: {report.summary()}")


def _options(args: argparse.Namespace) -> dict:
    """The conversion options of a TARGET command (rewrite, stop_at, cut_trailing)."""
    return {"rewrite": args.rewrite, "stop_at": args.stop_at,
            "cut_trailing": args.cut_trailing}


def _print_json(command: str, **fields) -> None:
    print(dumps(document(command, **fields)))


def _status(ok: bool) -> int:
    return OK if ok else FAILED
