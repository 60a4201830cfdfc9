"""Benchmark the workbench's mapping table on a 20,000-node model (not a test).

Prints medians of repeats: diagnose, building the MappingTable, one filter change, one page
change and one search; and each as a ratio to diagnose. The table should cost a small
fraction of diagnose, and each interaction well under 100 ms.

Usage: python benchmarks/mapping_table.py [--blocks 10000] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

import ncet
from ncet import widgets


def build(blocks: int) -> nn.Module:
    """nn.Sequential of `blocks` x (Linear(8, 8), ReLU): 2 * blocks + 2 FX nodes."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers = [m for _ in range(blocks) for m in (nn.Linear(8, 8), nn.ReLU())]
        return nn.Sequential(*layers).eval()


def median_time(fn, repeats: int) -> float:
    """Median wall time of `fn()` over `repeats` runs, after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(blocks: int, repeats: int) -> dict:
    model = build(blocks)
    start = time.perf_counter()
    report = ncet.diagnose(model, (8,))
    diagnose = time.perf_counter() - start  # once: it dominates and takes seconds
    table = widgets.MappingTable(report)
    ops = iter(["Linear", "ReLU"] * (repeats + 2))
    pages = iter(range(2, repeats + 4))
    queries = iter([f"{i}_" for i in range(1, repeats + 3)])

    def filter_change():
        table.op_type.value = next(ops)

    def page_change():
        table.page.value = next(pages)

    def search():
        table.search.value = next(queries)

    results = {
        "fx_nodes": len(report.rows),
        "diagnose_s": diagnose,
        "mapping_frame_s": median_time(lambda: widgets.mapping_frame(report), repeats),
        "table_build_s": median_time(lambda: widgets.MappingTable(report), repeats),
    }
    table.op_type.value = "all"
    results["filter_change_s"] = median_time(filter_change, repeats)
    table.op_type.value = "all"
    results["page_change_s"] = median_time(page_change, repeats)
    results["search_s"] = median_time(search, repeats)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results = measure(args.blocks, args.repeats)
    print(f"model: nn.Sequential of {args.blocks} x (Linear(8, 8), ReLU), "
          f"{results['fx_nodes']} FX nodes; medians of {args.repeats} repeats")
    diagnose = results["diagnose_s"]
    for key, label in (("diagnose_s", "diagnose (once)"), ("mapping_frame_s", "mapping_frame"),
                       ("table_build_s", "MappingTable build"),
                       ("filter_change_s", "one filter change"),
                       ("page_change_s", "one page change"), ("search_s", "one search")):
        value = results[key]
        print(f"  {label:<20} {value * 1e3:10.1f} ms   {value / diagnose:8.4f} x diagnose")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
