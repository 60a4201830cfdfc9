"""How fast can an exactness check of a deep MLP be when it runs PyTorch's kernels one by one?

`minimal_check` is check_exactness's arithmetic on benchmarks/scale.py's MLP written out by
hand, as straight-line code with no bookkeeping: per Linear, PyTorch's layer, the float32
magnitude sum and its bound, the float64 layer node-locally and end to end, the carried
radius, and the error/bound ratios; per ReLU, the same comparisons of an exact op; then the
eager forward that check_exactness compares the outputs with. No worst-element record, no
relative error, no samples, no ratio medians, no graph walk. It returns the largest ratios,
which tests/test_benchmarks.py holds equal to check_exactness's report, so the loop computes
what the check computes.

`products_only` keeps of it only what must be computed before anything is compared: the
layers, their float64 copies and the four matrix products per Linear. The script times both
against the floor of benchmarks/scale.py (one float32 forward + one float64 evaluate) and
against check_exactness, interleaved, medians of CPU time:

    python benchmarks/eager_floor.py [--widths 64,256] [--samples 256,2560] [--nodes 300]

If `minimal_check` is already above 4 x the floor, no rearrangement of eager PyTorch calls
brings check_exactness under it; if `products_only` is, neither does fusing the comparisons
and the bound arithmetic into one pass: only kernels fused with the matrix products would.

`products_in_check` times the matrix products where they really run: the CPU time spent in
F.linear during one check_exactness (the traced layers, the float64 layers node-locally and
end to end, the bound's two float32 products, the eager forward), in the same timed runs of
the check (the timer adds about 1 µs per product). A product costs more there
than in the floor, where each layer reads the value the previous one has just written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

import ncet
from ncet.exactness.arithmetic import read_arithmetic_model
from ncet.exactness.bounds import SAFETY
from ncet.exactness.float32_dots import DotBound, carry_exponent, round_up_to_float32

if __package__:  # imported as benchmarks.eager_floor (the tests)
    from .scale import build, inputs, medians
else:  # run as a script: benchmarks/ itself is on sys.path
    from scale import build, inputs, medians

_F64 = torch.float64


def prepare(model: torch.nn.Module, ir: ncet.GraphIR) -> list[tuple]:
    """Per layer of the MLP: the module, its IR node and, for a Linear, its constants in the
    forms the check uses (float64, |.| in float32 and float64) and its DotBound."""
    arithmetic = read_arithmetic_model()
    nodes = [n for n in ir.nodes if n.op_type not in ("Input", "Output")]
    steps = []
    for layer, node in zip(model.layers, nodes, strict=True):
        if node.op_type == "Linear":
            w, b = ir.constants[node.attrs["weight"]], ir.constants[node.attrs["bias"]]
            steps.append((layer, node, (w.to(_F64), b.to(_F64)), (w.abs(), b.abs()),
                          w.to(_F64).abs(), DotBound.of(node, ir.constants, torch.float32,
                                                        arithmetic)))
        else:
            steps.append((layer, node, None, None, None, None))
    return steps


def _largest(error: torch.Tensor, bound: torch.Tensor | None) -> float:
    """The largest observed/bound ratio: 0/0 counts 0, an error against no bound inf."""
    if bound is None:
        return 0.0 if float(error.max()) == 0.0 else float("inf")
    return float(error.div_(bound).nan_to_num_(0.0, float("inf")).max())


def minimal_check(model: torch.nn.Module, steps: list[tuple], x: torch.Tensor,
                  values: list[torch.Tensor] | None = None) -> dict[str, tuple[float, float]]:
    """check_exactness's arithmetic on the MLP, as straight-line code: the largest node-local
    and end-to-end ratio of every node, by name. `values`: another runtime's value of every
    layer, in order (onnxruntime's, for check_onnx), checked instead of the model's own
    layers; the model is then not run."""
    ratios = {}
    with torch.no_grad():
        h, t_in = x, x.to(_F64)
        ref, radius = t_in, None  # the inputs are exact
        for i, (layer, node, w64, w32abs, w64abs, dot) in enumerate(steps):
            y = layer(h) if values is None else values[i]  # PyTorch's value, or the runtime's
            t = y.to(_F64)
            if dot is None:  # ReLU: exact, the radius passes through
                local = _largest(torch.sub(t, torch.relu(t_in)).abs_(), None)
                value, total = torch.relu(ref), radius
            else:
                magnitude = F.linear(h.abs(), *w32abs)
                float(magnitude.max())  # the check's overflow test
                bound = dot.local(magnitude)
                local = _largest(torch.sub(t, F.linear(t_in, *w64)).abs_(), bound)
                value = F.linear(ref, *w64)
                if radius is None:
                    total = bound.clone()
                else:
                    s = carry_exponent([radius])
                    carried = F.linear(round_up_to_float32(radius, exponent=s), w32abs[0])
                    if torch.isfinite(carried.max()):
                        total = dot.total(bound, carried, s)
                    else:  # beyond float32: the float64 rule
                        total = torch.add(bound, F.linear(radius, w64abs), alpha=SAFETY)
            end_to_end = _largest(torch.sub(t, value).abs_(),
                                  None if total is None else total.expand_as(t))
            ratios[node.name] = (local, end_to_end)
            h, t_in, ref, radius = y, t, value, total
        if values is None:
            model(x)  # the eager forward the outputs are compared with
    return ratios


def products_only(model: torch.nn.Module, steps: list[tuple], x: torch.Tensor) -> None:
    """What any check of the MLP must compute before comparing anything: `minimal_check`
    without its comparisons and bound arithmetic. Per layer PyTorch's layer and its float64
    copy, the float64 layer node-locally and end to end, the two float32 products of the
    bound (|W|.|x| + |b| and |W|.e); then the eager forward."""
    with torch.no_grad():
        h, t_in = x, x.to(_F64)
        ref = t_in
        for layer, _, w64, w32abs, _, dot in steps:
            y = layer(h)
            t = y.to(_F64)
            if dot is None:
                torch.relu(t_in)
                value = torch.relu(ref)
            else:
                F.linear(h.abs(), *w32abs)
                F.linear(t_in, *w64)
                value = F.linear(ref, *w64)
                F.linear(h, w32abs[0])  # stands in for the radius: the same product's cost
            h, t_in, ref = y, t, value
        model(x)


def products_in_check(model: torch.nn.Module, ir: ncet.GraphIR, x: torch.Tensor,
                      chunk_size: int | None = None) -> tuple[float, int]:
    """CPU seconds spent in F.linear during one check_exactness of the MLP, and how many
    calls (every product of the check goes through it: nn.Linear calls it, and so do NCET's
    evaluator and bound rules)."""
    linear, spent, calls = F.linear, [0.0], [0]

    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return linear(*args, **kwargs)
        finally:
            spent[0] += time.process_time() - start
            calls[0] += 1

    F.linear = timed
    try:
        ncet.check_exactness(model, ir, x, chunk_size=chunk_size)
    finally:
        F.linear = linear
    return spent[0], calls[0]


def measure(nodes: int, width: int, samples: int, repeats: int) -> dict:
    model, shape = build("mlp", nodes, mlp_width=width)
    ir = ncet.convert(model, shape)
    x = inputs(shape, samples)
    steps = prepare(model, ir)

    def floor():
        with torch.no_grad():
            model(x)
        ncet.evaluate(ir, x)

    shares: list[float] = []  # seconds in the products, per timed check

    def check():
        shares.append(products_in_check(model, ir, x)[0])

    fns = {"floor": floor, "products": lambda: products_only(model, steps, x),
           "minimal": lambda: minimal_check(model, steps, x), "check": check}
    for fn in fns.values():  # warm-up
        fn()
    shares.clear()
    t = medians(fns, repeats, min_seconds=0.0)
    inside = sorted(shares)[len(shares) // 2]
    return {"nodes": len(ir.nodes), "width": width, "samples": samples,
            "floor_s": t["floor"], "products_s": t["products"], "minimal_s": t["minimal"],
            "check_s": t["check"], "products_in_check_s": inside,
            "products_in_check_over_floor": inside / t["floor"],
            "products_over_floor": t["products"] / t["floor"],
            "minimal_over_floor": t["minimal"] / t["floor"],
            "check_over_floor": t["check"] / t["floor"],
            "check_over_minimal": t["check"] / t["minimal"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--widths", default="64,256")
    parser.add_argument("--samples", default="256,2560")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    print(f"{'nodes':>6} {'width':>6} {'samples':>8} {'floor ms':>9} {'products/floor':>15} "
          f"{'minimal/floor':>14} {'check/floor':>12} {'check/minimal':>14} "
          f"{'in-check products/floor':>24}")
    for width in map(int, args.widths.split(",")):
        for samples in map(int, args.samples.split(",")):
            r = measure(args.nodes, width, samples, args.repeats)
            rows.append(r)
            print(f"{r['nodes']:>6} {width:>6} {samples:>8} {r['floor_s'] * 1e3:>9.1f} "
                  f"{r['products_over_floor']:>15.2f} {r['minimal_over_floor']:>14.2f} "
                  f"{r['check_over_floor']:>12.2f} {r['check_over_minimal']:>14.2f} "
                  f"{r['products_in_check_over_floor']:>24.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": args.threads, "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
