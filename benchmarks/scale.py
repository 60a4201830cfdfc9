"""Benchmark NCET at scale: depth-scalable models from ~100 to ~20,000 FX nodes.

Measures in one run, as medians over repeats after a warm-up:
  * convert against its floor (torch.fx.symbolic_trace + one ShapeProp, under no_grad), and
    against torch.export.export and torch.onnx.export (only up to --export-max-nodes);
  * microseconds per FX node of each conversion stage, and the fitted exponent k of
    time ~ nodes^k over the sizes >= 1,000 nodes (k = 1 is linear);
  * diagnose against convert;
  * evaluate (float64) against the model's own float64 eager forward, at batch 1 and 256;
  * check_exactness against one float32 forward + one float64 evaluate, timed at 1x and 10x
    the samples (at 10x each op has more work, so per-op overhead weighs less), and its peak
    memory at 1x and 10x the samples (each in a fresh process);
  * save/load time and file size against torch.save of the state dict.

Usage: python benchmarks/scale.py [--quick] [--sizes 100,1000,20000] [--json out.json]
Ratios are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import math
import os
import platform
import sys
import tempfile
import time
import warnings

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

import ncet
from ncet.frontend.canonicalize import canonicalize

if __package__:  # imported as benchmarks.scale (the memory child process, the tests)
    from .memory import fresh_process_mib, peak_growth_mib
else:  # run as a script (python benchmarks/scale.py): benchmarks/ itself is on sys.path
    from memory import fresh_process_mib, peak_growth_mib

import ncet.frontend.canonicalize
from ncet.frontend.constants import ConstantLifter
from ncet.frontend.shape_propagation import ShapePropagation

STAGES = ("trace", "shape propagation", "canonicalization", "lifting")
"""The stages of a conversion `stage_seconds` reports; they add up to the call: *trace*
(with source locations), *shape propagation* (the example inputs, every node run at batch
sizes 2 and 3, the batch rule), *lifting* (copying and checking constants) and
*canonicalization*, the rest (spelling, arguments, handler, the other boundary checks, IR
node and report row)."""

_TIMED = ((ncet.frontend.canonicalize, "trace_model", "trace"),
          (ShapePropagation, "__init__", "shape propagation"),
          (ShapePropagation, "input", "shape propagation"),
          (ShapePropagation, "record", "shape propagation"),
          (ConstantLifter, "copy", "lifting"),
          (ConstantLifter, "lift", "lifting"),
          (ConstantLifter, "lift_attr", "lifting"))
"""(owner, attribute, stage) of each function `timed_stages` wraps: what canonicalize calls
for a stage other than canonicalization."""

FAMILIES = ("mlp", "resnet")
DEFAULT_SIZES = (100, 300, 1000, 3000, 10000, 20000)
QUICK_SIZES = (60, 200)
_MLP_WIDTH = 64
_CNN_SHAPE = (8, 4, 4)  # channels, height, width: small layers stress per-node overhead
_DIAGNOSE_REPEAT_MAX_NODES = 3000  # above this size diagnose runs once, to keep the run short
_SLOW_CHECK_S = 2.0  # a 10x-samples check_exactness estimated longer than this runs once


# --- models ---------------------------------------------------------------------------------
class DeepMLP(nn.Module):
    """`depth` Linear+ReLU layers and a final Linear: 2 * depth + 3 FX nodes."""

    def __init__(self, depth: int, width: int = _MLP_WIDTH):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        self.layers = nn.Sequential(*layers, nn.Linear(width, 10))

    def forward(self, x):
        return self.layers(x)


class Block(nn.Module):
    """conv-BN-ReLU-conv-BN, max and average pooling concatenated, a 1x1 conv, and a scaled
    skip connection with a shift (scalar affine ops): 13 FX nodes."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels, momentum=None)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels, momentum=None)
        self.max = nn.MaxPool2d(3, stride=1, padding=1)
        self.mix = nn.Conv2d(2 * channels, channels, 1)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        y = self.mix(torch.cat([self.max(y), F.avg_pool2d(y, 3, 1, 1)], dim=1))
        return F.relu(x + y * 0.5 - 0.125)


class DeepResNet(nn.Module):
    """A stem, `depth` Blocks and a pooled linear head: 13 * depth + 8 FX nodes."""

    def __init__(self, depth: int, channels: int = _CNN_SHAPE[0]):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1),
                                  nn.BatchNorm2d(channels, momentum=None), nn.ReLU())
        self.blocks = nn.Sequential(*[Block(channels) for _ in range(depth)])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def build(family: str, nodes: int,
          mlp_width: int = _MLP_WIDTH) -> tuple[nn.Module, tuple[int, ...]]:
    """A seeded eval-mode model of about `nodes` FX nodes, calibrated so that activations
    neither vanish nor explode with depth (LSUV-style for the MLP; BatchNorm statistics
    from one training-mode batch for the ResNet); the MLP's layers are `mlp_width` wide."""
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(nodes)
        if family == "mlp":
            model, shape = DeepMLP(max(1, (nodes - 3) // 2), mlp_width), (mlp_width,)
            h = torch.randn(64, *shape)
            for layer in model.layers:
                h = layer(h)
                if isinstance(layer, nn.Linear):
                    scale = float(h.std())
                    layer.weight /= scale
                    layer.bias /= scale
                    h = h / scale
        else:
            model, shape = DeepResNet(max(1, (nodes - 8) // 13)), _CNN_SHAPE
            model.train()(torch.randn(32, *shape))
    return model.eval(), shape


def inputs(shape: tuple[int, ...], batch: int, dtype=torch.float32, seed: int = 0):
    return torch.randn(batch, *shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# --- timing ---------------------------------------------------------------------------------
def medians(fns: dict, repeats: int, min_seconds: float = 0.3) -> dict[str, float]:
    """Median CPU seconds of each function, run interleaved, at least `repeats` times and
    until `min_seconds` were spent (at most 30 times).

    CPU time of this process (one torch thread) rather than wall time: on a machine shared
    with other jobs, wall time also counts the time the process waits for a core. The
    median wall seconds are kept under "<name>/wall".
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    walls: dict[str, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    while True:
        for name, fn in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            times[name].append(time.process_time() - c0)
            walls[name].append(time.perf_counter() - t0)
        n = len(next(iter(times.values())))
        if n >= repeats and (time.perf_counter() - start >= min_seconds or n >= 30):
            break
    result = {name: _median(ts) for name, ts in times.items()}
    result.update({f"{name}/wall": _median(ts) for name, ts in walls.items()})
    return result


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def fx_floor(model: nn.Module, x: torch.Tensor) -> None:
    """What NCET cannot avoid: symbolic tracing and one shape propagation."""
    gm = torch.fx.symbolic_trace(model)
    with torch.no_grad():
        ShapeProp(gm).propagate(x)


@contextlib.contextmanager
def timed_stages(seconds: dict[str, float]):
    """Wrap the functions of `_TIMED` for the body only: each outermost call's wall seconds
    are added to `seconds[stage]`. The conversion itself has no clock: these wrappers,
    installed for a benchmark run, are the only timing."""
    depth = [0]

    def timed(function, stage):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if depth[0]:
                return function(*args, **kwargs)
            depth[0] += 1
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[stage] += time.perf_counter() - started
                depth[0] -= 1
        return wrapper

    originals = [(owner, name, vars(owner)[name]) for owner, name, _ in _TIMED]
    try:
        for (owner, name, stage), (_, _, function) in zip(_TIMED, originals):
            setattr(owner, name, timed(function, stage))
        yield seconds
    finally:
        for owner, name, function in originals:
            setattr(owner, name, function)


def stage_seconds(model, shape) -> tuple[dict[str, float], float]:
    """One conversion's CPU seconds by stage (`STAGES`, adding up to the call) and in all."""
    seconds = dict.fromkeys(STAGES, 0.0)
    with timed_stages(seconds):
        c0, t0 = time.process_time(), time.perf_counter()
        canonicalize(model, (shape,), torch.float32, first_error_only=True)
        total, wall = time.process_time() - c0, time.perf_counter() - t0
    seconds["canonicalization"] = max(0.0, wall - sum(seconds.values()))
    # the wrappers measure wall time: scale it to this run's CPU time
    return {k: v * total / wall for k, v in seconds.items()} if wall else seconds, total


def conversion(model, shape, repeats: int) -> dict:
    """convert against its floor, diagnose, and the per-stage breakdown."""
    x = inputs(shape, 2)
    nodes = len(torch.fx.symbolic_trace(model).graph.nodes)
    stage_runs: list[dict[str, float]] = []

    def staged():
        stage_runs.append(stage_seconds(model, shape)[0])

    fns = {"floor": lambda: fx_floor(model, x), "convert": lambda: ncet.convert(model, shape),
           "staged": staged}
    diagnose = {"diagnose": lambda: ncet.diagnose(model, shape)}
    if nodes <= _DIAGNOSE_REPEAT_MAX_NODES:
        t = medians({**fns, **diagnose}, repeats)
    else:  # one run: diagnose does the same walk as convert
        t = {**medians(fns, repeats), **medians(diagnose, 1, min_seconds=0)}
    row = {"nodes": nodes, "floor_s": t["floor"], "convert_s": t["convert"],
           "diagnose_s": t["diagnose"], "floor_wall_s": t["floor/wall"],
           "convert_wall_s": t["convert/wall"], "convert_over_floor": t["convert"] / t["floor"],
           "diagnose_over_convert": t["diagnose"] / t["convert"],
           "convert_us_per_node": 1e6 * t["convert"] / nodes,
           "floor_us_per_node": 1e6 * t["floor"] / nodes}
    for stage in STAGES:
        row[f"stage_us_per_node/{stage}"] = 1e6 * _median([s[stage] for s in stage_runs]) / nodes
        row[f"stage_s/{stage}"] = _median([s[stage] for s in stage_runs])
    return row


def exports(model, shape, repeats: int) -> dict:
    """torch.export.export and torch.onnx.export of the same model (batch 2 example)."""
    x = inputs(shape, 2)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = os.path.join(tmp, "model.onnx")

        def onnx_export():
            with open(os.devnull, "w") as sink:  # the exporter prints progress to stdout
                stdout, sys.stdout = sys.stdout, sink
                try:
                    torch.onnx.export(model, (x,), path, dynamo=True)
                finally:
                    sys.stdout = stdout

        t = medians({"export": lambda: torch.export.export(model, (x,)),
                     "onnx": onnx_export}, repeats, min_seconds=0)
    return {"torch_export_s": t["export"], "onnx_export_s": t["onnx"]}


def evaluation(model, shape, repeats: int, samples: int) -> dict:
    """evaluate against eager float64, check_exactness against its floor, save/load."""
    ir = ncet.convert(model, shape)
    model64 = copy.deepcopy(model).double()
    row = {}
    for batch in (1, 256):
        x = inputs(shape, batch, torch.float64)

        def eager(x=x):
            with torch.no_grad():
                model64(x)

        t = medians({"eager": eager, "evaluate": lambda x=x: ncet.evaluate(ir, x)}, repeats)
        row[f"eager64_s/b{batch}"] = t["eager"]
        row[f"evaluate_s/b{batch}"] = t["evaluate"]
        row[f"evaluate_throughput_ratio/b{batch}"] = t["eager"] / t["evaluate"]
    row["samples"] = samples
    for suffix, n in (("", samples), ("_10x", 10 * samples)):
        # after the 1x runs (the warm-up), a 10x check estimated over 2 s runs once
        slow = suffix and 10 * row["check_s"] > _SLOW_CHECK_S
        t = check_against_floor(model, ir, inputs(shape, n), 1 if slow else repeats,
                                0 if slow else 0.3)
        row.update({f"check_floor_s{suffix}": t["floor"], f"check_s{suffix}": t["check"],
                    f"check_over_floor{suffix}": t["check"] / t["floor"]})
    with tempfile.TemporaryDirectory() as tmp:
        path, state_path = os.path.join(tmp, "m.ncet"), os.path.join(tmp, "m.pt")
        t = medians({"save": lambda: ncet.save(ir, path), "load": lambda: ncet.load(path),
                     "torch_save": lambda: torch.save(model.state_dict(), state_path)}, repeats)
        row.update({"save_s": t["save"], "load_s": t["load"], "torch_save_s": t["torch_save"],
                    "file_bytes": os.path.getsize(path),
                    "torch_save_bytes": os.path.getsize(state_path)})
    return row


def check_against_floor(model, ir, x, repeats: int, min_seconds: float) -> dict:
    """check_exactness on `x` and its floor (one float32 eager forward + one float64
    evaluate of the same samples), interleaved medians."""

    def floor():
        with torch.no_grad():
            model(x)
        ncet.evaluate(ir, x)

    return medians({"floor": floor, "check": lambda: ncet.check_exactness(model, ir, x)},
                   repeats, min_seconds)


def peak_memory(family: str, nodes: int, samples: int, mlp_width: int = _MLP_WIDTH) -> float:
    """Growth of peak RSS (MiB) while a fresh process runs check_exactness on `samples`.

    glibc gets a fixed mmap threshold (MALLOC_MMAP_THRESHOLD_=1 MiB), so freed large buffers
    go back to the system instead of showing as heap growth (benchmarks/exactness.py
    measures the difference)."""
    return fresh_process_mib(f"from benchmarks.scale import peak_child; "
                             f"peak_child({family!r}, {nodes}, {samples}, {mlp_width})")


def peak_child(family: str, nodes: int, samples: int, mlp_width: int = _MLP_WIDTH) -> None:
    """Print the growth of peak RSS (MiB) over the RSS just before check_exactness (the peak
    is reset first, benchmarks/memory.py), so the conversion's own peak does not hide it."""
    model, shape = build(family, nodes, mlp_width)
    ir = ncet.convert(model, shape)
    x = inputs(shape, samples)
    print(f"{peak_growth_mib(lambda: ncet.check_exactness(model, ir, x, chunk_size=64)):.1f}")


def fit_exponent(rows: list[dict], key: str, min_nodes: int = 1000) -> float | None:
    """k of time ~ nodes^k: least squares of log(time) on log(nodes) over sizes >= min_nodes."""
    points = [(math.log(r["nodes"]), math.log(r[key])) for r in rows
              if r["nodes"] >= min_nodes and r.get(key)]
    if len(points) < 2:
        return None
    mx = sum(p[0] for p in points) / len(points)
    my = sum(p[1] for p in points) / len(points)
    sxx = sum((p[0] - mx) ** 2 for p in points)
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx if sxx else None


# --- the run --------------------------------------------------------------------------------
def run(args) -> dict:
    sizes = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    result = {"machine": {"python": platform.python_version(), "torch": torch.__version__,
                          "cpus": os.cpu_count(), "load_average": os.getloadavg(),
                          "threads": torch.get_num_threads()},
              "settings": {"sizes": list(sizes), "repeats": args.repeats,
                           "export_repeats": args.export_repeats,
                           "export_max_nodes": args.export_max_nodes,
                           "eval_max_nodes": args.eval_max_nodes, "samples": args.samples,
                           "memory_nodes": args.memory_nodes, "threads": args.threads,
                           "mlp_width": args.mlp_width},
              "conversion": [], "evaluation": [], "memory": [], "fits": {}}
    for family in args.families:
        # warm-up: every measured call once
        model, shape = build(family, min(sizes), args.mlp_width)
        conversion(model, shape, 1)
        if args.export_max_nodes:
            exports(model, shape, 1)
        evaluation(model, shape, 1, min(args.samples, 8))
        rows = []
        for size in sizes:
            model, shape = build(family, size, args.mlp_width)
            row = {"model": family, **conversion(model, shape, args.repeats)}
            if row["nodes"] <= args.export_max_nodes:
                row.update(exports(model, shape, args.export_repeats))
                row["export_over_convert"] = row["torch_export_s"] / row["convert_s"]
            rows.append(row)
            _progress(f"{family} {row['nodes']} nodes: convert {row['convert_s']:.3f} s")
            if row["nodes"] <= args.eval_max_nodes:
                result["evaluation"].append({"model": family, "nodes": row["nodes"],
                                             **evaluation(model, shape, args.repeats,
                                                          args.samples)})
        result["conversion"] += rows
        keys = ["floor_s", "convert_s", "diagnose_s"] + [f"stage_s/{s}" for s in STAGES]
        result["fits"][family] = {key: fit_exponent(rows, key) for key in keys}
        if args.memory_nodes:
            model, shape = build(family, args.memory_nodes, args.mlp_width)
            nodes = len(torch.fx.symbolic_trace(model).graph.nodes)
            result["memory"].append({
                "model": family, "nodes": nodes, "samples": args.samples,
                "peak_mib_1x": peak_memory(family, args.memory_nodes, args.samples, args.mlp_width),
                "peak_mib_10x": peak_memory(family, args.memory_nodes, 10 * args.samples,
                                            args.mlp_width)})
    return result


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def print_tables(result: dict) -> None:
    short = {"trace": "trace", "shape propagation": "shape", "canonicalization": "canon",
             "lifting": "lift"}
    c, h, w = _CNN_SHAPE
    print(f"\nmodels: mlp {result['settings']['mlp_width']} wide, resnet on {c}x{h}x{w} inputs")
    print("convert against its floor (symbolic_trace + one ShapeProp); us per FX node by stage")
    print(f"{'model':<7}{'nodes':>7}{'floor s':>9}{'convert s':>10}{'conv/floor':>11}"
          f"{'us/node':>8}" + "".join(f"{short[s]:>7}" for s in STAGES)
          + f"{'diag/conv':>10}{'export s':>9}{'exp/conv':>9}{'onnx s':>8}")
    for r in result["conversion"]:
        export = (f"{r['torch_export_s']:>9.2f}{r['export_over_convert']:>9.1f}"
                  f"{r['onnx_export_s']:>8.2f}" if "torch_export_s" in r
                  else f"{'-':>9}{'-':>9}{'-':>8}")
        print(f"{r['model']:<7}{r['nodes']:>7}{r['floor_s']:>9.3f}{r['convert_s']:>10.3f}"
              f"{r['convert_over_floor']:>11.2f}{r['convert_us_per_node']:>8.0f}"
              + "".join(f"{r[f'stage_us_per_node/{s}']:>7.0f}" for s in STAGES)
              + f"{r['diagnose_over_convert']:>10.2f}" + export)
    print("fitted k (time ~ nodes^k over sizes >= 1,000 nodes):")
    for family, fits in result["fits"].items():
        print(f"  {family:<7}" + "  ".join(
            f"{key.removesuffix('_s').replace('stage_s/', '')}={_fmt(k)}"
            for key, k in fits.items()))
    print("\nevaluate (float64) against eager float64 (throughput ratio, >= 0.9 is the target); "
          "check_exactness against one float32 forward + one float64 evaluate (<= 3 is the "
          "target on real networks: benchmarks/cnn_check.py), at --samples and 10x; save/load")
    print(f"{'model':<7}{'nodes':>7}{'eval b1':>8}{'eval b256':>10}{'samples':>8}"
          f"{'floor s':>9}{'check s':>9}{'chk/floor':>10}{'floor 10x':>10}{'check 10x':>10}"
          f"{'c/f 10x':>8}{'save s':>8}{'load s':>8}{'t.save s':>9}{'file KiB':>9}"
          f"{'state KiB':>10}")
    for r in result["evaluation"]:
        print(f"{r['model']:<7}{r['nodes']:>7}{r['evaluate_throughput_ratio/b1']:>8.2f}"
              f"{r['evaluate_throughput_ratio/b256']:>10.2f}{r['samples']:>8}"
              f"{r['check_floor_s']:>9.3f}{r['check_s']:>9.3f}{r['check_over_floor']:>10.2f}"
              f"{r['check_floor_s_10x']:>10.3f}{r['check_s_10x']:>10.3f}"
              f"{r['check_over_floor_10x']:>8.2f}{r['save_s']:>8.3f}{r['load_s']:>8.3f}"
              f"{r['torch_save_s']:>9.3f}{r['file_bytes'] / 1024:>9.0f}"
              f"{r['torch_save_bytes'] / 1024:>10.0f}")
    for m in result["memory"]:
        print(f"check_exactness peak RSS growth, {m['model']} {m['nodes']} nodes: "
              f"{m['peak_mib_1x']:.1f} MiB at {m['samples']} samples, "
              f"{m['peak_mib_10x']:.1f} MiB at {10 * m['samples']}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, one repeat: a smoke test, not a measurement")
    parser.add_argument("--sizes", type=lambda s: tuple(int(v) for v in s.split(",")),
                        help="approximate FX node counts, comma-separated")
    parser.add_argument("--families", type=lambda s: tuple(s.split(",")), default=FAMILIES,
                        help=f"model families, comma-separated (default {','.join(FAMILIES)})")
    parser.add_argument("--repeats", type=int, default=3, help="at least this many runs")
    parser.add_argument("--export-max-nodes", type=int, default=1000,
                        help="measure torch.export / torch.onnx.export up to this size "
                             "(0: never); they cost milliseconds per node")
    parser.add_argument("--export-repeats", type=int, default=1)
    parser.add_argument("--eval-max-nodes", type=int, default=3000,
                        help="measure evaluate, check_exactness and save/load up to this size")
    parser.add_argument("--samples", type=int, default=256,
                        help="samples for check_exactness (memory also at 10x)")
    parser.add_argument("--memory-nodes", type=int, default=100,
                        help="model size for the peak-memory runs (0: skip them)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1: on a shared machine, OpenMP "
                             "threads waiting for a busy core make small ops 10-25x slower)")
    parser.add_argument("--mlp-width", type=int, default=_MLP_WIDTH,
                        help=f"width of the mlp family's layers (default {_MLP_WIDTH}; wider "
                             "layers give each op more work)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.repeats, args.samples = 1, min(args.samples, 16)
        args.memory_nodes = min(args.memory_nodes, 60)
        args.export_max_nodes = min(args.export_max_nodes, 60)
    result = run(args)
    print_tables(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
