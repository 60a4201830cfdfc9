"""How tight the certified bounds are: per op_type, the median and worst node-local
observed/bound ratio over the bundled models and seeded random models, float32 and float64.

Usage: python benchmarks/tightness.py [--random 12]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys

import torch

import ncet
from ncet.examples import EXAMPLES, load_example


def reports(random_models: int):
    sys.path.insert(0, ".")
    from tests.test_exactness import random_model  # the seeded generator the tests use
    from tests.test_faults import zoo

    for name in (n for n, e in EXAMPLES.items() if e.converts):
        model, shapes = load_example(name)
        for dtype in (torch.float32, torch.float64):
            m = copy.deepcopy(model).to(dtype)
            yield ncet.check_exactness(m, ncet.convert(m, *shapes, dtype=dtype))
    for dtype in (torch.float32, torch.float64):
        m = zoo(dtype)
        yield ncet.check_exactness(m, ncet.convert(m, (3, 6, 8), dtype=dtype))
    for seed in range(random_models):
        model, shape = random_model(seed)
        yield ncet.check_exactness(model, ncet.convert(model, shape), seed=seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random", type=int, default=12, help="random models to add")
    args = parser.parse_args()
    medians: dict[str, list[float]] = {}
    worst: dict[str, float] = {}
    count = 0
    for report in reports(args.random):
        count += 1
        assert report.ok, report.summary()
        for e in report.entries:
            if e.local_bound > 0 or e.local_median_ratio > 0:
                medians.setdefault(e.op_type, []).append(e.local_median_ratio)
                worst[e.op_type] = max(worst.get(e.op_type, 0.0), e.local_ratio)
    print(f"{count} reports, no violation; node-local observed/bound per op_type")
    print(f"{'op_type':<20}{'nodes':>6}{'median':>10}{'worst':>10}")
    for op in sorted(medians):
        print(f"{op:<20}{len(medians[op]):>6}{statistics.median(medians[op]):>10.3g}"
              f"{worst[op]:>10.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
