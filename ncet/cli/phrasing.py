"""Messages and hints phrased for the command line.

NCET's hints are written for the Python API ("call model.eval() before converting", "e.g.
convert(model, (3, 32, 32))", "or convert with rewrite=True"). Where a hint names a call or
an argument the command has a flag for, the command shows the flag instead (`--eval`,
`--input-shape 3,32,32`, `--rewrite`, `--stop-at`, `--cut-trailing`, `--batch N`, `--profile
canonical`): `cli_phrased` rewrites one text by `CLI_PHRASES`, `cli_report` every reason,
hint and cut node's message of a ConversionReport, and this module's `diagnose` is
`ncet.diagnose` with its report phrased so. tests/test_cli_phrasing.py holds every hint of
ncet/frontend and ncet/onnx that names an API call or argument to a phrasing here.
"""

from __future__ import annotations

import dataclasses
import re

from .. import diagnose as api_diagnose
from ..errors import ConversionError
from ..frontend.report import ConversionReport, Row

INPUT_SHAPE = "--input-shape"
"""The flag that gives a TARGET's per-sample input shapes (`ncet diff` has one per side)."""


def _shape_flag(match: re.Match, flag: str) -> str:
    dims = [d.strip() for d in match.group("dims").split(",") if d.strip()]
    return f"{flag} {','.join(dims)}"


CLI_PHRASES: tuple[tuple[str, str], ...] = (
    # model.eval(): the --eval flag.
    (r"\bcall model\.eval\(\) before converting", "add --eval, which puts the model in eval "
                                                  "mode before it is converted"),
    (r"\bcall model\.eval\(\)", "add --eval"),
    (r"\bwith model\.eval\(\)", "and add --eval"),
    # The input shapes: one --input-shape per forward() argument.
    (r"\bper-sample input shapes given to (?:convert|diagnose)\(\)",
     "per-sample shapes given with {flag}"),
    (r"\bgive one per-sample shape per forward\(\) argument",
     "give one {flag} per forward() argument"),
    (r"\bgive per-sample shapes without the batch axis", "give each {flag} without the batch "
                                                         "axis"),
    (r"\b(?:ncet\.)?(?:convert|diagnose)\(model, \((?P<dims>[\d, ]+)\)\)", _shape_flag),
    # rewrite=True / rewrite=False: the --rewrite flag.
    (r"\bor convert with rewrite=True\b", "or add --rewrite"),
    (r"\(rewrite=False\)", "(without --rewrite)"),
    (r"\brewrite=True\b", "--rewrite"),
    # stop_at= / cut_trailing=True: the --stop-at and --cut-trailing flags.
    (r"\bgive stop_at an FX node name as diagnose's rows show it \(fx_name\)",
     "give --stop-at a node name as the mapping table's node column shows it"),
    (r"\bstop_at=", "--stop-at "),
    (r"\bcut_trailing=True\b", "--cut-trailing"),
    # What the TARGET's own code must do (the command has no flag for it).
    (r"\braise the limit before converting\b", "raise the limit in the TARGET's module, "
                                               "before the model is built"),
    (r"\bmove the model to the CPU first \(model\.cpu\(\)\)",
     "move the model to the CPU in the TARGET's factory (return model.cpu())"),
    # ONNX export: --batch, --profile.
    (r"\bgive batch=None or batch=(?P<n>\d+)", r"give no --batch or --batch \g<n>"),
    (r"\bbatch=(?P<n>\d+|N)\b", r"--batch \g<n>"),
    (r"\bprofile='(?P<p>\w+)'", r"--profile \g<p>"),
)
"""(regular expression of the API's wording, the command line's wording), applied in order,
the specific ones first; `{flag}` is the input-shape flag of the side at hand. A replacement
may be a function of the match (and the flag), as for `convert(model, (3, 32, 32))` ->
`--input-shape 3,32,32`."""

SPELLINGS = {"stop_at": "--stop-at"}
"""An error's spelling that names an argument of the API (the error is about the argument,
not a node): the flag that gave it."""

_COMPILED = tuple((re.compile(pattern), replacement) for pattern, replacement in CLI_PHRASES)


def cli_phrased(text: str, flag: str = INPUT_SHAPE) -> str:
    """`text` with each call or argument of the Python API that the command has a flag for
    written as that flag (`CLI_PHRASES`); other text unchanged.

    Example:
        >>> cli_phrased("call model.eval() before converting")
        'add --eval, which puts the model in eval mode before it is converted'
    """
    for pattern, replacement in _COMPILED:
        if callable(replacement):
            text = pattern.sub(lambda m, r=replacement: r(m, flag), text)
        else:
            text = pattern.sub(replacement.replace("{flag}", flag), text)
    return text


def cli_error(error: ConversionError, flag: str = INPUT_SHAPE) -> ConversionError:
    """The same error (class, code, node, source) with its reason and hint phrased for the
    command line."""
    return type(error)(error.code, cli_phrased(error.reason, flag), node=error.node,
                       fx_op=error.fx_op, spelling=SPELLINGS.get(error.spelling,
                                                                 error.spelling),
                       hint=cli_phrased(error.hint, flag), location=error.location,
                       source_text=error.source_text)


def cli_report(report: ConversionReport, flag: str = INPUT_SHAPE) -> ConversionReport:
    """`report` with every problem's message and hint phrased for the command line."""
    return dataclasses.replace(report, rows=tuple(_row(r, flag) for r in report.rows))


def _row(row: Row, flag: str) -> Row:
    if row.error is None:  # a cut node's message says why it was cut
        return dataclasses.replace(row, message=cli_phrased(row.message, flag)) \
            if row.message else row
    error = cli_error(row.error, flag)
    source = dataclasses.replace(row.source, target=error.spelling) \
        if row.source.target == row.error.spelling else row.source
    return dataclasses.replace(row, source=source, message=str(error), hint=error.hint,
                               error=error)


def diagnose(model, *input_shapes, flag: str = INPUT_SHAPE, **options) -> ConversionReport:
    """`ncet.diagnose`, its messages and hints phrased for the command line (`cli_report`);
    `flag` is the option that gave the input shapes."""
    return cli_report(api_diagnose(model, *input_shapes, **options), flag)
