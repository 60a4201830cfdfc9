"""Smoke test of benchmarks/scale.py at tiny sizes: it runs and its JSON has every key.

No timing is asserted: speed is measured by the benchmark itself, on demand.
"""

from __future__ import annotations

import copy
import json
import mmap
import os
import subprocess
import sys

import pytest
import torch

import ncet
from benchmarks import eager_floor, memory, scale
from ncet.canonicalize import STAGES, canonicalize

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_models_convert_exactly_at_the_requested_size():
    for family, nodes in (("mlp", 60), ("resnet", 60)):
        model, shape = scale.build(family, nodes)
        traced = len(torch.fx.symbolic_trace(model).graph.nodes)
        assert abs(traced - nodes) <= 13, (family, traced)
        ir = ncet.convert(model, shape)
        x = scale.inputs(shape, 3, torch.float64)
        with torch.no_grad():
            expected = copy.deepcopy(model).double()(x)
        torch.testing.assert_close(ncet.evaluate(ir, x), expected)


def test_mlp_width_sets_the_layers_and_the_input():
    model, shape = scale.build("mlp", 30, mlp_width=96)
    assert shape == (96,)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.in_features for m in linears] == [96] * len(linears)
    assert linears[-1].out_features == 10
    ir = ncet.convert(model, shape)
    x = scale.inputs(shape, 3, torch.float64)
    with torch.no_grad():
        expected = copy.deepcopy(model).double()(x)
    torch.testing.assert_close(ncet.evaluate(ir, x), expected)


def _touch_mib(mib: int) -> None:
    """Map `mib` MiB of fresh anonymous memory, write one byte per page, unmap it: resident
    growth that neither glibc nor PyTorch can serve from memory they already hold."""
    size = mib * 2 ** 20
    with mmap.mmap(-1, size) as pages:
        for i in range(0, size, mmap.PAGESIZE):
            pages[i] = 1


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux peak reset")
def test_peak_growth_sees_an_allocation_after_an_earlier_peak():
    _touch_mib(96)  # an earlier 96 MiB peak, released before the calls
    assert memory.peak_growth_mib(lambda: None) < 16
    assert 40 < memory.peak_growth_mib(lambda: _touch_mib(48)) < 80


def test_memory_child_imports_as_a_package():
    # the child process runs `from benchmarks.scale import peak_child` at the repository root
    mib = scale.peak_memory("mlp", 30, 4, mlp_width=32)
    assert mib >= 0
    mib = memory.fresh_process_mib("import benchmarks.exactness; print(1.5)")
    assert mib == 1.5


@pytest.mark.parametrize("script", ["scale.py", "exactness.py", "eager_floor.py"])
def test_runs_as_a_script(script):
    # benchmarks/ itself, not the repository root, is on sys.path: the memory import must work
    out = subprocess.run([sys.executable, os.path.join(_ROOT, "benchmarks", script), "--help"],
                         capture_output=True, text=True, cwd="/", check=True)
    assert "usage:" in out.stdout


# (nodes, width, samples): a shallow MLP, and one deep enough that the end-to-end radii leave
# float32 and the check takes the float64 carry
_MINIMAL_CASES = [(21, 16, 32), (101, 32, 40), (301, 64, 16)]


@pytest.mark.parametrize("nodes,width,samples", _MINIMAL_CASES)
def test_minimal_check_computes_what_check_exactness_reports(nodes, width, samples):
    # the lower bound in eager_floor.py is only a bound if it does the check's arithmetic:
    # its largest ratios equal the report's, node by node, bit for bit
    model, shape = scale.build("mlp", nodes, mlp_width=width)
    ir = ncet.convert(model, shape)
    x = scale.inputs(shape, samples)
    got = eager_floor.minimal_check(model, eager_floor.prepare(model, ir), x)
    report = ncet.check_exactness(model, ir, x)
    assert got == {e.name: (e.local_ratio, e.e2e_ratio) for e in report.entries}
    if nodes > 200:
        assert max(e.e2e_bound for e in report.entries) > torch.finfo(torch.float32).max


def test_eager_floor_script_writes_its_rows(tmp_path):
    out = tmp_path / "floor.json"
    assert eager_floor.main(["--nodes", "21", "--widths", "8", "--samples", "4,8",
                             "--repeats", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["width"], r["samples"]) for r in rows] == [(8, 4), (8, 8)]
    assert all(r[k] > 0 for r in rows for k in ("products_over_floor", "minimal_over_floor",
                                                   "check_over_floor", "check_over_minimal",
                                                   "products_in_check_over_floor"))


def test_products_in_check_times_every_product_and_restores_linear():
    # per Linear: PyTorch's traced layer, the float64 layer node-locally and end to end, the
    # float32 magnitude and carry products, the eager forward; the first layer's inputs are
    # exact, so it has no end-to-end evaluation (it reuses the node-local one) and no carry
    model, shape = scale.build("mlp", 21, mlp_width=16)
    ir = ncet.convert(model, shape)
    linears = sum(n.op_type == "Linear" for n in ir.nodes)
    original = torch.nn.functional.linear
    seconds, calls = eager_floor.products_in_check(model, ir, scale.inputs(shape, 8))
    assert calls == 6 * linears - 2
    assert seconds > 0
    assert torch.nn.functional.linear is original


def test_stages_add_up_to_the_conversion():
    model, shape = scale.build("mlp", 40)
    stages: dict[str, float] = {}
    report = canonicalize(model, (shape,), torch.float32, first_error_only=True,
                          stages=stages)
    assert report.ok
    assert set(stages) == set(STAGES)
    assert all(seconds >= 0 for seconds in stages.values())
    assert stages["trace"] > 0 and stages["shape propagation"] > 0


def test_fit_exponent_recovers_a_power_law():
    rows = [{"nodes": n, "t": 3e-6 * n ** 1.25} for n in (500, 1000, 4000, 16000)]
    assert abs(scale.fit_exponent(rows, "t") - 1.25) < 1e-9
    assert scale.fit_exponent(rows[:2], "t") is None  # one point at >= 1,000 nodes


def test_script_writes_every_key(tmp_path, capsys):
    out = tmp_path / "scale.json"
    assert scale.main(["--sizes", "30,60", "--repeats", "1", "--export-max-nodes", "0",
                       "--memory-nodes", "0", "--samples", "4", "--mlp-width", "32",
                       "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result) == {"machine", "settings", "conversion", "evaluation", "memory", "fits"}
    assert result["settings"]["mlp_width"] == 32
    assert result["settings"]["samples"] == 4
    assert [r["model"] for r in result["conversion"]] == ["mlp", "mlp", "resnet", "resnet"]
    for row in result["conversion"]:
        for key in ("nodes", "floor_s", "convert_s", "diagnose_s", "convert_over_floor",
                    "diagnose_over_convert", "convert_us_per_node", "floor_wall_s",
                    "convert_wall_s", *(f"stage_us_per_node/{s}" for s in STAGES)):
            assert row[key] > 0 or key.startswith("stage_"), (key, row[key])
    assert len(result["evaluation"]) == 4
    for row in result["evaluation"]:
        assert row["samples"] == 4
        for key in ("evaluate_throughput_ratio/b1", "evaluate_throughput_ratio/b256",
                    "check_s", "check_floor_s", "check_over_floor", "check_s_10x",
                    "check_floor_s_10x", "check_over_floor_10x", "save_s", "load_s",
                    "torch_save_s", "file_bytes", "torch_save_bytes"):
            assert row[key] > 0, key
        for suffix in ("", "_10x"):
            assert row[f"check_over_floor{suffix}"] == pytest.approx(
                row[f"check_s{suffix}"] / row[f"check_floor_s{suffix}"])
    assert set(result["fits"]) == {"mlp", "resnet"}
    printed = capsys.readouterr().out
    assert "convert against its floor" in printed
    assert "mlp 32 wide" in printed and "c/f 10x" in printed
