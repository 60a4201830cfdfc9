"""What `rewrite=True` costs `convert` on deep models (issue 18's target: at most 1.1 x).

Two comparisons, each of two calls run interleaved on one torch thread, medians of CPU time
(benchmarks/scale.py's `medians`):

* *no rewrites*: benchmarks/scale.py's MLP, which has nothing to rewrite, converted with
  `rewrite=True` against `rewrite=False`: the cost of looking;
* *every ReLU in place*: the same MLP with `nn.ReLU(inplace=True)`, converted with
  `rewrite=True`, against the MLP with `nn.ReLU()` converted as written: the cost of the
  alias analysis and the rewrite at every other node.

    python benchmarks/rewrite.py [--nodes 20000] [--repeats 3] [--json out.json]

Ratios are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
from torch import nn

import ncet

if __package__:
    from .scale import build, medians
else:  # run as a script: benchmarks/ itself is on sys.path
    from scale import build, medians


def inplace_copy(model: nn.Module) -> nn.Module:
    """`model` with every nn.ReLU made in place (the same parameters, no copy of them)."""
    for module in model.modules():
        if isinstance(module, nn.ReLU):
            module.inplace = True
    return model


def run(nodes: int, repeats: int) -> dict:
    torch.set_num_threads(1)
    plain, shape = build("mlp", nodes)
    inplace, _ = build("mlp", nodes)
    inplace_copy(inplace)
    fx_nodes = len(ncet.diagnose(plain, shape).rows)
    looking = medians({
        "without": lambda: ncet.convert(plain, shape),
        "with": lambda: ncet.convert(plain, shape, rewrite=True),
    }, repeats)
    rewriting = medians({
        "as written out of place": lambda: ncet.convert(plain, shape),
        "in place, rewritten": lambda: ncet.convert(inplace, shape, rewrite=True),
    }, repeats)
    return {
        "fx_nodes": fx_nodes,
        "no_rewrites": {"without_s": looking["without"], "with_s": looking["with"],
                        "ratio": looking["with"] / looking["without"]},
        "every_relu_in_place": {
            "out_of_place_s": rewriting["as written out of place"],
            "rewritten_s": rewriting["in place, rewritten"],
            "ratio": rewriting["in place, rewritten"] / rewriting["as written out of place"]},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20000, help="approximate FX nodes")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each call")
    parser.add_argument("--json", help="write the figures to this file too")
    args = parser.parse_args(argv)
    result = run(args.nodes, args.repeats)
    print(f"MLP of {result['fx_nodes']} FX nodes, CPU seconds (medians), one torch thread")
    a, b = result["no_rewrites"], result["every_relu_in_place"]
    print(f"  no rewrites:         rewrite=False {a['without_s']:.3f}  rewrite=True "
          f"{a['with_s']:.3f}  ratio {a['ratio']:.3f}")
    print(f"  every ReLU in place: out of place {b['out_of_place_s']:.3f}  rewritten "
          f"{b['rewritten_s']:.3f}  ratio {b['ratio']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
