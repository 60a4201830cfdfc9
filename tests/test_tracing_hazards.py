"""Models whose eager behaviour differs from their FX trace: each is rejected by `convert` or
caught by `check_exactness` (docs/reliability.md lists the same table).

Verdicts:
  * "rejected <code>": `convert` raises a ConversionError with that code (at the named node,
    or at none when FX cannot trace the model at all);
  * "caught at the output": `convert` accepts the trace, every node agrees with the traced
    graph, and `check_exactness` reports the eager outputs outside the certified bound;
  * "caught at a node": as above, but PyTorch's own value of a node already breaks the bound
    (when convert's graph disagrees with the eager model, check_exactness traces again and
    re-runs the modules, so state that moved since `convert` shows at the node that reads
    it);
  * "agrees": eager and traced outputs are the same; nothing to catch.
"""

from __future__ import annotations

import functools
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from tests.conftest import model_unchanged


# --- aliasing through augmented assignment -------------------------------------------------
class AliasAugmented(nn.Module):
    """`y += 1` mutates the alias z eagerly; FX records an out-of-place add."""

    def forward(self, x):
        y = x * 1.0
        z = y
        y += 1.0
        return z * 2.0


class AliasViewAugmented(nn.Module):
    """A view taken before `y *= 3` sees the update eagerly, not in the trace."""

    def forward(self, x):
        y = x * 1.0
        z = y[:, :2]
        y *= 3.0
        return z + 0.0


class InputViewAugmented(nn.Module):
    """The same through a view of the input itself."""

    def forward(self, x):
        z = x[:, :2]
        x += 1.0
        return z * 1.0


class InputAugmentedReturned(nn.Module):
    """`x += 1` on the input, then returned: both give x + 1 (the caller's tensor is changed
    eagerly only, which GraphIR, a function of its inputs, does not model)."""

    def forward(self, x):
        x += 1.0
        return x


class SetItem(nn.Module):
    """Item assignment on an intermediate value."""

    def forward(self, x):
        y = x * 1.0
        y[:, 0] = 0.0
        return y


# --- Python-side state ---------------------------------------------------------------------
class CallCounter(nn.Module):
    """A counter attribute incremented in forward(): the trace bakes in one value."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * float(self.calls)


class ListAppend(nn.Module):
    """A Python list appended to in forward()."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append(1.0)
        return x * float(len(self.seen))


class Toggle(nn.Module):
    """A flag flipped in forward() selects the branch: each trace records the other one."""

    def __init__(self):
        super().__init__()
        self.flip = False

    def forward(self, x):
        self.flip = not self.flip
        return x if self.flip else x * -1.0


class RandomConstant(nn.Module):
    """torch.randn without traced arguments runs once at trace time: a frozen constant."""

    def forward(self, x):
        return x + torch.randn(4)


class RandomLike(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


class BufferUpdate(nn.Module):
    """A running statistic updated in place; NCET proxies buffers, so the trace does not
    change it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(4))

    def forward(self, x):
        self.count.add_(1.0)
        return x + self.count


class LeafHook(nn.Module):
    """A forward hook on a leaf module: FX records the call without the hook."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.fc.register_forward_hook(lambda module, args, out: out * 2.0)

    def forward(self, x):
        return self.fc(x)


def root_hook() -> nn.Module:
    """A forward hook on the model itself: tracing calls forward() directly."""
    model = nn.Sequential(nn.Linear(4, 3))
    model.register_forward_hook(lambda module, args, out: out + 1.0)
    return model


def root_pre_hook() -> nn.Module:
    model = nn.Sequential(nn.Linear(4, 3))
    model.register_forward_pre_hook(lambda module, args: (args[0] * 2.0,))
    return model


class ParameterAsFloat(nn.Module):
    """A Python float computed from a parameter at run time."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))

    def forward(self, x):
        return x * float(self.w.sum())


class ParameterItem(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))

    def forward(self, x):
        return x * self.w.sum().item()


# --- data-dependent shapes and control flow ------------------------------------------------
class BooleanMask(nn.Module):
    def forward(self, x):
        return x[x > 0]


class NonZero(nn.Module):
    def forward(self, x):
        return torch.nonzero(x)


class SliceByValue(nn.Module):
    def forward(self, x):
        return x[:, :int(x.sum())]


class BranchOnValue(nn.Module):
    def forward(self, x):
        return x.relu() if x.sum() > 0 else x


class BranchOnShape(nn.Module):
    def forward(self, x):
        if x.shape[1] > 2:
            return x.relu()
        return x


class BranchOnRank(nn.Module):
    def forward(self, x):
        return x.relu() if x.dim() == 2 else x


class LoopOverSize(nn.Module):
    def forward(self, x):
        for _ in range(x.size(1)):
            x = x + 1.0
        return x


class ShapeAsArgument(nn.Module):
    def forward(self, x):
        return x + torch.ones(x.shape[1])


class ViewBySize(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)


class DropoutFollowsTraining(nn.Module):
    """`training=self.training` is read at trace time; in training mode it is stochastic."""

    def forward(self, x):
        return F.dropout(x, 0.5, self.training)


# (id, model factory, per-sample shapes, verdict, node of a rejection)
HAZARDS = [
    ("alias-augmented-assignment", AliasAugmented, "caught at the output", ""),
    ("alias-view-augmented-assignment", AliasViewAugmented, "caught at the output", ""),
    ("input-view-augmented-assignment", InputViewAugmented, "caught at the output", ""),
    ("input-augmented-and-returned", InputAugmentedReturned, "agrees", ""),
    ("item-assignment", SetItem, "rejected trace-failed", ""),
    ("call-counter-attribute", CallCounter, "caught at a node", ""),
    ("python-list-append", ListAppend, "caught at a node", ""),
    ("flag-toggled-in-forward", Toggle, "caught at the output", ""),
    # the eager runs draw from a seed of their own: the frozen tensor differs from theirs
    ("random-tensor-frozen-at-trace", RandomConstant, "caught at a node", ""),
    ("random-like-input", RandomLike, "rejected unsupported-function", "rand_like"),
    ("buffer-updated-in-place", BufferUpdate, "rejected inplace", "add_"),
    ("forward-hook-on-leaf-module", LeafHook, "caught at a node", ""),
    ("forward-hook-on-model", root_hook, "caught at the output", ""),
    ("forward-pre-hook-on-model", root_pre_hook, "caught at the output", ""),
    ("float-of-parameter", ParameterAsFloat, "rejected trace-failed", ""),
    ("item-of-parameter", ParameterItem, "rejected unsupported-method", "sum_1"),
    ("boolean-mask", BooleanMask, "rejected unsupported-function", "gt"),
    ("nonzero", NonZero, "rejected unsupported-function", "nonzero"),
    ("slice-bound-from-value", SliceByValue, "rejected trace-failed", ""),
    ("branch-on-value", BranchOnValue, "rejected trace-failed", ""),
    ("branch-on-shape", BranchOnShape, "rejected trace-failed", ""),
    ("branch-on-rank", BranchOnRank, "rejected trace-failed", ""),
    ("loop-over-size", LoopOverSize, "rejected trace-failed", ""),
    ("shape-as-argument", ShapeAsArgument, "rejected unsupported-function", "getattr_1"),
    ("view-by-size", ViewBySize, "rejected unsupported-method", "size"),
    ("dropout-following-training-mode", lambda: DropoutFollowsTraining().train(),
     "rejected dropout-training", "dropout"),
]


@pytest.mark.parametrize("build, verdict, node", [row[1:] for row in HAZARDS],
                         ids=[row[0] for row in HAZARDS])
def test_tracing_hazard_is_rejected_or_caught(build, verdict, node):
    model = build()
    if verdict.startswith("rejected"):
        code = verdict.split()[1]
        with model_unchanged(model), pytest.raises(ncet.ConversionError) as info:
            ncet.convert(model, (4,))
        assert (info.value.code, info.value.node) == (code, node), info.value
        report = ncet.diagnose(model, (4,))
        assert (node, code) in {(r.fx_name, r.code) for r in report.errors}
        return
    with model_unchanged(model):
        ir = ncet.convert(model, (4,))
    report = ncet.check_exactness(model, ir, samples_per_scale=4)
    if verdict == "agrees":
        assert report.ok and not report.traced_differs, report.summary()
        return
    assert not report.ok, report.summary()
    if verdict == "caught at the output":
        assert report.first_violation is None, report.summary()
        assert report.traced_differs and any(o.violations for o in report.outputs)
    else:
        assert report.first_violation is not None, report.summary()


def test_hazard_table_has_unique_ids():
    assert len({row[0] for row in HAZARDS}) == len(HAZARDS)


class ReadsGlobal(nn.Module):
    def forward(self, x):
        return x * SCALE[0]


class PlainTensor(nn.Module):
    """A tensor attribute that is neither a parameter nor a buffer (an FX tensor constant)."""

    def __init__(self):
        super().__init__()
        self.offset = torch.ones(4)

    def forward(self, x):
        return x + self.offset


SCALE = [2.0]


def test_state_changed_after_convert_is_caught():
    """GraphIR is a snapshot: a global, or a plain tensor attribute, changed after
    `convert` makes the model differ from its IR, and check_exactness says so."""
    model = ReadsGlobal()
    ir = ncet.convert(model, (4,))
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok
    SCALE[0] = 3.0
    try:
        assert not ncet.check_exactness(model, ir, samples_per_scale=4).ok
    finally:
        SCALE[0] = 2.0
    model = PlainTensor()
    ir = ncet.convert(model, (4,))
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok
    model.offset.fill_(5.0)
    assert not ncet.check_exactness(model, ir, samples_per_scale=4).ok


def test_a_graph_ir_of_another_model_is_refused():
    """A GraphIR whose nodes are not the model's FX nodes is refused, naming them."""
    ir = ncet.convert(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (4,))
    other = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.ReLU())
    with pytest.raises(ValueError, match="does not match the model: no IR node for FX node"):
        ncet.check_exactness(other, ir, samples_per_scale=2)


# --- the trace cache and Python state changed after convert ---------------------------------
class GuardedBranch(nn.Module):
    """A flag that, once set, adds a data-dependent branch (short-circuited while False)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.guard = False

    def forward(self, x):
        y = torch.relu(self.fc(x))
        if self.guard and bool(x.abs().max() > 1e6):
            y = y * 0.0
        return y


class ExtraBranch(nn.Module):
    """A flag that, once set, adds a traceable branch that is zero on every sample."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(4, 4), nn.Linear(4, 2)
        self.extra = False

    def forward(self, x):
        h = torch.relu(self.l1(x))
        if self.extra:
            h = h + torch.relu(x - 1e6)
        return self.l2(h)


EXTRA_BRANCH = [False]


class GlobalFlagBranch(ExtraBranch):
    """The same branch behind a module-level flag forward() reads."""

    def forward(self, x):
        h = torch.relu(self.l1(x))
        if EXTRA_BRANCH[0]:
            h = h + torch.relu(x - 1e6)
        return self.l2(h)


class ClassFlagBranch(ExtraBranch):
    """The same branch behind a class attribute."""

    extra_branch = False

    def forward(self, x):
        h = torch.relu(self.l1(x))
        if self.extra_branch:
            h = h + torch.relu(x - 1e6)
        return self.l2(h)


def _set_class_flag(model):
    type(model).extra_branch = True


def _set_guard(model):
    model.guard = True


def _set_extra(model):
    model.extra = True


def _set_global(model):
    EXTRA_BRANCH[0] = True


def _verdict(model, ir):
    """What check_exactness says: ("raises", class, reason) or ("report", ok)."""
    try:
        report = ncet.check_exactness(model, ir, samples_per_scale=4)
    except (ncet.ConversionError, ValueError) as error:
        return ("raises", type(error).__name__, getattr(error, "code", str(error)[:60]))
    return ("report", report.ok)


@pytest.mark.parametrize("build, change, expected", [
    (GuardedBranch, _set_guard, ("raises", "TraceError", "trace-failed")),
    (ExtraBranch, _set_extra, ("raises", "ValueError",
                               "the GraphIR does not match the model: no IR node")),
    (GlobalFlagBranch, _set_global, ("raises", "ValueError",
                                     "the GraphIR does not match the model: no IR node")),
    (ClassFlagBranch, _set_class_flag, ("raises", "ValueError",
                                        "the GraphIR does not match the model: no IR node")),
], ids=["data-dependent-branch", "traceable-branch", "global-flag", "class-flag"])
def test_state_changed_after_convert_gives_the_reference_verdict(build, change, expected,
                                                                 monkeypatch):
    """A flag set after `convert` changes what forward() traces to only off the samples:
    the check reusing convert's trace (the fast path) must give the verdict of the check
    that traces the model again, which refuses the GraphIR."""
    from ncet.frontend import trace_cache

    try:
        torch.manual_seed(0)
        model = build().eval()
        ir = ncet.convert(model, (4,))
        change(model)
        fast = _verdict(model, ir)
        monkeypatch.setattr(trace_cache, "TRACE_CACHE", False)
        reference = _verdict(model, ir)
    finally:
        EXTRA_BRANCH[0] = False
        ClassFlagBranch.extra_branch = False
    assert reference[:2] == expected[:2] and str(reference[2]).startswith(expected[2])
    assert fast == reference


def _clamped(x, big=False):
    return torch.clamp(x, -1e30, 1e30) if big else x


def _helper(x):
    """A helper forward() calls, reading a global forward() itself does not name."""
    return _clamped(x, HELPER_FLAG["big"])


HELPER_FLAG = {"big": False}
CONFIG_MODULE = types.ModuleType("ncet_test_config")
CONFIG_MODULE.BIG = False


class _Object:
    pass


class StateBranch(nn.Module):
    """`fc` then an activation whose trace depends on Python state chosen by `kind`."""

    def __init__(self, kind):
        super().__init__()
        self.fc, self.kind = nn.Linear(4, 3), kind
        self.flags = [False] * 300  # wider than any by-value fingerprint looks
        self.cfg = _Object()
        self.cfg.a = _Object()
        self.cfg.a.b = _Object()
        self.cfg.a.b.c = _Object()
        self.cfg.a.b.c.big = False  # four levels deep
        self.partial = functools.partial(_clamped, big=False)
        self.act = lambda x: x
        self.act_default = lambda x, big=False: _clamped(x, big)
        self.config = CONFIG_MODULE

    def forward(self, x):
        y = self.fc(x)
        if self.kind == "relu":
            return F.relu(y)
        if self.kind == "module-object":
            return _clamped(y, self.config.BIG)
        if self.kind == "wide-list":
            return _clamped(y, self.flags[0])
        if self.kind == "deep-config":
            return _clamped(y, self.cfg.a.b.c.big)
        if self.kind == "partial":
            return self.partial(y)
        if self.kind == "lambda-code":
            return self.act(y)
        if self.kind == "lambda-defaults":
            return self.act_default(y)
        return _helper(y)


STATE_CHANGES = {
    "relu": lambda m, mp: mp.setattr(F, "relu", lambda x: torch.clamp(x, min=0.0, max=1e30)),
    "module-object": lambda m, mp: mp.setattr(CONFIG_MODULE, "BIG", True),
    "wide-list": lambda m, mp: m.flags.__setitem__(0, True),
    "deep-config": lambda m, mp: setattr(m.cfg.a.b.c, "big", True),
    "partial": lambda m, mp: m.partial.keywords.__setitem__("big", True),
    "lambda-code": lambda m, mp: setattr(
        m.act, "__code__", (lambda x: torch.clamp(x, -1e30, 1e30)).__code__),
    "lambda-defaults": lambda m, mp: setattr(m.act_default, "__defaults__", (True,)),
    "helper-global": lambda m, mp: mp.setitem(HELPER_FLAG, "big", True),
}
"""Python state changed after `convert` that no fingerprint of the model sees (the
adversarial review's table): each adds a clamp to the trace."""


@pytest.mark.parametrize("kind", list(STATE_CHANGES))
def test_any_change_to_the_trace_gives_the_reference_verdict(kind, monkeypatch):
    """The fast path re-traces and compares graphs node by node, so every change that adds
    a node after `convert` is refused on both paths, as a fresh trace refuses it."""
    from ncet.frontend import trace_cache

    torch.manual_seed(0)
    model = StateBranch(kind).eval()
    ir = ncet.convert(model, (4,))
    STATE_CHANGES[kind](model, monkeypatch)
    fast = _verdict(model, ir)
    monkeypatch.setattr(trace_cache, "TRACE_CACHE", False)
    reference = _verdict(model, ir)
    assert reference == ("raises", "ValueError",
                         "the GraphIR does not match the model: no IR node for FX node")
    assert fast == reference


def test_an_unchanged_model_is_traced_once_per_check(monkeypatch):
    """The check of an unchanged model traces it once (the fast path's fresh trace matches
    convert's graph), and a new attribute forward() does not read changes nothing; a change
    to the trace sends the check down the reference path, which traces again."""
    from ncet.exactness import check as check_module
    from ncet.frontend import trace_cache

    fast, reference = [], []
    for module, calls in ((trace_cache, fast), (check_module, reference)):
        monkeypatch.setattr(module, "trace_model", lambda model, n, calls=calls,
                            real=module.trace_model: calls.append(model) or real(model, n))
    torch.manual_seed(0)
    model = ExtraBranch().eval()
    ir = ncet.convert(model, (4,))
    assert ncet.check_exactness(model, ir, samples_per_scale=2).ok
    model.fc_scale = 1.5  # a new attribute: forward() does not read it
    assert ncet.check_exactness(model, ir, samples_per_scale=2).ok
    assert (fast, reference) == ([model, model], [])
    model.extra = True
    with pytest.raises(ValueError, match="no IR node for FX node"):
        ncet.check_exactness(model, ir, samples_per_scale=2)
    assert (fast, reference) == ([model] * 3, [model])
