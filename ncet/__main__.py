"""The `ncet` command: `ncet demo` converts a bundled model and prints its mapping table."""

from __future__ import annotations

import argparse
import copy
import sys

import torch

from . import diagnose, evaluate
from .examples import EXAMPLES, load_example


def _demo(args: argparse.Namespace) -> int:
    model, shapes = load_example(args.example)
    print(f"NCET demo: {args.example} - {EXAMPLES[args.example].description}")
    print(f"per-sample input shape(s): {', '.join(str(list(s)) for s in shapes)}\n")
    report = diagnose(model, *shapes)
    print(report.table())
    print()
    print(report.summary())
    for row in report.errors:
        print(f"- {row.message}")
    if not report.ok:
        return 1
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn((8, *s), generator=generator, dtype=torch.float64) for s in shapes]
    with torch.no_grad():
        eager = copy.deepcopy(model).double()(*inputs)
    reference = evaluate(report.graph, *inputs)
    eager = eager if isinstance(eager, tuple) else (eager,)
    reference = reference if isinstance(reference, tuple) else (reference,)
    worst = max((r - e).abs().max().item() for r, e in zip(reference, eager))
    print(f"GraphIR: {len(report.graph.nodes)} nodes, {len(report.graph.constants)} constants; "
          f"max |evaluate(ir) - model(x)| in float64 on 8 inputs: {worst:.3g}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(prog="ncet", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="convert a bundled model and print its mapping table")
    demo.add_argument("example", nargs="?", default="residual_cnn", choices=sorted(EXAMPLES),
                      help="which bundled model (default: residual_cnn)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the `ncet` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
