"""ExactnessReport's per-element samples, held against PyTorch eager values as the oracle:
the value sample is the model's own intermediate values at the sampled elements, the output
error sample is |eager output - float64 evaluate| there; sizes are bounded and the choice is
deterministic for a seed."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

import ncet
from ncet.exactness.enclosure import enclose
from ncet.exactness.stats import sample_indices
from ncet.examples import load_example

CHUNK = 40  # 96 generated samples: chunks of 40, 40 and 16


def chunks(x: torch.Tensor):
    return [x[i:i + CHUNK] for i in range(0, x.shape[0], CHUNK)]


def eager_module_outputs(model: nn.Module, paths: list[str], x: torch.Tensor):
    """Each module's eager outputs on `x`, run chunk by chunk like check_exactness (float32
    results depend on the batch size)."""
    seen: dict[str, list[torch.Tensor]] = {p: [] for p in paths}
    hooks = [model.get_submodule(p).register_forward_hook(
        lambda m, args, out, p=p: seen[p].append(out.detach().clone())) for p in paths]
    try:
        with torch.no_grad():
            outputs = torch.cat([model(c) for c in chunks(x)])
    finally:
        for h in hooks:
            h.remove()
    return {p: torch.cat(v) for p, v in seen.items()}, outputs


@pytest.fixture(scope="module")
def residual():
    model, shapes = load_example("residual_cnn")
    ir = ncet.convert(model, *shapes)
    x = ncet.exactness.check.generate_inputs(ir)[0][0]
    report = ncet.check_exactness(model, ir, x, chunk_size=CHUNK, seed=3)
    return model, ir, x, report


def test_value_sample_is_the_eager_models_value(residual):
    model, ir, x, report = residual
    modules = {n.name: n.source.module_path for n in ir.nodes
               if n.source is not None and n.source.fx_op == "call_module"}
    assert len(modules) > 10
    eager, _ = eager_module_outputs(model, list(modules.values()), x)
    for name, path in modules.items():
        t, r = report.value_sample(name)
        idx = report.value_sample_indices(name)
        assert t.dtype == r.dtype == torch.float64 and t.shape == r.shape == idx.shape
        assert torch.equal(t, eager[path].reshape(-1)[idx].to(torch.float64)), name


def test_value_sample_reference_is_the_float64_reference_graph(residual):
    _, ir, x, report = residual
    per_chunk = [enclose(ir, c) for c in chunks(x)]
    for node in ir.nodes:
        if node.op_type == "Output":
            continue
        reference = torch.cat([e[node.name][0] for e in per_chunk]).reshape(-1)
        _, r = report.value_sample(node.name)
        assert torch.equal(r, reference[report.value_sample_indices(node.name)]), node.name
    t, r = report.value_sample(ir.inputs[0].name)
    assert torch.equal(t, r) and torch.equal(t, x.reshape(-1)[
        report.value_sample_indices(ir.inputs[0].name)].double())


def test_output_error_sample_is_eager_against_evaluate(residual):
    model, ir, x, report = residual
    _, eager = eager_module_outputs(model, [], x)
    reference = torch.cat([ncet.evaluate(ir, c) for c in chunks(x)])
    name = ir.outputs[0]
    idx = report.output_error_sample_indices(name)
    expected = (eager.double() - reference).abs().reshape(-1)[idx]
    assert torch.equal(report.output_error_sample(name), expected)
    assert torch.equal(report.output_error_sample(), expected)
    assert idx.numel() == eager.numel() == 960  # fewer than 4096: every element
    assert torch.equal(idx, torch.arange(960))
    assert float(expected.max()) == report.outputs[0].max_error


def test_samples_are_bounded_and_deterministic(residual):
    model, ir, x, report = residual
    for name in ("stem_0", "fc"):
        assert report.value_sample_indices(name).numel() == min(256, x.shape[0] * math.prod(
            ir.node(name).shape))
    idx = report.value_sample_indices("stem_0")
    assert bool((idx[1:] > idx[:-1]).all()) and 0 <= int(idx[0])
    assert int(idx[-1]) < x.shape[0] * math.prod(ir.node("stem_0").shape)
    first, again = (ncet.check_exactness(model, ir, x[:12], seed=3) for _ in range(2))
    other = ncet.check_exactness(model, ir, x[:12], seed=4, keep_samples=7)
    for name in ("stem_0", "block2_conv1", "fc"):
        assert torch.equal(again.value_sample_indices(name), first.value_sample_indices(name))
        assert all(torch.equal(a, b) for a, b in zip(again.value_sample(name),
                                                     first.value_sample(name)))
        assert other.value_sample_indices(name).numel() == 7
    assert not torch.equal(other.value_sample_indices("stem_0"),
                           first.value_sample_indices("stem_0")[:7])
    none = ncet.check_exactness(model, ir, x[:8], keep_samples=0)
    with pytest.raises(KeyError, match="stem_0"):
        none.value_sample("stem_0")
    assert none.output_error_sample().numel() == 80  # always kept


def test_memory_does_not_grow_with_the_samples():
    model = nn.Sequential(nn.Linear(64, 1100), nn.ReLU(), nn.Linear(1100, 1100))
    ir = ncet.convert(model, (64,))
    sizes = []
    for samples in (4, 40):
        x = torch.randn(samples, 64, generator=torch.Generator().manual_seed(0))
        report = ncet.check_exactness(model, ir, x, chunk_size=16)
        stored = sum(t.numel() for v in report.value_samples.values() for t in v)
        sizes.append((stored, report.output_error_sample().numel()))
    assert sizes[0] == sizes[1] == (3 * 256 * 4, 4096)


def test_unknown_names_raise_key_error_naming_them(residual):
    report = residual[3]
    with pytest.raises(KeyError, match="'no_such_node'"):
        report.value_sample("no_such_node")
    with pytest.raises(KeyError, match="'stem_0'"):
        report.output_error_sample("stem_0")  # a node, not an output


def test_report_stays_frozen(residual):
    report = residual[3]
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.value_samples = {}
    with pytest.raises(TypeError):
        report.value_samples["stem_0"] = ()
    t, _ = report.value_sample("stem_0")
    t.zero_()  # callers get copies
    assert not torch.equal(report.value_sample("stem_0")[0], t)


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        y = self.fc(x)
        return y.relu(), y * 2.0


def test_several_outputs_are_concatenated_in_order():
    model = TwoOutputs().eval()
    ir = ncet.convert(model, (3,))
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    report = ncet.check_exactness(model, ir, x)
    with torch.no_grad():
        eager = model(x)
    reference = ncet.evaluate(ir, x)
    parts = [(e.double() - r).abs().reshape(-1) for e, r in zip(eager, reference)]
    assert torch.equal(report.output_error_sample(), torch.cat(parts))
    assert torch.equal(report.output_error_sample(ir.outputs[1]), parts[1])


def test_without_end_to_end_the_reference_is_nan():
    model, shapes = load_example("mlp")
    report = ncet.check_exactness(model, ncet.convert(model, *shapes), end_to_end=False,
                                  samples_per_scale=4)
    name = report.entries[0].name
    t, r = report.value_sample(name)
    assert bool(torch.isfinite(t).all()) and bool(torch.isnan(r).all())
    assert bool(torch.isnan(report.output_error_sample()).all())


@pytest.mark.parametrize(("total", "k"), [(0, 5), (3, 5), (5, 5), (6, 5), (10 ** 9, 256)])
def test_sample_indices_are_stratified(total, k):
    idx = sample_indices(total, k, torch.Generator().manual_seed(0))
    assert idx.numel() == min(total, k) and idx.dtype == torch.int64
    if total <= k:
        assert torch.equal(idx, torch.arange(total))
    else:  # one index in each of k equal strata
        edges = torch.arange(k + 1) * total // k
        assert bool((edges[:-1] <= idx).all()) and bool((idx < edges[1:]).all())
