"""The `ncet` command: inspect, check, convert, export, show, diff and report on models from
the shell, and import ONNX files."""

from __future__ import annotations

import sys

from .commands import UsageError
from .parser import build_parser
from .terminal import safe_streams

INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the `ncet` command; returns the exit status.

    Args:
        argv: The arguments after the program name; `sys.argv[1:]` when None.

    Returns:
        0 on success, 1 when the model is rejected, its ONNX export is refused, an ONNX
        file's node is refused, a check fails, a lint tool has findings or a file is
        malformed, 130 after Ctrl-C (one line
        on stderr, no traceback); `ncet diff` returns 0 when A and B are the same, 1 when
        they differ and 2 when they cannot be compared.

    Raises:
        SystemExit: With status 2 for usage errors (argparse's convention), after printing
            the usage and what to type instead.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    with safe_streams():  # untrusted names never reach the terminal raw
        try:
            args = build_parser().parse_args(argv)
            args.argv = argv
            try:
                return args.run(args)
            except UsageError as error:
                args.parser.error(str(error))  # exits with status 2
                raise AssertionError("unreachable") from error
        except KeyboardInterrupt:
            print("ncet: interrupted", file=sys.stderr)
            return INTERRUPTED
