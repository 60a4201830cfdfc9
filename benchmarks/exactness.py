"""Benchmark check_exactness against its floor (one float32 forward + one float64 evaluate),
its peak memory at 1x and 10x the samples, and evaluate's float64 throughput against the
model's own float64 eager forward.

Usage: python benchmarks/exactness.py [--samples 256] [--repeats 5] [--json out.json]
Ratios are measured in one run on this machine; they are not assertions. Each ratio is the
median over repeats of a ratio of two timings taken back to back (after a warm-up), which
cancels most of the drift of a shared machine's load.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time

import torch
from torch import nn

import ncet
from ncet.examples import ResidualBlock, load_example

if __package__:  # imported as benchmarks.exactness (the memory child process)
    from .memory import fresh_process_mib, peak_growth_mib
else:  # run as a script (python benchmarks/exactness.py): benchmarks/ itself is on sys.path
    from memory import fresh_process_mib, peak_growth_mib


class DeepResidualCNN(nn.Module):
    """The bundled residual CNN's blocks stacked deeper: 8 residual blocks at 16 channels."""

    def __init__(self, blocks: int = 8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(*[ResidualBlock(16, 16) for _ in range(blocks)])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def build(name: str) -> tuple[nn.Module, tuple[int, ...]]:
    if name == "deep_residual_cnn":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return DeepResidualCNN().eval(), (3, 32, 32)
    model, shapes = load_example(name)
    return model, shapes[0]


def deep_mlp(depth: int = 500, width: int = 64) -> nn.Module:
    """`depth` x (Linear(width, width) + ReLU): small layers, where per-node overhead shows."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())]
        return nn.Sequential(*layers).eval()


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def paired(slow, fast, repeats: int) -> tuple[float, float, float]:
    """Median times of `slow` and `fast` and the median of their paired ratios."""
    slow(), fast()  # warm-up
    pairs = [(_seconds(slow), _seconds(fast)) for _ in range(repeats)]
    return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs),
            statistics.median(a / b for a, b in pairs))


def timing(name: str, samples: int, repeats: int) -> dict:
    model, shape = build(name)
    ir = ncet.convert(model, shape)
    x = torch.randn(samples, *shape, generator=torch.Generator().manual_seed(0))
    x = x * torch.logspace(-6, 4, samples).reshape(-1, *[1] * len(shape))

    def floor():
        with torch.no_grad():
            model(x)
        ncet.evaluate(ir, x)

    check_s, floor_s, ratio = paired(lambda: ncet.check_exactness(model, ir, x), floor, repeats)
    return {"model": name, "nodes": len(ir.nodes), "samples": samples,
            "floor_s": floor_s, "check_s": check_s, "ratio": ratio}


def evaluate_throughput(name: str, batch: int, repeats: int) -> dict:
    """ncet.evaluate (float64) against the model's own float64 eager forward."""
    if name == "deep_mlp":
        model, shape = deep_mlp(), (64,)
    else:
        model, shape = build(name)
    ir = ncet.convert(model, shape)
    model64 = copy.deepcopy(model).double()
    x = torch.randn(batch, *shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def eager():
        with torch.no_grad():
            model64(x)

    eager_s, evaluate_s, ratio = paired(eager, lambda: ncet.evaluate(ir, x),
                                        repeats if batch > 1 else 5 * repeats)
    return {"model": name, "nodes": len(ir.nodes), "batch": batch, "eager_s": eager_s,
            "evaluate_s": evaluate_s, "throughput_ratio": ratio}


def peak_memory(name: str, samples: int, mmap_threshold: bool) -> float:
    """Growth of peak RSS (MiB) while a fresh process runs check_exactness on `samples`.

    With `mmap_threshold`, glibc's malloc gets a fixed mmap threshold
    (MALLOC_MMAP_THRESHOLD_=1 MiB), so freed large buffers go back to the system; by
    default glibc raises the threshold dynamically and keeps freed chunk buffers in its
    heap, which shows as growth that is fragmentation, not live data.
    """
    return fresh_process_mib(f"from benchmarks.exactness import _peak; _peak({name!r}, {samples})",
                             fixed_mmap_threshold=mmap_threshold)


def _peak(name: str, samples: int) -> None:
    """Print the growth of peak RSS (MiB) over the RSS just before check_exactness (the peak
    is reset first, benchmarks/memory.py), so conversion's own peak does not hide it."""
    model, shape = build(name)
    ir = ncet.convert(model, shape)
    x = torch.randn(samples, *shape, generator=torch.Generator().manual_seed(0))
    print(f"{peak_growth_mib(lambda: ncet.check_exactness(model, ir, x)):.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results = []
    print(f"{'model':<20}{'nodes':>6}{'samples':>9}{'floor s':>9}{'check s':>9}{'ratio':>7}"
          f"  peak RSS growth MiB at 1x / 10x samples: glibc default | fixed mmap threshold")
    for name in ("residual_cnn", "deep_residual_cnn"):
        row = timing(name, args.samples, args.repeats)
        for tag, fixed in (("default", False), ("mmap", True)):
            row[f"peak_mib_1x_{tag}"] = peak_memory(name, args.samples, fixed)
            row[f"peak_mib_10x_{tag}"] = peak_memory(name, 10 * args.samples, fixed)
        results.append(row)
        print(f"{name:<20}{row['nodes']:>6}{row['samples']:>9}{row['floor_s']:>9.3f}"
              f"{row['check_s']:>9.3f}{row['ratio']:>7.2f}  "
              f"{row['peak_mib_1x_default']:>8.1f} / {row['peak_mib_10x_default']:<8.1f}| "
              f"{row['peak_mib_1x_mmap']:>8.1f} / {row['peak_mib_10x_mmap']:.1f}")
    print("floor = one float32 forward of the model + one float64 ncet.evaluate on the same "
          "samples; targets (DESIGN section 5): ratio <= 3 on real networks "
          "(benchmarks/cnn_check.py), memory flat in the samples")
    print(f"\n{'model':<20}{'nodes':>6}{'batch':>7}{'eager f64 s':>13}{'evaluate s':>12}"
          f"{'throughput':>12}")
    throughput = []
    for name in ("deep_mlp", "residual_cnn"):
        for batch in (1, 256):
            row = evaluate_throughput(name, batch, args.repeats)
            throughput.append(row)
            print(f"{name:<20}{row['nodes']:>6}{batch:>7}{row['eager_s']:>13.5f}"
                  f"{row['evaluate_s']:>12.5f}{row['throughput_ratio']:>12.2f}")
    print("throughput = eager time / evaluate time (median of paired ratios); target "
          "(DESIGN section 5): >= 0.9")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"check_exactness": results, "evaluate": throughput}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
