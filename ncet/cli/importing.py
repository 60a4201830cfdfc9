"""`ncet import FILE.onnx`: an ONNX file read into GraphIR (`ncet.diagnose_onnx`), its
per-node mapping and batch axis printed, then certified against onnxruntime running the
original file (`ncet.check_onnx`)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import ncet

from ..exactness.check import DEFAULT_SCALES
from ..exactness.report import ExactnessReport
from ..frontend.report import STATUSES, ConversionReport, Row
from ..render.export_section import ExportFacts
from .commands import UsageError, check_export, export_to, print_export, simplify_for_export
from .exporting import (
    EXPORT_OPTIONS,
    SimplificationRefused,
    simplification_record,
    simplification_text,
)
from .progress import ProgressBar
from .records import document, dumps, exactness_record, export_fields
from .terminal import name_text, shown_exactness

OK, FAILED = 0, 1
"""Exit statuses, as the other commands have them; argparse and UsageError give 2."""

DESCRIPTION = (
    "Read an ONNX file into GraphIR (ncet.from_onnx) and print what NCET makes of every "
    "graph input and ONNX node: its name, op type and index, the canonical op_type it maps "
    "to, its status and per-sample shape, and how the batch axis was read. Every node "
    "outside the boundary is listed at once, with its reason code and hint. Then, unless "
    "--no-check, certify the GraphIR against onnxruntime running the original file, node "
    "by node, within the certified floating-point bound (ncet.check_onnx). Nothing in the "
    "file is executed before the check, and the check runs only the file as onnxruntime "
    "loads it. With --export, the GraphIR is written back as ONNX, linted and checked as "
    "`ncet export` does it. Exit status 0 when the file imports and is certified (or "
    "imports, with --no-check) and the export, if asked for, passes every lint and check; "
    "1 when a node is refused, a certificate fails (--simplify's too: nothing is then "
    "exported), a lint tool has findings, or the file "
    "is not a readable ONNX model (one line on stderr); 2 for usage errors (no such file, "
    "an unknown profile or tool, onnx not installed).")

_WHERE = re.compile(r" (?P<kind>input|node|nodes) (?P<index>[\d, ]+)$| (?P<output>outputs)$")
"""The end of an ONNX row's `location` ("<file> node 3", "<file> input 0", "<file>
outputs"): what kind of entry of the file the row is, and its index there."""


def add_arguments(command: argparse.ArgumentParser) -> None:
    """The positional FILE and the options of `ncet import` (besides --samples, --seed, -q
    and --json, which it shares)."""
    command.add_argument("file", metavar="FILE", help="an ONNX model, e.g. net.onnx")
    command.add_argument("--no-check", action="store_true", help=(
        "print the mapping only: do not certify the GraphIR against onnxruntime"))
    command.add_argument("-o", "--output", default=None, metavar="FILE", help=(
        "save the GraphIR to FILE (ncet.save, e.g. net.ncet) when the file imports; it is "
        "written even when the certificate then fails, as the exit status says"))
    command.add_argument("--export", default=None, metavar="FILE", help=(
        "write the GraphIR as ONNX to FILE too, as `ncet export` writes it (e.g. "
        "--export net.verifier.onnx --profile verifier --lint eran --check: the file "
        "rewritten in the spelling verification tools read, linted, and certified against "
        "the GraphIR); the export options below apply only with --export"))


def run_import(args: argparse.Namespace) -> int:
    """`ncet import FILE`: the mapping table, every refused node, the certificate; with
    --export, the GraphIR written as ONNX, linted and checked as `ncet export` does it."""
    _check_options(args)
    try:
        report, model, mode = read_onnx(args.file)
    except UsageError:
        raise
    except Exception as error:  # noqa: BLE001  a hostile file: one line, never a traceback
        record = error_record(error, args.file)
        if args.json:
            print(dumps(document("import", path=args.file, ok=False, error=record,
                                 onnx=None, batch_mode=None, conversion=None, exactness=None,
                                 output=None, simplification=None,
                                 **export_fields(None))))
        print(f"ncet import: error: {name_text(record['message'])}", file=sys.stderr)
        return FAILED
    exactness, check_error = None, None
    if report.ok and not args.no_check:
        exactness, check_error = _certify(args, report)
    written = _save(args, report) if report.ok else None
    facts, simplification, refusal = None, None, None
    if report.ok and args.export:
        try:
            graph, simplification = simplify_for_export(args, report.graph, args.export)
            facts = export_to(args, graph, args.export, simplification)
        except SimplificationRefused as error:  # one line, nothing written
            refusal, simplification = error, error.report
    imported_ok = report.ok and check_error is None
    ok = imported_ok and (args.no_check or (exactness is not None and exactness.ok)) and \
        (facts is None or facts.ok) and refusal is None
    if args.json:
        print(dumps(document(
            "import", path=args.file, ok=ok, error=check_error, onnx=_file_record(model),
            batch_mode=mode, conversion=import_record(report),
            exactness=None if exactness is None else exactness_record(exactness),
            output=written, simplification=simplification_record(simplification),
            **export_fields(facts))))
        if refusal is not None:
            print(f"ncet import: error: {refusal}", file=sys.stderr)
        return OK if ok else FAILED
    _print_mapping(args.file, report)
    if not report.ok:
        print("not certified: the file does not import to GraphIR")
    elif args.no_check:
        print("not certified: --no-check (run without it to check against onnxruntime)")
    elif check_error is not None:
        print(f"\nnot certified: {name_text(check_error['message'])}")
    else:
        assert exactness is not None
        shown = shown_exactness(exactness)
        print(f"\nonnxruntime running {name_text(args.file)} against the GraphIR:")
        print(shown.table())
        print()
        print(shown.summary())
    if args.output is not None:
        print(f"wrote {args.output}: GraphIR with {written['nodes']} nodes and "
              f"{written['constants']} constants ({written['bytes']:,} bytes)"
              if written else f"nothing written to {args.output}")
    if args.export is not None:
        _print_export(args.export, facts, simplification, refusal)
    return OK if ok else FAILED


def _check_options(args: argparse.Namespace) -> None:
    """Export options only with --export, and naming a profile and tools there are."""
    given = [f"--{o}" for o in (*EXPORT_OPTIONS, "simplify")
             if getattr(args, o) not in (None, False, [])]
    if given and args.export is None:
        raise UsageError(f"{', '.join(given)} shape(s) the ONNX file --export writes: add "
                         "--export FILE, e.g. ncet import net.onnx --export out.onnx "
                         "--profile verifier")
    if args.export is not None:
        check_export(args)


def _print_export(path: str, facts: ExportFacts | None, simplification=None,
                  refusal: SimplificationRefused | None = None) -> None:
    if refusal is not None:
        print(f"nothing written to {path}")
        print(f"ncet import: error: {refusal}", file=sys.stderr)
        return
    if simplification is not None:
        print()
        print(simplification_text(simplification))
    if facts is None:
        print(f"nothing written to {path}")
    elif not facts.exported:
        print(f"\nONNX export refused: {facts.error}\nnothing written to {path}")
    else:
        print()
        print_export(facts)


def is_onnx(text: str) -> bool:
    """A command-line argument names an ONNX file (by its suffix, .onnx in any case)."""
    return text.lower().endswith(".onnx")


def read_onnx(path: str) -> tuple[ConversionReport, Any, str]:
    """The report of `path`'s import (`diagnose_onnx`), the model as read and how its batch
    axis was read ("symbolic", "fixed" or "none").

    Raises:
        UsageError: No such file, a folder, unreadable, or onnx is not installed.
        ONNXFileError: (a ValueError) The file is not an ONNX model NCET reads; or anything
            else the import raises on a hostile file.
    """
    try:
        from ..onnx.importer import import_model
    except ImportError as error:
        raise UsageError("importing ONNX needs onnx, which is not installed: "
                         "pip install 'ncet[onnx]'") from error
    if not Path(path).exists():
        raise UsageError(f"no file {path!r}. Give the path of an ONNX model, e.g. "
                         "ncet import net.onnx")
    if Path(path).is_dir():
        raise UsageError(f"{path!r} is a folder. Give the path of an ONNX model, e.g. "
                         "ncet import net.onnx")
    try:
        return import_model(path, strict=False)
    except OSError as error:
        raise UsageError(f"cannot read {path!r}: {error.strerror or error}") from error


def _certify(args: argparse.Namespace, report: ConversionReport
             ) -> tuple[ExactnessReport | None, dict | None]:
    """check_onnx on the original file, with a progress bar unless -q: the report, or the
    error that stopped it (onnxruntime cannot load or run the file) as a record."""
    graph = report.graph
    assert graph is not None
    samples = args.samples * len(DEFAULT_SCALES)
    progress = False if args.quiet else ProgressBar(
        f"checking {len(graph.nodes)} nodes in onnxruntime on {samples} samples")
    try:
        return ncet.check_onnx(graph, args.file, samples_per_scale=args.samples,
                               seed=args.seed, progress=progress), None
    except ImportError as error:
        raise UsageError("certifying the import needs onnxruntime, which is not "
                         "installed: pip install 'ncet[onnx]', or give --no-check") from error
    except OSError as error:  # the file went away between the import and the check
        raise UsageError(f"cannot read {args.file!r}: {error.strerror or error}") from error
    except ValueError as error:  # ONNXFileError: onnxruntime cannot load or run it
        return None, error_record(error, args.file, "check_onnx", documented=True)
    except Exception as error:  # noqa: BLE001  a hostile file: one line, never a traceback
        return None, error_record(error, args.file, "check_onnx")


def _save(args: argparse.Namespace, report: ConversionReport) -> dict | None:
    if args.output is None:
        return None
    graph = report.graph
    try:
        ncet.save(graph, args.output)
    except OSError as error:
        raise UsageError(f"cannot write {args.output!r}: {error.strerror or error}. "
                               "Give a writable path, e.g. -o net.ncet") from error
    return {"path": args.output, "bytes": Path(args.output).stat().st_size,
            "nodes": len(graph.nodes), "constants": len(graph.constants)}


def error_record(error: Exception, path: str, stage: str = "NCET's ONNX import",
                 documented: bool = False) -> dict[str, str | None]:
    """An error as the JSON document holds it: its stable reason code (`ONNXFileError`'s
    `.code`) and message. A `documented` error without a code (a ValueError check_onnx
    raises) is said as it is; anything else raised on a hostile file is said with its type
    and named as `stage`'s failure, code None."""
    code = getattr(error, "code", None)
    if isinstance(code, str) or documented:
        return {"code": code if isinstance(code, str) else None, "message": str(error)}
    first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
    return {"code": None, "message": f"{path!r}: {stage} failed on this file "
                                     f"({type(error).__name__}: {first}); please report it"}


# -- what is printed -----------------------------------------------------------------------


def locate(row: Row) -> tuple[str, int | None]:
    """What entry of the file a row is ("input", "node" or "output") and its index there
    (None for the graph outputs, or a row made of several nodes)."""
    match = _WHERE.search(row.location)
    if match is None:
        return "node", None
    if match["output"]:
        return "output", None
    index = match["index"]
    return ("input" if match["kind"] == "input" else "node",
            int(index) if index.isdigit() else None)


def _index_text(row: Row) -> str:
    kind, index = locate(row)
    shown = "" if index is None else str(index)
    return shown if kind == "node" else f"{kind} {shown}".rstrip()


def mapping_table(report: ConversionReport) -> str:
    """The per-node table: node name, ONNX op type, index in the file, op_type, status
    (with the reason code) and per-sample shape; names from the file on one line each."""
    header = ("node", "onnx op", "index", "op_type", "status", "shape")
    lines = [header] + [(
        name_text(r.fx_name), name_text(r.spelling), _index_text(r), r.op_type or "-",
        r.status if r.code is None else f"{r.status}:{r.code}",
        "" if r.shape is None else str(list(r.shape))) for r in report.rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
                     for line in lines)


def _verdict(report: ConversionReport) -> str:
    """The summary line without the batch-axis notes (printed on their own)."""
    counts = {s: sum(1 for r in report.rows if r.status == s) for s in STATUSES}
    parts = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    outcome = "imports" if report.ok else f"refused: {len(report.errors)} problem(s)"
    return f"{len(report.rows)} {report.unit} ({parts}); {outcome}"


def _print_mapping(path: str, report: ConversionReport) -> None:
    print(mapping_table(report))
    print()
    for note in report.notes:
        print(f"batch axis: {note}")
    if report.errors:
        print(f"\n{len(report.errors)} problem(s):")
        for row in report.errors:
            print(f"- {name_text(row.message)}")
    graph = report.graph
    made = "" if graph is None else \
        f" to {len(graph.nodes)} GraphIR nodes and {len(graph.constants)} constants"
    print(f"\n{name_text(path)}: {_verdict(report)}{made}")


# -- --json ----------------------------------------------------------------------------------


def row_record(row: Row) -> dict[str, Any]:
    """One graph input or ONNX node of the import."""
    kind, index = locate(row)
    return {"node": row.fx_name, "onnx_op": row.spelling, "kind": kind, "index": index,
            "op_type": row.op_type, "status": row.status, "code": row.code,
            "message": row.message, "hint": row.hint,
            "shape": None if row.shape is None else list(row.shape),
            "location": row.location}


def import_record(report: ConversionReport) -> dict[str, Any]:
    """The import: verdict, the batch-axis notes, counts per status, every row and every
    problem, and the GraphIR's size."""
    graph = report.graph
    return {
        "ok": report.ok,
        "summary": report.summary(),
        "notes": list(report.notes),
        "counts": {s: sum(1 for r in report.rows if r.status == s) for s in STATUSES},
        "rows": [row_record(r) for r in report.rows],
        "problems": [row_record(r) for r in report.errors],
        "graph": None if graph is None else {"nodes": len(graph.nodes),
                                             "constants": len(graph.constants)},
    }


def _file_record(model) -> dict[str, Any]:
    """What the file declares: IR version, opsets, producer, node and tensor counts."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    return {"ir_version": model.ir_version,
            "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
            "producer": " ".join(p for p in (model.producer_name, model.producer_version)
                                 if p),
            "nodes": len(graph.node),
            "inputs": [i.name for i in graph.input if i.name not in initializers],
            "outputs": [o.name for o in graph.output],
            "initializers": len(graph.initializer)}
