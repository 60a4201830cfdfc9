"""Benchmark the workbench's ExactnessPanel on deep models (not a test).

Builds `benchmarks.scale.build("mlp", N)` for each size, checks it cheaply
(`ncet.check_exactness(model, ir, samples_per_scale=2)`), then prints medians of repeats:
ExactnessPanel construction, each figure function, `nodes_html`, `exactness_html` (the
static form), choosing another node, turning a page of the per-node table, and the size in
characters of the HTML the panel holds (every HTML widget's value).

Usage: python benchmarks/exactness_panel.py [--sizes 300,3000,20000] [--repeats 3]
Times are measured on this (possibly shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from ncet.widgets import static

import ncet
from ncet import render, widgets

if __package__:
    from .mapping_table import median_time
    from .scale import build
else:  # run as a script: put the repository root on sys.path for `benchmarks.*`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.mapping_table import median_time
    from benchmarks.scale import build


def held_html(panel) -> int:
    """Characters of HTML (and option text) the panel's widgets hold."""
    import ipywidgets as W

    total, stack = 0, [panel]
    while stack:
        widget = stack.pop()
        if isinstance(widget, W.HTML):
            total += len(widget.value)
        options = getattr(widget, "options", None)
        if options:
            total += sum(len(str(o)) for o in options)
        stack.extend(getattr(widget, "children", ()))
    return total


def measure(nodes: int, repeats: int) -> dict:
    model, shape = build("mlp", nodes)
    ir = ncet.convert(model, shape)
    start = time.perf_counter()
    report = ncet.check_exactness(model, ir, samples_per_scale=2)
    check = time.perf_counter() - start
    names = [e.name for e in report.entries]
    others = iter(names[i % len(names)] for i in range(1, 10 * (repeats + 2), 7))
    panel = widgets.ExactnessPanel(report)

    def choose():
        panel.node.value = next(others)

    row = {"fx_nodes": len(ir.nodes), "entries": len(names), "check_s": check,
           "panel_s": median_time(lambda: widgets.ExactnessPanel(report), repeats),
           "exactness_figure_s": median_time(
               lambda: static.figure_html(render.exactness_figure(report), "e", len(names)),
               repeats),
           "output_error_figure_s": median_time(
               lambda: static.figure_html(render.output_error_figure(report), "o"), repeats),
           "scatter_figure_s": median_time(
               lambda: static.figure_html(render.scatter_figure(report, names[-1]), "s"),
               repeats),
           "nodes_html_s": median_time(lambda: static.nodes_html(report), repeats),
           "exactness_html_s": median_time(lambda: widgets.exactness_html(report), repeats),
           "choose_node_s": median_time(choose, repeats)}
    pager = getattr(panel, "page", None)
    if pager is not None:
        pages = iter(range(2, repeats + 4))
        row["page_s"] = median_time(lambda: setattr(pager, "value",
                                                    min(next(pages), pager.max)), repeats)
    row["panel_html_chars"] = held_html(panel)
    row["static_html_chars"] = len(widgets.exactness_html(report))
    row["nodes_html_chars"] = len(static.nodes_html(report))
    return row


def print_table(rows: list[dict]) -> None:
    keys = [k for k in rows[0] if k != "fx_nodes"]
    print(f"{'':24}" + "".join(f"{r['fx_nodes']:>14}" for r in rows))
    for key in keys:
        cells = []
        for r in rows:
            value = r.get(key)
            if value is None:
                cells.append(f"{'-':>14}")
            elif key.endswith("_s"):
                cells.append(f"{value * 1000:>12.1f}ms")
            else:
                cells.append(f"{value:>14,}")
        print(f"{key:24}" + "".join(cells))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,3000", help="FX node counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"measuring {size} nodes ...", file=sys.stderr, flush=True)
        rows.append(measure(size, args.repeats))
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
