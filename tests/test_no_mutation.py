"""No NCET call changes the user's model: parameters, buffers, attributes, flags, hooks, RNG
state."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from ncet.examples import load_example


class Mutator(nn.Module):
    """Every kind of node that could write to the model if it were run carelessly."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)  # training mode: would update running statistics
        self.drop = nn.Dropout(0.5)  # training mode: would draw from the global RNG
        self.relu = nn.ReLU(inplace=True)
        self.register_buffer("buf", torch.ones(4))
        self.weight = nn.Parameter(torch.full((4, 4), 0.5))

    def forward(self, x):
        y = self.relu(self.drop(self.bn(x)))
        self.buf.add_(1.0)  # in-place on a buffer
        torch.add(y, 1.0, out=self.buf)  # out= into a buffer
        y = F.linear(y, self.weight.mul_(2.0))  # in-place on a parameter
        return F.dropout(y) + self.buf


def snapshot(model: nn.Module) -> dict:
    return {
        "state": {k: (v.dtype, v.detach().clone()) for k, v in model.state_dict().items()},
        "training": [(n, m.training) for n, m in model.named_modules()],
        "attributes": [(n, sorted(vars(m))) for n, m in model.named_modules()],
        "requires_grad": [(n, p.requires_grad) for n, p in model.named_parameters()],
        "hooks": [(n, dict(m._forward_hooks), dict(m._forward_pre_hooks))
                  for n, m in model.named_modules()],
        "rng": torch.random.get_rng_state(),
        "grad_enabled": torch.is_grad_enabled(),
    }


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The raw bytes of a tensor, so -0.0 and NaN payloads count as changes too."""
    flat = tensor.detach().reshape(-1)
    return flat.view(torch.uint8) if flat.dtype.is_floating_point else flat


def assert_same(before: dict, after: dict) -> None:
    assert before["state"].keys() == after["state"].keys()
    for key, (dtype, value) in before["state"].items():
        dtype_after, value_after = after["state"][key]
        assert dtype == dtype_after, key
        assert torch.equal(bits(value), bits(value_after)), f"{key} changed"
    for field in ("training", "attributes", "requires_grad", "hooks", "grad_enabled"):
        assert before[field] == after[field], field
    assert torch.equal(before["rng"], after["rng"]), "the global RNG state changed"


def run_everything(model, shapes):
    report = ncet.diagnose(model, *shapes)
    try:
        ir = ncet.convert(model, *shapes)
    except ncet.ConversionError:
        return report
    x = [torch.randn(3, *s, generator=torch.Generator().manual_seed(1)) for s in shapes]
    ncet.evaluate(ir, *x)
    checked = ncet.check_exactness(model, ir, samples_per_scale=3)
    if any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        # hooks are not part of the GraphIR: never certified, but no violation either
        assert checked.first_violation is None and checked.unchecked, checked.summary()
    else:
        assert checked.ok, checked.summary()
    return report


@pytest.mark.parametrize("name", ["mlp", "lenet", "residual_cnn", "training_mode_cnn",
                                  "many_problems", "sigmoid_mlp"])
def test_examples_untouched(name):
    model, shapes = load_example(name)
    for module in model.modules():
        module.register_forward_hook(lambda *args: None)
    before = snapshot(model)
    run_everything(model, shapes)
    assert_same(before, snapshot(model))


def test_model_that_would_write_to_itself_is_untouched():
    model = Mutator().train()
    before = snapshot(model)
    report = run_everything(model, [(4,)])
    assert not report.ok
    assert {"batch-norm-training", "dropout-training", "inplace", "out-argument"} <= {
        r.code for r in report.errors}
    assert_same(before, snapshot(model))


class MakesTensors(nn.Module):
    """Tensors made inside forward(): FX would store each on the model as
    `_tensor_constant<i>`, one more on every trace."""

    def forward(self, x):
        return x * torch.full((4,), 0.5) + torch.ones(4)


def test_tensors_made_in_forward_are_not_stored_on_the_model():
    model = MakesTensors()
    before = snapshot(model)
    for _ in range(2):
        run_everything(model, [(4,)])
    assert_same(before, snapshot(model))
    assert sorted(ncet.convert(model, (4,)).constants) == ["_tensor_constant0",
                                                          "_tensor_constant1"]


def test_constants_are_copies():
    model, shapes = load_example("mlp")
    ir = ncet.convert(model, *shapes)
    weight = model.layers[0].weight
    lifted = ir.constants["layers.0.weight"]
    assert torch.equal(lifted, weight) and lifted.data_ptr() != weight.data_ptr()
    assert not lifted.requires_grad
    with torch.no_grad():
        weight.add_(1.0)
    assert not torch.equal(ir.constants["layers.0.weight"], weight)


# --- global state and buffers the model's own code changes --------------------------------


class Reseeds(nn.Module):
    """forward() reseeds and draws from the global RNG and switches the grad mode: Python
    code that runs while FX traces, and again whenever the model runs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        torch.manual_seed(1234)
        torch.randn(8)
        torch.set_grad_enabled(True)
        return self.fc(x)


@pytest.mark.parametrize("grad", [True, False], ids=["grad on", "grad off"])
def test_rng_and_grad_mode_survive_a_forward_that_changes_them(grad):
    model = Reseeds().eval()
    with torch.set_grad_enabled(grad):
        before = snapshot(model)
        report = ncet.diagnose(model, (4,))
        assert report.ok, report.summary()
        ir = ncet.convert(model, (4,))
        ncet.check_exactness(model, ir, samples_per_scale=3)
        assert_same(before, snapshot(model))
        assert torch.is_grad_enabled() == grad


def test_a_check_of_a_model_in_training_mode_leaves_its_buffers():
    """check_exactness runs the model itself: a training-mode BatchNorm updates its running
    statistics, spectral_norm its power-iteration vectors. Both are put back."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU()).eval()
    ir = ncet.convert(model, (4,))
    nn.utils.spectral_norm(model[0])  # after convert, which refuses it (weight-hook)
    model.train()
    before = snapshot(model)
    ncet.check_exactness(model, ir, samples_per_scale=3)
    assert_same(before, snapshot(model))


class FailsEagerly(nn.Module):
    """Traces (FX passes a Proxy), but its own forward() raises after its BatchNorm ran."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        y = self.bn(x)
        if not isinstance(x, torch.fx.Proxy):
            raise RuntimeError("fails after the BatchNorm updated its statistics")
        return y


def test_buffers_are_restored_when_the_check_raises():
    torch.manual_seed(0)
    model = FailsEagerly().eval()
    ir = ncet.convert(model, (4,))
    model.train()  # the BatchNorm now updates its running statistics on every call
    x = torch.randn(5, 4) * 10 + 3
    before = snapshot(model)
    with pytest.raises(ValueError, match="forward\\(\\) fails"):
        ncet.check_exactness(model, ir, x)
    assert_same(before, snapshot(model))


# --- hooks and the user's own functions ----------------------------------------------------

WRAPPED_CALLS: list[str] = []


def logs_and_passes(x):
    """A function of the user's own, recorded by FX as one call (torch.fx.wrap): outside
    the spelling tables, so rejected, and it must not run."""
    WRAPPED_CALLS.append("ran")
    return x


torch.fx.wrap("logs_and_passes")


class CallsWrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return logs_and_passes(self.fc(x)).relu()


def test_a_rejected_wrapped_function_is_never_run():
    WRAPPED_CALLS.clear()
    model = CallsWrapped().eval()
    report = ncet.diagnose(model, (4,))
    assert [(r.fx_name, r.code) for r in report.errors] == [("logs_and_passes",
                                                             "unsupported-function")]
    assert {r.fx_name: r.status for r in report.rows}["relu"] == "skipped"
    with pytest.raises(ncet.UnsupportedOperatorError) as caught:
        ncet.convert(model, (4,))
    assert caught.value.code == "unsupported-function"
    assert WRAPPED_CALLS == []


def hooked_model(seen: list) -> nn.Module:
    """Hooks that store what they see on every module: leaves (Linear, ReLU) and modules FX
    traces through (the inner Sequential, the model)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2))).eval()
    for name, module in model.named_modules():
        module.register_forward_pre_hook(lambda m, args, name=name: seen.append(("pre", name)))
        module.register_forward_hook(
            lambda m, args, out, name=name: seen.append(("post", name, out.detach().cpu())))
    return model


def test_hooks_do_not_run_in_convert_or_diagnose():
    """Hooks are not part of the trace and shape propagation calls forward() alone: a hook
    that stores activations sees nothing (and never a Proxy), and its detach().cpu() is not
    recorded as a node to reject."""
    seen: list = []
    model = hooked_model(seen)
    before = snapshot(model)
    report = ncet.diagnose(model, (4,))
    assert report.ok, report.summary()
    ir = ncet.convert(model, (4,))
    assert seen == []
    assert_same(before, snapshot(model))
    report = ncet.check_exactness(model, ir, samples_per_scale=2)
    assert seen, "check_exactness calls the model, so its hooks run there"
    # storing hooks change nothing on the samples, but what a hook does is not certified
    assert report.first_violation is None and not report.traced_differs
    assert not report.ok and report.summary().startswith("NOT CERTIFIED")
    assert_same(before, snapshot(model))


def parametrized_model() -> nn.Module:
    """New-style parametrizations: spectral_norm keeps power-iteration buffers (`_u`, `_v`)
    that a training-mode call updates; weight_norm splits the weight into two parameters;
    a plain parametrization of the user's own. Parametrized modules are outside the
    spelling tables (a type of their own), so convert rejects them, but diagnose runs each
    on example inputs."""

    class Symmetric(nn.Module):
        def forward(self, w):
            return (w + w.T) / 2

    torch.manual_seed(0)
    model = nn.Sequential(nn.utils.parametrizations.spectral_norm(nn.Linear(4, 4)),
                          nn.ReLU(), nn.utils.parametrizations.weight_norm(nn.Linear(4, 4)),
                          nn.Linear(4, 4))
    nn.utils.parametrize.register_parametrization(model[3], "weight", Symmetric())
    return model


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_parametrizations_are_untouched(training):
    model = parametrized_model().train(training)
    before = snapshot(model)
    report = ncet.diagnose(model, (4,))  # runs each parametrized module on example inputs
    assert [(r.fx_name, r.code) for r in report.errors] == [
        ("_0", "unsupported-module"), ("_2", "unsupported-module"), ("_3", "unsupported-module")]
    with pytest.raises(ncet.UnsupportedOperatorError):
        ncet.convert(model, (4,))
    assert_same(before, snapshot(model))
    assert [(n, type(m).__name__) for n, m in model.named_modules()] == [
        (n, type(m).__name__) for n, m in parametrized_model().named_modules()]


def test_global_module_hooks_do_not_run_in_convert_or_diagnose():
    """Hooks registered for every module (torch.nn.modules.module.register_module_*) are
    not part of the trace either."""
    seen: list = []
    handles = [nn.modules.module.register_module_forward_pre_hook(
                   lambda m, args: seen.append(type(m).__name__)),
               nn.modules.module.register_module_forward_hook(
                   lambda m, args, out: seen.append(type(m).__name__))]
    try:
        model, shapes = load_example("residual_cnn")
        ncet.diagnose(model, *shapes)
        ncet.convert(model, *shapes)
    finally:
        for handle in handles:
            handle.remove()
    assert seen == []


def _fresh(tool):
    torch.manual_seed(0)
    return nn.Sequential(tool(nn.Linear(4, 4)), nn.ReLU()).eval()


def _pruned(model):
    torch.nn.utils.prune.l1_unstructured(model, "weight", 0.5)
    return model


class _UsesItsWeight(nn.Module):
    """A module FX traces through that reads its own weight: `F.linear(x, self.weight)`."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return F.linear(x, self.weight)


# (case, model with a weight-computing pre-hook, node rejected, the fix the hint names)
WEIGHT_HOOK_CASES = [
    ("spectral_norm", lambda: _fresh(nn.utils.spectral_norm), "_0",
     lambda m: nn.utils.remove_spectral_norm(m[0])),
    ("weight_norm", lambda: _fresh(nn.utils.weight_norm), "_0",
     lambda m: nn.utils.remove_weight_norm(m[0])),
    ("prune", lambda: _fresh(_pruned), "_0",
     lambda m: torch.nn.utils.prune.remove(m[0], "weight")),
    ("weight_norm, traced through", lambda: _fresh(lambda m: nn.utils.weight_norm(
        _UsesItsWeight())), "_0_weight", lambda m: nn.utils.remove_weight_norm(m[0])),
]


@pytest.mark.filterwarnings("ignore::FutureWarning")  # the old-style tools are deprecated
@pytest.mark.parametrize(("build", "node", "fix"), [c[1:] for c in WEIGHT_HOOK_CASES],
                         ids=[c[0] for c in WEIGHT_HOOK_CASES])
def test_a_weight_a_pre_hook_recomputes_is_refused_until_fixed(build, node, fix):
    """The module's weight attribute holds only what the last eager call cached (for a fresh
    spectral_norm, the unnormalised weight), and NCET runs no hooks: refused, with the call
    that stores the weight; after it, the model converts and is exact against the model as
    it was (the hook's own output is the oracle)."""
    model = build()
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = model(x)  # the hooked model, as its author runs it
    with pytest.raises(ncet.SupportBoundaryError) as caught:
        ncet.convert(model, (4,))
    assert (caught.value.code, caught.value.node) == ("weight-hook", node)
    assert "remove" in caught.value.hint
    fix(model)
    ir = ncet.convert(model, (4,))
    assert ncet.check_exactness(model, ir, x).ok
    with torch.no_grad():
        assert torch.allclose(ncet.evaluate(ir, x, dtype=torch.float32), expected, atol=1e-6)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()


@pytest.mark.parametrize("register", [
    lambda block: block.register_forward_hook(lambda m, args, out: out + 1.0),
    lambda block: block.register_forward_pre_hook(lambda m, args: (args[0] * 2.0,)),
], ids=["forward hook", "pre-hook"])
def test_a_hook_that_changes_outputs_is_caught_by_the_check(register):
    """Hooks are not part of the graph: convert gives forward()'s graph, and the check,
    which runs the model with its hooks, fails and says that hooks may be why."""
    torch.manual_seed(0)
    model = nn.Sequential(_Block(), nn.Linear(4, 2)).eval()
    register(model[0])
    report = ncet.check_exactness(model, ncet.convert(model, (4,)), samples_per_scale=2)
    assert not report.ok and report.traced_differs
    assert "forward hook" in report.summary()
