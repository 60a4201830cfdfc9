"""Smoke test of benchmarks/scale.py at tiny sizes: it runs and its JSON has every key.

No timing is asserted: speed is measured by the benchmark itself, on demand.
"""

from __future__ import annotations

import copy
import json

import torch

import ncet
from benchmarks import scale
from ncet.canonicalize import STAGES, canonicalize


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
                       "--memory-nodes", "0", "--samples", "4", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result) == {"machine", "settings", "conversion", "evaluation", "memory", "fits"}
    assert [r["model"] for r in result["conversion"]] == ["mlp", "mlp", "resnet", "resnet"]
    for row in result["conversion"]:
        for key in ("nodes", "floor_s", "convert_s", "diagnose_s", "convert_over_floor",
                    "diagnose_over_convert", "convert_us_per_node", "floor_wall_s",
                    "convert_wall_s", *(f"stage_us_per_node/{s}" for s in STAGES)):
            assert row[key] > 0 or key.startswith("stage_"), (key, row[key])
    assert len(result["evaluation"]) == 4
    for row in result["evaluation"]:
        for key in ("evaluate_throughput_ratio/b1", "evaluate_throughput_ratio/b256",
                    "check_over_floor", "save_s", "load_s", "torch_save_s", "file_bytes",
                    "torch_save_bytes"):
            assert row[key] > 0, key
    assert set(result["fits"]) == {"mlp", "resnet"}
    assert "convert against its floor" in capsys.readouterr().out
