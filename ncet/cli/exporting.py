"""ONNX export for the command line: the options checked before converting, then (with
--simplify) the graph simplified and its certificate read, then the file exported (to a
path, or in memory for the report), linted and checked, gathered as the renderers'
`ExportFacts`."""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from collections import Counter
from pathlib import Path

import ncet

from ..exactness.check import DEFAULT_SCALES
from ..exactness.report import ExactnessReport
from ..format.atomic import atomic_writer
from ..ir import GraphIR
from ..render.export_section import ExportFacts
from .phrasing import cli_phrased
from .progress import ProgressBar

MAX_SAMPLES = 1_000_000
"""The most --samples per scale (parser.py refuses more): more would not fit in memory for
any but the smallest model."""

DEFAULT_PROFILE = "canonical"
"""The profile when --profile is not given (ncet.to_onnx's default)."""

EXPORT_OPTIONS = ("profile", "batch", "opset", "lint", "check")
"""The options that shape an export (`--profile`, ...): `ncet report` takes them with --export."""


class SimplificationRefused(Exception):
    """--simplify: the simplification's certificate does not hold, so nothing is written.
    The message is one line (the verdict says which pass and node); `report` is the
    `SimplificationReport`."""

    def __init__(self, report, path: str | None):
        self.report = report
        where = f" to {path}" if path is not None else ""
        super().__init__(f"the simplification is not certified, so nothing is written{where} "
                         f"({report.verdict()}); export without --simplify")


class ExportOptionError(Exception):
    """An export option names no profile, tool or opset there is, or onnx is not installed;
    the message says what to type. Reported as a usage error."""


def check_export_options(args: argparse.Namespace) -> None:
    """Refuse a profile or lint tool that does not exist before anything is converted.

    Raises:
        ExportOptionError: onnx is missing, --profile or --lint names nothing there is, or
            --check cannot split its samples into --batch's batches (`fitting_samples`).
    """
    try:
        from ..onnx import PROFILES
    except ImportError as error:
        raise ExportOptionError("exporting to ONNX needs onnx, which is not installed: "
                                "pip install 'ncet[onnx]'") from error
    profile = args.profile or DEFAULT_PROFILE
    if profile not in PROFILES:
        raise ExportOptionError(f"--profile {profile!r} is not an export profile: choose one "
                                f"of {', '.join(PROFILES)} (docs/export.md)")
    if args.check:
        fitting_samples(args.samples, args.batch)  # refused before anything is written
    if args.lint:
        tools = lint_tools()
        for tool in args.lint:
            if tool not in tools:
                several = (" (repeat --lint for several tools: --lint eran --lint marabou)"
                           if "," in tool else "")
                raise ExportOptionError(f"--lint {tool!r} is not a tool NCET lints for: "
                                        f"choose one of {', '.join(tools)}{several}")


def lint_tools() -> tuple[str, ...]:
    """The tool ids `--lint` takes (`ncet.onnx.lint.LINT_TOOLS`)."""
    from ..onnx.lint import LINT_TOOLS

    return tuple(LINT_TOOLS)


def _opset(args: argparse.Namespace, profile: str) -> int:
    """--opset, or the profile's default (canonical 21, verifier 18)."""
    from ..onnx import DEFAULT_OPSET, PROFILES

    if args.opset is not None:
        return args.opset
    return PROFILES[profile].default_opset if profile in PROFILES else DEFAULT_OPSET


def asked_export(args: argparse.Namespace) -> ExportFacts:
    """What the options ask for, with nothing exported (the model does not convert)."""
    profile = args.profile or DEFAULT_PROFILE
    return ExportFacts(profile, args.batch, _opset(args, profile))


def simplified(args: argparse.Namespace, ir: GraphIR, path: str | None = None):
    """`(ncet.simplify(ir)'s graph, its report)` with --simplify, `(ir, None)` without.

    Raises:
        ExportOptionError: to_onnx would refuse the arguments (checked before simplifying).
        SimplificationRefused: The simplification's certificate does not hold (`path` is
            where nothing will be written, for the message).
    """
    if not getattr(args, "simplify", False):
        return ir, None
    _check_export_arguments(args, ir)  # before simplifying, which takes a while
    graph, report = ncet.simplify(ir)
    if not report.ok:
        raise SimplificationRefused(report, path)
    return graph, report


def _check_export_arguments(args: argparse.Namespace, ir: GraphIR) -> None:
    """What to_onnx refuses of --profile, --batch and --opset, refused as export_facts
    refuses it (the same message)."""
    from ..onnx.model import _check_arguments

    profile = args.profile or DEFAULT_PROFILE
    try:
        _check_arguments(ir, profile, args.batch, _opset(args, profile))
    except ValueError as error:
        raise ExportOptionError(f"{cli_phrased(str(error))} (--profile, --batch, --opset)") \
            from error


def export_facts(args: argparse.Namespace, ir: GraphIR, path: str | None = None,
                 simplification=None) -> ExportFacts:
    """Export `ir` as the options say (to `path`, atomically, or in memory), then lint and
    check the model when asked. With `simplification` (the certified `SimplificationReport`
    that made `ir`), the file is what `to_onnx(original, simplify=True)` writes: the
    verdict in its `metadata_props`, and --check certifies it against `ir`.

    Returns:
        The facts; a refusal (`ncet.onnx.ExportError`) is their `error`, nothing written.

    Raises:
        ExportOptionError: to_onnx refuses the arguments (a batch or opset the profile does
            not take), or `path` cannot be written.
    """
    from ..onnx import ExportError

    profile = args.profile or DEFAULT_PROFILE
    opset = _opset(args, profile)
    asked = {"profile": profile, "batch": args.batch, "opset": opset}
    try:
        if simplification is None:
            model = ncet.to_onnx(ir, path, **asked)
        else:
            model = _export_simplified(ir, path, simplification, asked)
    except ExportError as error:
        return ExportFacts(**asked, error=cli_phrased(str(error)), path=path)
    except ValueError as error:  # an argument to_onnx does not take: the user's to change
        raise ExportOptionError(f"{cli_phrased(str(error))} (--profile, --batch, --opset)") \
            from error
    except OSError as error:
        raise ExportOptionError(f"cannot write {path!r}: {error.strerror or error}. Give a "
                                "writable path, e.g. -o model.onnx") from error
    data = Path(path).read_bytes() if path is not None else model.SerializeToString()
    lint = tuple((tool, _lint(model, tool)) for tool in dict.fromkeys(args.lint))
    check = _check(args, ir, model) if args.check else None
    return ExportFacts(
        **asked, path=path, nodes=len(model.graph.node),
        op_types=tuple(Counter(n.op_type for n in model.graph.node).most_common()),
        batch_axis=_batch_axis(model),
        metadata=tuple((p.key, p.value) for p in model.metadata_props),
        size=len(data), sha256=hashlib.sha256(data).hexdigest(), lint=lint, check=check)


def _export_simplified(ir: GraphIR, path: str | None, report, asked: dict):
    """The simplified graph `ir` exported with `report`'s verdict in the metadata, as
    `ncet.passes.export.export_simplified` writes it (the same bytes)."""
    from ..passes.export import METADATA_KEY, summary

    model = ncet.to_onnx(ir, None, **asked)
    model.metadata_props.add(key=METADATA_KEY, value=summary(report))
    if path is not None:
        with atomic_writer(path) as f:
            f.write(model.SerializeToString())
    return model


def simplification_text(report) -> str:
    """--simplify's report for the terminal: the node counts, the changes per pass in a
    short table (changes, nodes removed and added, constants computed), one line per
    refusal, and the certified verdict with its bound."""
    lines = [f"simplify: {report.nodes_before} operator nodes -> {report.nodes_after}"]
    rows: dict[str, list[int]] = {}
    for change in report.applied:
        row = rows.setdefault(change.pass_name, [0, 0, 0, 0])
        for i, n in enumerate((1, len(change.removed), len(change.added),
                               len(change.constants))):
            row[i] += n
    if rows:
        header = ("pass", "changes", "nodes removed", "nodes added", "constants computed")
        table = [header] + [(name, *map(str, row)) for name, row in rows.items()]
        widths = [max(len(line[i]) for line in table) for i in range(len(header))]
        lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(line, widths))).rstrip()
                  for line in table]
    else:
        lines[0] += " (no change)"
    lines += [f"refused: {c.pass_name} at {', '.join(c.removed)}: {c.note}"
              for c in report.refusals]
    lines += [f"note: {n}" for n in report.notes]
    lines.append(report.verdict())
    return "\n".join(lines)


def simplification_record(report) -> dict | None:
    """--simplify's report in a --json document (`SimplificationReport.to_dict`); None
    without --simplify."""
    return None if report is None else report.to_dict()


def _lint(model, tool: str):
    from ..onnx.lint import lint_onnx

    return lint_onnx(model, tool)


def _check(args: argparse.Namespace, ir: GraphIR, model) -> ExactnessReport:
    per_scale = fitting_samples(args.samples, _batch_axis(model))
    if per_scale != args.samples:
        print(f"ncet: --samples {args.samples} rounded up to {per_scale}, so that the "
              f"check's {len(DEFAULT_SCALES)} x {per_scale} samples split into the file's "
              f"batches of {_batch_axis(model)}", file=sys.stderr)
    samples = per_scale * len(DEFAULT_SCALES)
    progress = False if args.quiet else ProgressBar(
        f"checking {len(model.graph.node)} ONNX nodes in onnxruntime on {samples} samples")
    return ncet.check_onnx(ir, model, samples_per_scale=per_scale, seed=args.seed,
                           progress=progress)


ROUND_UP_AT_MOST = 4
"""--check rounds --samples up to fit a fixed batch by at most this factor; beyond it, the
user is asked to pass the count (a large batch means a long check)."""


def fitting_samples(per_scale: int, batch) -> int:
    """The fewest samples per scale, `per_scale` or more, whose total over the check's scales
    splits into whole batches of a file's fixed `batch` (an int; anything else: no batch).

    Raises:
        ExportOptionError: That count is more than `ROUND_UP_AT_MOST` times `per_scale` (the
            message says which --samples to pass), or more than `MAX_SAMPLES`.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        return per_scale
    step = batch // math.gcd(batch, len(DEFAULT_SCALES))
    fitting = -(-per_scale // step) * step
    if fitting > MAX_SAMPLES:
        raise ExportOptionError(
            f"--check on a file with a fixed batch of {batch} needs a multiple of {step} "
            f"samples per scale ({len(DEFAULT_SCALES)} scales), more than the {MAX_SAMPLES:,} "
            "--samples may be: give a smaller --batch, e.g. --batch 1")
    if fitting > ROUND_UP_AT_MOST * per_scale:
        raise ExportOptionError(
            f"--check on a file with a fixed batch of {batch} needs a multiple of {step} "
            f"samples per scale ({len(DEFAULT_SCALES)} scales split into whole batches): give "
            f"--samples {fitting}, or a smaller --batch, e.g. --batch 1")
    return fitting


def _batch_axis(model) -> int | str | None:
    """The first graph input's batch dimension: its size, or its symbolic name."""
    if not model.graph.input:
        return None
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if not dims:
        return None
    return dims[0].dim_value if dims[0].HasField("dim_value") else dims[0].dim_param
