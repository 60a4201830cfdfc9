"""The frontend's fast paths change only speed: with each switch on and off, conversions and
checks give identical results.

* `fake_shapes.FAKE_SHAPES`: a slow node's second-batch shape from fake tensors.
* `trace_cache.TRACE_CACHE`: `check_exactness(model, ir)` reusing convert's trace.
"""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

import ncet
import ncet.exactness.check as check_module
import ncet.frontend.fake_shapes as fake_shapes
import ncet.frontend.trace_cache as trace_cache
from ncet.examples import EXAMPLES, load_example


def _conversion(model, shapes, tmp_path, tag: str):
    """diagnose's rows, and the saved bytes of its GraphIR (None when it does not convert)."""
    report = ncet.diagnose(model, *shapes)
    if report.graph is None:
        return report.rows, None
    path = tmp_path / f"{tag}.ncet"
    ncet.save(report.graph, path)
    return report.rows, path.read_bytes()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_fake_shapes_on_forced_or_off_give_the_same_conversion(name, monkeypatch, tmp_path):
    model, shapes = load_example(name)
    monkeypatch.setattr(fake_shapes, "FAKE_SHAPES", False)
    reference = _conversion(model, shapes, tmp_path, "off")
    monkeypatch.setattr(fake_shapes, "FAKE_SHAPES", True)
    assert _conversion(model, shapes, tmp_path, "default") == reference
    monkeypatch.setattr(fake_shapes, "SHAPE_ONLY_AFTER_SECONDS", -1.0)  # every node
    assert _conversion(model, shapes, tmp_path, "forced") == reference
    assert reference[1] is not None or not EXAMPLES[name].converts


class SlowLeaf(nn.Module):
    """A leaf module (FX records a module of torch.nn as one call) whose forward() sleeps
    longer than SHAPE_ONLY_AFTER_SECONDS: at the first batch size it is always slow."""

    def forward(self, x):
        time.sleep(2 * fake_shapes.SHAPE_ONLY_AFTER_SECONDS)
        return torch.cat([x, x.flip(-1)], dim=-1)


SlowLeaf.__module__ = "torch.nn.modules.slow_leaf_for_tests"  # FX's test for a leaf


class WithSlowNode(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 4)
        self.slow = SlowLeaf()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.slow(self.fc1(x))))


def test_a_slow_node_takes_the_shape_only_path_with_the_same_rows(monkeypatch, tmp_path):
    calls = []
    real = fake_shapes.FakeShapes.output

    def counting(self, node, env, module):
        calls.append(node.name)
        return real(self, node, env, module)

    monkeypatch.setattr(fake_shapes.FakeShapes, "output", counting)
    model = WithSlowNode().eval()
    monkeypatch.setattr(fake_shapes, "FAKE_SHAPES", False)
    reference = ncet.diagnose(model, (6,))
    assert calls == []
    monkeypatch.setattr(fake_shapes, "FAKE_SHAPES", True)
    fast = ncet.diagnose(model, (6,))
    assert "slow" in calls  # its users downstream ran on zeros of the fake shape
    assert fast.rows == reference.rows
    by_name = {r.fx_name: r for r in reference.rows}
    assert by_name["slow"].code == "unsupported-module"  # not in the tables, but it ran
    assert by_name["fc2"].status == "mapped" and by_name["fc2"].shape == (3,)


def _same_reports(a, b) -> None:
    assert a == b
    for name in a.value_samples:
        for x, y in zip(a.value_samples[name], b.value_samples[name]):
            torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)
    for name in a.output_samples:
        for x, y in zip(a.output_samples[name], b.output_samples[name]):
            torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", sorted(n for n, e in EXAMPLES.items() if e.converts))
def test_trace_cache_on_or_off_gives_the_same_check(name, monkeypatch):
    traces = []
    real = check_module.trace_model

    def counting(model, n_inputs):
        traces.append(model)
        return real(model, n_inputs)

    monkeypatch.setattr(ncet.exactness.check, "trace_model", counting)
    model, shapes = load_example(name)
    ir = ncet.convert(model, *shapes)
    cached = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert traces == []  # the check ran convert's graph
    monkeypatch.setattr(trace_cache, "TRACE_CACHE", False)
    traced = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert traces == [model]  # the reference path: the model traced again
    _same_reports(cached, traced)
    assert cached.ok


def test_trace_cache_off_records_nothing(monkeypatch):
    model, shapes = load_example("mlp")
    monkeypatch.setattr(trace_cache, "TRACE_CACHE", False)
    ir = ncet.convert(model, *shapes)
    monkeypatch.setattr(trace_cache, "TRACE_CACHE", True)
    assert trace_cache.recorded_trace(ir, model) is None
