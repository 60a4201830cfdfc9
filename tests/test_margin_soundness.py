"""float_margin's soundness, tested rather than assumed (issue 34): for every corpus network
that imports and its first property, no deviation |f_float - f_exact| that a search finds
and proves (`find_deviation`: the region's corners, random points, gradient ascent on the
output's magnitude, perturbations of the worst points; PyTorch and the deployed ONNX file
in onnxruntime) exceeds eps; also with PyTorch's kernels capped to AVX2 on one thread; and a
bound with a term dropped (a seeded bug) is caught by the same search. CI budgets are
small; benchmarks/margin.py searches harder (docs/margins.md)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ncet
from ncet.regions.deviation import find_deviation
from tests.corpus import corpus_networks, corpus_root, first_property

pytest.importorskip("onnxruntime")

SEARCH = {"samples": 48, "ascent_steps": 4}
"""The CI search budget per property (benchmarks/margin.py uses far more)."""

SMALL_SEARCH = dict.fromkeys(("yolo/onnx/TinyYOLO.onnx",  # 21,125 outputs
                              "cifar_biasfield/onnx/cifar_bias_field_8.onnx",
                              "metaroom/onnx/4cnn_ry_111_18_no_custom_OP.onnx"),
                             {"samples": 16, "ascent_steps": 2})
"""Smaller budgets for the networks whose search takes 30-50 s with SEARCH."""

_NARROW = ({"max_rows": 0}, "the defaults need over 6 GB")
MARGIN_OPTIONS: dict[str, tuple[dict, str]] = {
    **dict.fromkeys((
        "cifar10_resnet/onnx/resnet_2b.onnx", "cifar10_resnet/onnx/resnet_4b.onnx",
        "cifar_biasfield/onnx/cifar_bias_field_8.onnx",
        "marabou-cifar10/nets/cifar10_large.onnx", "marabou-cifar10/nets/cifar10_medium.onnx",
        "marabou-cifar10/nets/cifar10_small.onnx", "oval21/onnx/cifar_base_kw.onnx",
        "oval21/onnx/cifar_deep_kw.onnx", "oval21/onnx/cifar_wide_kw.onnx",
        "sri_resnet_a/onnx/resnet_3b2_bn_mixup_adv_4.0_bs128_lr-1.onnx",
        "verivital/Convnet_avgpool.onnx"), _NARROW),
    "tllverifybench/onnx/tllBench_n=2_N=M=16_m=1_instance_1_0.onnx": (
        {"max_rows": 0}, "the defaults take 161 s"),
    "nn4sys/onnx/lindex.onnx": ({"splits": 2}, "200 boxes took 87 s"),
}
"""float_margin's options in CI (and why) where its defaults take more memory or time than
CI has, measured on the 2-core development machine: max_rows=0 is the same bound with
interval values and |W|-product errors at every node (sound, looser). benchmarks/margin.py
uses the defaults."""

CI_SPLITS = 64
"""Pieces per box in CI for the networks float_margin splits (inputs of at most
SPLIT_DIMENSIONS elements): its automatic 2,048 take 15-75 s on ACAS Xu here; fewer pieces
give the same bound on larger boxes (looser, and as much a test of soundness)."""

CAPPED = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
          "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1"}
"""PyTorch's kernels capped to AVX2 on one thread (the Makefile's PORTABLE run)."""

CAPPED_NETWORKS = ("acasxu/onnx/ACASXU_run2a_1_1_batch_2000.onnx",
                   "mnist_fc/onnx/mnist-net_256x2.onnx", "reach_prob_density/onnx/vdp.onnx",
                   "verivital/Convnet_maxpool.onnx")

REPO = Path(__file__).resolve().parent.parent


def region_of(prop: ncet.Property):
    """The property's region, or, when a zero-width decimal bound leaves a box without any
    float32 point, its boxes rounded outward to float32 (the float32 points the deployed
    network can be fed there), as a list of (lower, upper) pairs."""
    inward = prop.input_boxes_as(np.float32, "inward")
    if all((lo <= hi).all() for lo, hi in inward):
        return prop
    return [tuple(box) for box in prop.input_boxes_as(np.float32, "outward")]


def corpus_case(network: str):
    """(GraphIR, region, property path) for a network that imports and has a property and
    a margin here; None otherwise."""
    root = corpus_root()
    prop_path = first_property(network)
    report = ncet.diagnose_onnx(root / network)
    if prop_path is None or not report.ok:
        assert report.ok or report.errors  # refused ones name their problems
        return None
    return report.graph, region_of(ncet.read_vnnlib(root / prop_path)), prop_path


def violations(network: str) -> list[str]:
    """Every output whose proven deviation exceeds eps, as one message each (network,
    property, output, deviation, eps, the point and the runtime); [] when sound."""
    case = corpus_case(network)
    if case is None:
        return []
    ir, region, prop_path = case
    from ncet.regions.margin import SPLIT_DIMENSIONS

    small = math.prod(ir.inputs[0].shape) <= SPLIT_DIMENSIONS
    options = MARGIN_OPTIONS.get(network, ({"splits": CI_SPLITS} if small else {}, ""))[0]
    margin = ncet.float_margin(ir, region, **options)
    found = find_deviation(ir, region, onnx_file=corpus_root() / network,
                           **SMALL_SEARCH.get(network, SEARCH))
    assert margin.num_outputs == found.num_outputs, (network, margin, found)
    over = (found.deviation > margin.eps).nonzero().reshape(-1).tolist()
    return [f"{network} with {prop_path}: output Y_{j} deviates by {found.deviation[j]:.6g} "
            f"({found.runtimes[j]}, exact value by {found.exact[j]}) > eps "
            f"{margin.eps[j]:.6g}, at x = {found.points[j].tolist()[:8]}..." for j in over]


@pytest.mark.parametrize("network", corpus_networks())
def test_no_deviation_found_exceeds_the_float_margin(network):
    failures = violations(network)
    assert not failures, "\n".join(failures)


def test_no_deviation_found_exceeds_the_margin_with_avx2_kernels_on_one_thread():
    corpus_root()
    code = ("import json, sys; from tests.test_margin_soundness import violations; "
            "print(json.dumps({n: violations(n) for n in sys.argv[1:]}))")
    env = {**os.environ, **CAPPED, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, *CAPPED_NETWORKS], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(found) == sorted(CAPPED_NETWORKS)
    failures = [line for lines in found.values() for line in lines]
    assert not failures, "\n".join(failures)


SEEDED_NETWORKS = ("mnist_fc/onnx/mnist-net_256x2.onnx", "reach_prob_density/onnx/vdp.onnx")
"""Networks of Linear and ReLU nodes only: without the Linear nodes' own rounding, their
bound has nothing left to cover the float32 error with."""


@pytest.mark.parametrize("network", SEEDED_NETWORKS)
def test_a_bound_without_the_linear_roundings_is_caught_by_the_search(network, monkeypatch):
    """The issue's seeded bug: a dropped term (every Linear node's own rounding bound) in
    float_margin. The same search and budget as above then find a deviation above eps."""
    from ncet.regions import margin as margin_module

    assert not violations(network), "the sound bound holds"
    original = margin_module.rounding_bound

    def dropped(state, errors, node, dtypes):
        return 0.0 if node.op_type == "Linear" else original(state, errors, node, dtypes)
    monkeypatch.setattr(margin_module, "rounding_bound", dropped)
    failures = violations(network)
    assert failures, f"{network}: a bound without the Linear roundings was not caught"
    assert all(network in line and "> eps" in line for line in failures)
