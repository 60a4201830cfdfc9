"""The checker's fast paths against the reference path (ncet/exactness/fast_paths.py).

`check_exactness` is run with `FAST_PATHS` on (the default) and off (`reference_path()`) on
every bundled model that converts, on a model with every fused rule, on seeded faults and
on random models, and the reports are held to the relation of docs/exactness.md §2.5:

* identical: the verdict, the first violation, the unchecked and suspicious nodes, and per
  node and output everything that does not depend on the bound (the errors, the errors at
  the worst element, the violation counts, the notes);
* every bound (node-local and end to end, at the worst element; the largest end-to-end
  bound; the outputs'; the sensitivity) within float64 rounding of the reference's,
  B_fast >= B_ref (1 - 2^-40), and, because the float32 route rounds its float32 sums up,
  at most B_ref (1 + 2^-10), equal to float64 rounding on graphs without float32
  Linear/Conv2d;
* every ratio (and median ratio, and suspicion) the same relation inverted, since the
  errors are the same.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, note, settings

import ncet
import ncet.exactness.arithmetic
from ncet.exactness import fast_paths
from ncet.examples import EXAMPLES
from tests.model_strategies import build, programs
from tests.test_exactness import EveryFusedRule
from tests.test_faults import FAULTS, zoo

FLOAT64_ROUNDING = 2.0 ** -40
"""Two float64 evaluations of one formula in different orders, each a few roundings of
2^-53 (far inside SAFETY's 2^-20), compounded over a graph's depth."""

FLOAT32_ROUNDING_UP = 2.0 ** -10
"""How much looser the float32 route may be: per Linear/Conv2d, its float32 sums are
rounded up by 1 / (1 - gamma_n(2^-24)) and n eta (about 2 n 2^-24 relative), and radii by
one float32 spacing (2^-23), compounded along a path of such layers."""

BOUNDS = ("local_bound", "e2e_bound", "e2e_max_bound", "sensitivity")
RATIOS = ("local_ratio", "local_median_ratio", "e2e_ratio", "e2e_median_ratio", "suspicion")


def both(model, ir, **options):
    """The reports of the fast and the reference path."""
    fast = ncet.check_exactness(model, ir, **options)
    with fast_paths.reference_path():
        reference = ncet.check_exactness(model, ir, **options)
    assert fast_paths.FAST_PATHS, "reference_path() left the switch off"
    return fast, reference


def assert_related(fast: float, reference: float, looser: float, what: str) -> None:
    """reference (1 - 2^-40) <= fast <= reference (1 + looser), or both the same NaN/inf."""
    if not (math.isfinite(fast) and math.isfinite(reference)) or reference == 0:
        assert fast == reference or (math.isnan(fast) and math.isnan(reference)), what
        return
    assert reference * (1 - FLOAT64_ROUNDING) <= fast <= reference * (1 + looser), \
        (what, fast, reference)


def assert_same_reports(fast, reference, float32_dots: bool) -> None:
    looser = FLOAT32_ROUNDING_UP if float32_dots else FLOAT64_ROUNDING
    assert fast.ok == reference.ok
    first = [getattr(r.first_violation, "name", None) for r in (fast, reference)]
    assert first[0] == first[1], first
    assert fast.unchecked == reference.unchecked
    assert fast.suspicious == reference.suspicious
    assert fast.traced_differs == reference.traced_differs
    assert len(fast.entries) == len(reference.entries)
    for a, b in zip(fast.entries, reference.entries):
        for field in dataclasses.fields(a):
            x, y, what = getattr(a, field.name), getattr(b, field.name), f"{a.name}.{field.name}"
            if field.name in BOUNDS:
                assert_related(x, y, looser, what)
            elif field.name in RATIOS:  # error / bound, the errors identical
                assert_related(y, x, looser, what)
            else:
                assert x == y or (x != x and y != y), (what, x, y)
    for a, b in zip(fast.outputs, reference.outputs, strict=True):
        assert (a.name, a.max_error, a.violations, a.traced_differs, a.checked) == \
            (b.name, b.max_error, b.violations, b.traced_differs, b.checked)
        assert_related(a.bound, b.bound, looser, f"output {a.name}.bound")
        assert_related(b.ratio, a.ratio, looser, f"output {a.name}.ratio")


def test_the_switch_selects_the_route():
    from ncet.exactness.bounds import ReferenceBounds
    from ncet.exactness.scratch import Scratch

    arithmetic = ncet.exactness.arithmetic.read_arithmetic_model()
    assert isinstance(fast_paths.bounds_for({}, {}, arithmetic, Scratch()),
                      fast_paths.FastBounds)
    with fast_paths.reference_path():
        assert isinstance(fast_paths.bounds_for({}, {}, arithmetic, Scratch()),
                          ReferenceBounds)
    assert isinstance(fast_paths.bounds_for({}, {}, arithmetic, Scratch()),
                      fast_paths.FastBounds)


def has_float32_dots(ir) -> bool:
    return any(n.op_type in ("Linear", "Conv2d") and n.dtype == "float32" for n in ir.nodes)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", [name for name, e in EXAMPLES.items() if e.converts])
def test_bundled_models_give_the_same_report_on_both_paths(name, dtype):
    example = EXAMPLES[name]
    model = example.build().to(dtype)
    ir = ncet.convert(model, *example.input_shapes, dtype=dtype)
    fast, reference = both(model, ir, samples_per_scale=8)
    assert fast.ok
    assert_same_reports(fast, reference, has_float32_dots(ir))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_every_fused_rule_gives_the_same_report_on_both_paths(dtype):
    model = EveryFusedRule().eval().to(dtype)
    ir = ncet.convert(model, (2, 4, 4), dtype=dtype)
    fast, reference = both(model, ir, samples_per_scale=6)
    assert {e.op_type for e in fast.entries} >= {"BatchNorm", "LeakyReLU", "Add", "Sub",
                                                   "ElementwiseAffine", "Linear", "Conv2d"}
    assert_same_reports(fast, reference, has_float32_dots(ir))


@pytest.mark.parametrize(("fault", "dtype", "node"), FAULTS[::3])
def test_seeded_faults_are_found_at_the_same_node_on_both_paths(fault, dtype, node):
    model = zoo(dtype)
    faulty = fault(ncet.convert(model, (3, 6, 8), dtype=dtype))
    fast, reference = both(model, faulty, samples_per_scale=4)
    assert not fast.ok and fast.first_violation.name == node
    assert_same_reports(fast, reference, has_float32_dots(faulty))


@settings(max_examples=25, deadline=None)
@given(program=programs(accepted_only=True))
def test_random_models_give_the_same_report_on_both_paths(program):
    note(repr(program))
    model = build(program)
    ir = ncet.convert(model, *program.shapes, dtype=program.dtype)
    fast, reference = both(model, ir, samples_per_scale=4)
    assert_same_reports(fast, reference, has_float32_dots(ir))


def test_reference_path_holds_for_its_own_thread_only():
    """Found by review: the switch was a module global, so another thread's check took the
    reference path meanwhile, and overlapping blocks left it off for good."""
    import threading

    inside, release, seen = threading.Event(), threading.Event(), {}

    def holder():
        with fast_paths.reference_path():
            seen["holder"] = fast_paths.fast_paths_on()
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    inside.wait(10)
    seen["other"] = fast_paths.fast_paths_on()  # this thread, while the holder is inside
    outer = fast_paths.reference_path()
    outer.__enter__()
    release.set()
    thread.join(10)
    seen["overlapping"] = fast_paths.fast_paths_on()
    outer.__exit__(None, None, None)
    assert seen == {"holder": False, "other": True, "overlapping": False}
    assert fast_paths.fast_paths_on() and fast_paths.FAST_PATHS
