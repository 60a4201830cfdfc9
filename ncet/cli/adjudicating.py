"""`ncet adjudicate NET PROPERTY WITNESS`: a verifier's counterexample judged
(`ncet.adjudicate`, docs/adjudication.md): inside the region exactly, a violation in exact
arithmetic, in float32 as deployed, accepted by VNN-COMP's rule, the claimed output
reproduced, and the verdict."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import ncet

from .commands import UsageError
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
    "input is refused (one line on stderr), 2 for usage errors (a missing file).")


def add_arguments(command: argparse.ArgumentParser) -> None:
    """The positional NET, PROPERTY and WITNESS."""
    command.add_argument("net", metavar="NET", help="an ONNX model (net.onnx) or a GraphIR "
                         "file (net.ncet)")
    command.add_argument("property", metavar="PROPERTY", help="a VNN-LIB file (prop.vnnlib)")
    command.add_argument("witness", metavar="WITNESS", help="a .counterexample file")


def run_adjudicate(args: argparse.Namespace) -> int:
    """`ncet adjudicate NET PROPERTY WITNESS`."""
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
