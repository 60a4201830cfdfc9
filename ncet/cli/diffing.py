"""`ncet diff A B`: compare two GraphIRs (saved files or models) node by node, like `diff`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import load
from ..differences import compare
from ..errors import GraphIRFormatError
from ..ir import GraphIR
from .commands import UsageError
from .importing import error_record, is_onnx, read_onnx
from .phrasing import INPUT_SHAPE, diagnose
from .records import document, dumps
from .targets import TargetError, load_target
from .terminal import name_text, shown_graphs

SAME, DIFFERENT, TROUBLE = 0, 1, 2
"""Exit statuses, as `diff` has them: 2 when A or B cannot be compared at all."""

DESCRIPTION = (
    "Compare two GraphIRs node by node: nodes added, removed and changed (matched by name, "
    "then by position among the nodes of one op_type), each changed node's attributes and "
    "constants (shape, dtype, max |B - A|, bit-identical or not), the inputs and outputs. "
    "A and B are GraphIR files (.ncet, as written by `ncet convert`), ONNX files (.onnx, "
    "read as `ncet import` reads them) or TARGETs, converted as `ncet convert` converts "
    "them (--eval and --rewrite apply to each TARGET). "
    "--input-shape gives the per-sample input shapes of both TARGETs; when A and B take "
    "different inputs, give A's with --input-shape-a and B's with --input-shape-b (each "
    "replaces --input-shape for its side). Exit status 0 when they are the same, 1 when "
    "they differ, 2 when A or B cannot be compared (a usage error, a missing or malformed "
    "file, a model or ONNX file that does not convert).")


class _Trouble(Exception):
    """A side cannot be compared; the message says why (exit status 2)."""


def add_arguments(command: argparse.ArgumentParser) -> None:
    """The positional A and B and the target options of `ncet diff`."""
    for side in ("a", "b"):
        command.add_argument(side, metavar=side.upper(), help=(
            "a GraphIR file (e.g. before.ncet), an ONNX file (e.g. net.onnx) or a TARGET "
            "(package.module:factory, path/to/file.py:factory, or a bundled example name)"))
    from .parser import input_shape  # the parser imports this module

    command.add_argument("--input-shape", action="append", type=input_shape, default=[],
                         metavar="SHAPE", dest="input_shapes", help=(
                             "per-sample shape of one forward() argument of each TARGET, "
                             "without the batch axis, e.g. 3,32,32; repeat for several "
                             "arguments"))
    for side in ("a", "b"):
        command.add_argument(f"--input-shape-{side}", action="append", type=input_shape,
                             default=[], metavar="SHAPE", dest=f"input_shapes_{side}", help=(
                                 f"per-sample shape of one forward() argument of "
                                 f"{side.upper()} alone, e.g. 3,32,32 (repeat for several "
                                 f"arguments); replaces --input-shape for {side.upper()}"))
    command.add_argument("--eval", action="store_true",
                         help="call model.eval() on each TARGET before converting")
    command.add_argument("--rewrite", action="store_true",
                         help="apply the opt-in rewrite rules to each TARGET first")


def is_file(text: str) -> bool:
    """A side names a GraphIR file (not a TARGET): it ends in .ncet, or it is an existing
    file whose name has no colon and is not a bundled example."""
    from ..examples import EXAMPLES

    return text.endswith(".ncet") or (":" not in text and text not in EXAMPLES
                                      and Path(text).is_file())


def resolve(text: str, args: argparse.Namespace, side: str = "a") -> GraphIR:
    """The GraphIR one side ("a" or "b") names: loaded from its file, or converted from its
    TARGET with that side's input shapes (`--input-shape-a`, else `--input-shape`).

    Raises:
        _Trouble: The file is missing or malformed, the TARGET cannot be loaded, or the
            model does not convert.
    """
    own = getattr(args, f"input_shapes_{side}", [])
    flag = f"{INPUT_SHAPE}-{side}"  # the hints name the side's own flag
    if is_onnx(text):
        if own:
            raise _Trouble(f"{flag} is for a TARGET, but {side.upper()} is the ONNX file "
                           f"{text!r}, whose inputs declare their shapes: leave {flag} out")
        return _imported(text)
    if is_file(text):
        if own:
            raise _Trouble(f"{flag} is for a TARGET, but {side.upper()} is the GraphIR file "
                           f"{text!r}, which holds its own shapes: leave {flag} out")
        try:
            return load(text)
        except FileNotFoundError:
            raise _Trouble(f"no file {text!r}. Give a GraphIR file written by `ncet convert "
                           "TARGET -o model.ncet`, or a TARGET") from None
        except GraphIRFormatError as error:
            raise _Trouble(f"{text}: {error}") from None
        except OSError as error:
            raise _Trouble(f"cannot read {text!r}: {error.strerror or error}") from None
    try:
        target = load_target(text, tuple(own or args.input_shapes), args.eval)
    except TargetError as error:
        raise _Trouble(str(error)) from None
    report = diagnose(target.model, *target.input_shapes, rewrite=args.rewrite, flag=flag)
    if not report.ok:
        problems = "".join(f"\n- {row.message}" for row in report.errors)
        raise _Trouble(f"{text}: {report.summary()}; nothing to compare{problems}")
    return report.graph


def _imported(path: str) -> GraphIR:
    """The GraphIR of an ONNX file, as `ncet import` reads it.

    Raises:
        _Trouble: The file is missing or unreadable, or a node is refused (each listed).
    """
    try:
        report, _, _ = read_onnx(path)
    except UsageError as error:
        raise _Trouble(str(error)) from None
    except Exception as error:  # noqa: BLE001  a hostile file: one line, never a traceback
        raise _Trouble(error_record(error, path)["message"]) from None
    if not report.ok:
        problems = "".join(f"\n- {name_text(row.message)}" for row in report.errors)
        raise _Trouble(f"{path}: {report.summary()}; nothing to compare{problems}")
    return report.graph


def run_diff(args: argparse.Namespace) -> int:
    """`ncet diff A B`: print the comparison; 0 same, 1 different, 2 trouble."""
    try:
        a, b = resolve(args.a, args, "a"), resolve(args.b, args, "b")
    except _Trouble as error:
        if args.json:
            print(dumps(document("diff", a=args.a, b=args.b, ok=False, error=str(error),
                                 same=None, comparison=None)))
        print(f"ncet diff: error: {error}", file=sys.stderr)
        return TROUBLE
    comparison = compare(a, b)
    if args.json:
        print(dumps(document("diff", a=args.a, b=args.b, ok=True, error=None,
                             same=comparison.same, comparison=comparison.to_dict())))
    else:
        shown = shown_graphs(a, b)  # a name's line breaks escaped
        summary = (comparison if shown == (a, b) else compare(*shown)).summary()
        print(f"--- {name_text(args.a)}\n+++ {name_text(args.b)}")
        print(summary)
    return SAME if comparison.same else DIFFERENT
