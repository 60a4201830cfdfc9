"""The table of docs/margins.md, "Tightness and time on the corpus" (issue 34; not a test):
per VNN-COMP property on a network that imports, `ncet.float_margin`'s time against one
float64 forward pass, and its tightness against the worst deviation a search proves
(`ncet.regions.deviation.find_deviation`, PyTorch and onnxruntime): max_j eps_j over max_j
dev_j, and the median and smallest of eps_j / dev_j over the outputs with dev_j > 0. A
smallest ratio below 1 is a wrong bound: the script says so and exits with status 1.

The region is the property's (every box); where a zero-width decimal bound leaves a box
without any float32 point, its boxes rounded outward to float32 (as
tests/test_margin_soundness.py does).

Usage: python benchmarks/margin.py [--corpus DIR] [--quick] [--samples 2048] [--steps 32]
       [--only SUBSTRING ...] [--out results/margin.json]
--out writes the rows as JSON there and the markdown table beside it (.md). Times are
measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

import ncet
from ncet.regions.deviation import find_deviation

if __package__:  # imported as benchmarks.margin (the tests)
    from .onnx_import import machine
else:  # run as a script: benchmarks/ itself is on sys.path
    from onnx_import import machine

CORPUS = (Path(__file__).resolve().parent.parent / ".." / "shared" / "vnncomp").resolve()

TARGETS = {"mnist_fc": (100.0, 60.0), "acasxu": (1000.0, 60.0)}
"""Benchmark -> (median tightness at most, margin seconds at most): the issue's targets."""

OPTIONS: dict[str, dict] = dict.fromkeys((
    "cifar10_resnet/onnx/resnet_2b.onnx", "cifar10_resnet/onnx/resnet_4b.onnx",
    "cifar_biasfield/onnx/cifar_bias_field_8.onnx", "marabou-cifar10/nets/cifar10_large.onnx",
    "marabou-cifar10/nets/cifar10_medium.onnx", "marabou-cifar10/nets/cifar10_small.onnx",
    "oval21/onnx/cifar_base_kw.onnx", "oval21/onnx/cifar_deep_kw.onnx",
    "oval21/onnx/cifar_wide_kw.onnx",
    "sri_resnet_a/onnx/resnet_3b2_bn_mixup_adv_4.0_bs128_lr-1.onnx",
    "verivital/Convnet_avgpool.onnx"), {"max_rows": 0})
"""float_margin's options where its defaults need more memory than this machine has (over
6 GB, up to hundreds: the backward passes over wide convolutions): interval values and
|W|-product errors at every node. Every other network runs with the defaults."""

SKIPPED: dict[str, str] = {}
"""Networks that import but are not measured, and why."""

QUICK = {"acasxu": 3, "mnist_fc": 3}
"""--quick: this many properties of these benchmarks, the first of every other network."""


@dataclass(frozen=True)
class Row:
    """One property's measurements (seconds; ratios None where no deviation was found)."""

    network: str
    property: str
    outputs: int
    boxes: int
    region: str
    options: str
    forward_seconds: float
    margin_seconds: float
    search_seconds: float
    points: int
    max_eps: float
    max_deviation: float
    max_ratio: float | None
    median_ratio: float | None
    min_ratio: float | None

    def cells(self) -> tuple[str, ...]:
        def ratio(v):
            return "-" if v is None else f"{v:.3g}"
        return (f"`{self.network.split('/')[0]}/{Path(self.network).name}`",
                f"`{Path(self.property).name}`", str(self.outputs), str(self.boxes),
                self.options,
                f"{self.forward_seconds * 1e3:.2f}", f"{self.margin_seconds:.2f}",
                f"{self.margin_seconds / self.forward_seconds:.3g}",
                f"{self.max_eps:.3g}", f"{self.max_deviation:.3g}", ratio(self.max_ratio),
                ratio(self.median_ratio), ratio(self.min_ratio))


HEADER = ("network", "property", "outputs", "boxes", "options", "float64 forward (ms)",
          "margin (s)", "margin / forward", "max eps", "max deviation found", "max eps / max dev",
          "median eps_j / dev_j", "min eps_j / dev_j")


def region_of(prop: ncet.Property):
    """The property, or its boxes rounded outward to float32 when an inward-rounded box is
    empty (a zero-width decimal bound); and which of the two, in words."""
    inward = prop.input_boxes_as(np.float32, "inward")
    if all((lo <= hi).all() for lo, hi in inward):
        return prop, "property"
    return [tuple(b) for b in prop.input_boxes_as(np.float32, "outward")], "float32 outward"


def instances(corpus: Path) -> list[tuple[str, str]]:
    """Every (network, property) pair of the benchmarks' instances_included.csv."""
    pairs = []
    for listing in sorted(corpus.glob("*/instances_included.csv")):
        for line in listing.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                onnx, vnnlib = line.split(",")[:2]
                bench = listing.parent.relative_to(corpus)
                pairs.append((str(bench / onnx.strip()), str(bench / vnnlib.strip())))
    return pairs


def quick(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """QUICK properties of acasxu and mnist_fc (each a new network and a new property
    file), the first property of every other network."""
    chosen, networks, props, per_bench = [], set(), set(), {}
    for network, prop in pairs:
        bench = network.split("/")[0]
        if network in networks or (bench in QUICK and (
                per_bench.get(bench, 0) >= QUICK[bench] or Path(prop).name in props)):
            continue
        chosen.append((network, prop))
        networks.add(network)
        props.add(Path(prop).name)
        per_bench[bench] = per_bench.get(bench, 0) + 1
    return chosen


def _forward_seconds(ir, region, rounds: int = 5) -> float:
    """Median time of one float64 forward pass at the region's first lower corner."""
    node = ir.inputs[0]
    lower = region.input_boxes_as(np.float64)[0][0] if isinstance(region, ncet.Property) \
        else np.asarray(region[0][0], dtype=np.float64)
    x = torch.from_numpy(lower).reshape(1, *node.shape)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        ncet.evaluate(ir, x)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(corpus: Path, network: str, prop_path: str, samples: int, steps: int) -> Row:
    ir = ncet.from_onnx(corpus / network)
    prop = ncet.read_vnnlib(corpus / prop_path)
    region, how = region_of(prop)
    forward = _forward_seconds(ir, region)
    start = time.perf_counter()
    options = OPTIONS.get(network, {})
    margin = ncet.float_margin(ir, region, **options)
    margin_seconds = time.perf_counter() - start
    found = find_deviation(ir, region, onnx_file=corpus / network, samples=samples,
                           ascent_steps=steps)
    eps, dev = margin.eps.numpy(), found.deviation.numpy()
    ratios = [e / d for e, d in zip(eps, dev) if d > 0]
    return Row(network, prop_path, len(eps), len(prop.cases), how,
               ", ".join(f"{k}={v}" for k, v in options.items()), forward, margin_seconds,
               found.seconds, found.evaluated, float(eps.max()), float(dev.max()),
               float(eps.max() / dev.max()) if dev.max() > 0 else None,
               statistics.median(ratios) if ratios else None,
               min(ratios) if ratios else None)


def markdown(rows: list[Row], info: dict) -> str:
    lines = [f"Measured {info['date'][:10]} on {info['cpu']} ({info['nproc']} CPUs, "
             f"{info['torch_threads']} torch threads; torch {info['torch']}, onnxruntime "
             f"{info['onnxruntime']}, git {info['git_head']}); search: {info['search']}.",
             "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    lines += ["", "| benchmark | properties | median of median eps_j / dev_j | target | "
              "slowest margin (s) | target (s) |", "|---|---|---|---|---|---|"]
    for bench in sorted({r.network.split("/")[0] for r in rows}):
        mine = [r for r in rows if r.network.split("/")[0] == bench]
        medians = [r.median_ratio for r in mine if r.median_ratio is not None]
        tight, secs = TARGETS.get(bench, (None, None))
        lines.append(f"| {bench} | {len(mine)} | "
                     f"{statistics.median(medians) if medians else float('nan'):.3g} | "
                     f"{f'<= {tight:g}' if tight else ''} | "
                     f"{max(r.margin_seconds for r in mine):.2f} | "
                     f"{f'<= {secs:g}' if secs else ''} |")
    return "\n".join(lines) + "\n"


def _write(out: Path, rows: list[Row], info: dict, planned: int) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(
        {"machine": info, "planned": planned, "rows": [asdict(r) for r in rows]}, indent=1,
        default=str))
    out.with_suffix(".md").write_text(markdown(rows, info))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--quick", action="store_true", help="a subset (QUICK)")
    parser.add_argument("--samples", type=int, default=2048, help="search points per property")
    parser.add_argument("--steps", type=int, default=32, help="gradient-ascent steps")
    parser.add_argument("--only", nargs="*", default=None,
                        help="only networks whose path holds one of these")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the rows as JSON here and the table beside it (.md)")
    args = parser.parse_args(argv)
    pairs = [(n, p) for n, p in instances(args.corpus) if n not in SKIPPED
             and (not args.only or any(s in n for s in args.only))]
    pairs = [(n, p) for n, p in (quick(pairs) if args.quick else pairs)
             if ncet.diagnose_onnx(args.corpus / n).ok]
    info = {**machine(),
            "search": f"{args.samples} samples, {args.steps} ascent steps, seed 0",
            "skipped": SKIPPED}
    rows, wrong = [], []
    for network, prop in pairs:
        row = measure(args.corpus, network, prop, args.samples, args.steps)
        rows.append(row)
        print(" | ".join(row.cells()), flush=True)
        if row.min_ratio is not None and row.min_ratio < 1:
            wrong.append(f"{network} {prop}: eps_j / dev_j = {row.min_ratio:.3g} < 1")
        if args.out:  # after every row: a long run stopped early keeps what it measured
            _write(args.out, rows, info, len(pairs))
    print(markdown(rows, info))
    for line in wrong:
        print("WRONG BOUND:", line, file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
