"""Benchmark the Workbench's graph on deep MLPs (not a test): opening the Workbench, its
graph tab, and selecting a node there (shared with the mapping table).

Prints, per size: diagnose; the Workbench's construction (diagnose included); the graph tab's
first showing (module calls, layout, SVG), split into grouping and drawing; selecting a node
drawn already; selecting a node hidden in a closed group (its groups open and the graph is
laid out again); selecting from the mapping table; finding the last layer by name
(`GraphView.find`: found, its groups opened, drawn again) and searching for a source line
that every layer matches (the search alone); the boxes drawn and the SVG's size; then every
group open ("open all": every node drawn), its layout and SVG. Wall times of single runs on
this shared machine, no assertions.

Usage: python benchmarks/graph_view.py [--sizes 1000,20000]
"""

from __future__ import annotations

import argparse
import time

import ncet
from ncet import widgets
from ncet.render import Groups, to_svg

if __package__:
    from .scale import build
else:
    from scale import build


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def measure(nodes: int) -> dict:
    model, shape = build("mlp", nodes)
    _, diagnose = timed(lambda: ncet.diagnose(model, shape))
    bench, open_s = timed(lambda: widgets.Workbench(model, shape))
    ir = bench.report.graph
    groups, group_s = timed(lambda: Groups(ir))
    expanded = groups.default_expanded()
    svg, layout_s = timed(lambda: to_svg(groups, expanded))
    _, tab_s = timed(lambda: setattr(bench, "selected_index", 3))
    graph = bench.graph
    shown = graph.groups.visible(graph.expanded)
    drawn = next(n for n in shown.nodes if n != "x")
    _, select_drawn = timed(lambda: graph.select(drawn))
    hidden = next(n.name for n in reversed(ir.nodes)
                  if any(g not in graph.expanded for g in graph.groups.ancestors(n.name)))
    _, select_hidden = timed(lambda: graph.select(hidden))
    other = ir.nodes[len(ir.nodes) // 2].name
    _, from_mapping = timed(lambda: bench.mapping.select(other))
    assert graph.selected == other == bench.mapping.selected
    last = ir.nodes[-2]  # the last layer: hidden in a closed block
    found, find_s = timed(lambda: graph.find(last.name))
    assert found == graph.selected == last.name, (found, last.name)
    line = last.source.location  # the loop's line: every layer matches
    matches, search_s = timed(lambda: graph.search(line))
    assert last.name in matches, line
    everything, all_s = timed(lambda: to_svg(groups, set(groups.groups)))
    return {"ir_nodes": len(ir.nodes), "diagnose_s": diagnose, "workbench_open_s": open_s,
            "graph_tab_s": tab_s, "grouping_s": group_s, "layout_s": layout_s,
            "select_drawn_s": select_drawn, "select_hidden_s": select_hidden,
            "select_from_mapping_s": from_mapping, "find_by_name_s": find_s,
            "search_source_line_s": search_s, "search_matches": len(matches),
            "boxes_drawn": len(shown.nodes) + len(shown.boxes), "svg_kb": len(svg) / 1000,
            "open_all_layout_svg_s": all_s, "open_all_svg_kb": len(everything) / 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,20000")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        results = measure(size)
        print(f"--- deep MLP, {results['ir_nodes']} IR nodes")
        for key, value in results.items():
            print(f"  {key:24s} {value:10.3f}" if isinstance(value, float) else
                  f"  {key:24s} {value:10d}")


if __name__ == "__main__":
    main()
