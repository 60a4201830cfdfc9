"""check_exactness: no false alarms on correct conversions, the report, eager comparison,
chunking, and the declared arithmetic model."""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from ncet.exactness.arithmetic import UNIT_ROUNDOFF, gamma, read_arithmetic_model
from ncet.examples import load_example


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", ["mlp", "lenet", "residual_cnn"])
def test_bundled_models_are_exact(name, dtype):
    model, shapes = load_example(name)
    model = copy.deepcopy(model).to(dtype)
    report = ncet.check_exactness(model, ncet.convert(model, *shapes, dtype=dtype))
    assert report.ok, report.summary()
    assert report.first_violation is None and report.samples == 96
    assert all(o.violations == 0 and o.ratio <= 1 for o in report.outputs)


def random_model(seed: int) -> tuple[nn.Module, tuple[int, ...]]:
    """A residual CNN or MLP with random widths, slopes and BatchNorm statistics."""
    g = torch.Generator().manual_seed(seed)

    def pick(*options):
        return options[int(torch.randint(len(options), (1,), generator=g))]

    channels, width, slope = pick(2, 3, 5), pick(4, 6, 7), pick(0.01, 0.2, 0.5)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(channels, channels, pick(1, 3), padding="same",
                                  groups=pick(1, channels))
            self.bn = nn.BatchNorm2d(channels)
            self.fc = nn.Linear(channels * (width // 2) ** 2, pick(1, 5))

        def forward(self, x):
            y = F.leaky_relu(self.bn(self.conv(x)), slope) + x * 0.5
            y = F.avg_pool2d(y, 2) if seed % 2 else F.max_pool2d(y, 2)
            return self.fc(y.flatten(1) - 0.25)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Net()
        model.bn.running_mean.normal_(0, 1)
        model.bn.running_var.uniform_(0.1, 3)
        for p in model.parameters():
            p.data.mul_(float(pick(0.1, 1.0, 10.0)))
    return model.eval(), (channels, width, width)


@pytest.mark.parametrize("seed", range(12))
def test_random_models_have_no_false_alarms(seed):
    model, shape = random_model(seed)
    report = ncet.check_exactness(model, ncet.convert(model, shape), samples_per_scale=16,
                                  seed=seed)
    assert report.ok, report.summary()


def test_report_contents():
    model, shapes = load_example("lenet")
    ir = ncet.convert(model, *shapes)
    report = ncet.check_exactness(model, ir, samples_per_scale=8)
    names = [n.name for n in ir.nodes if n.op_type not in ("Input", "Output")]
    assert [e.name for e in report.entries] == names
    conv = report.entries[0]
    assert conv.op_type == "Conv2d" and conv.location.startswith("examples.py:")
    assert 0 < conv.local_ratio <= 1 and conv.local_bound > 0 and conv.local_ulps > 0
    relu = next(e for e in report.entries if e.op_type == "ReLU")
    assert relu.local_bound == 0 and relu.local_max_error == 0  # exact ops are exact
    frame = report.to_pandas()
    assert list(frame["name"]) == names and not frame["violated"].any()
    tight = report.tightness()
    assert set(tight) >= {"Conv2d", "Linear", "AvgPool2d"}
    assert all(0 <= median <= worst <= 1 for median, worst in tight.values())
    text = report.summary()
    assert "exact within the certified bounds on 24 samples" in text
    assert "u = 2^-24 (float32)" in text
    assert "<pre>" in report._repr_html_()


def test_chunked_runs_check_every_sample():
    """PyTorch's own float32 results depend on the batch size (matmul blocking), so chunks
    give other errors; both runs must hold every sample to the bound."""
    model, shapes = load_example("mlp")
    ir = ncet.convert(model, *shapes)
    x = torch.randn(50, *shapes[0], generator=torch.Generator().manual_seed(0))
    whole = ncet.check_exactness(model, ir, x, chunk_size=64)
    pieces = ncet.check_exactness(model, ir, x, chunk_size=7)
    assert whole.ok and pieces.ok and whole.samples == pieces.samples == 50
    exact_ops = [e for e in pieces.entries if e.op_type == "ReLU"]
    assert exact_ops and all(e.local_max_error == 0 for e in exact_ops)


def checked_with_progress(model, *inputs, **options):
    """check_exactness with a progress callback; the report and the calls, after asserting
    what every progress report must hold: at most PROGRESS_UPDATES + 1 calls, the fraction
    done strictly increasing, the last call (total, total)."""
    calls = []
    report = ncet.check_exactness(model, *inputs, **options,
                                  progress=lambda done, total: calls.append((done, total)))
    fractions = [done / total for done, total in calls]
    assert 2 <= len(calls) <= ncet.exactness.check.PROGRESS_UPDATES + 1
    assert fractions == sorted(set(fractions)) and calls[-1][0] == calls[-1][1]
    return report, calls


def test_inputs_without_ir_and_progress():
    model, shapes = load_example("mlp")
    report, calls = checked_with_progress(model, torch.randn(10, *shapes[0]), chunk_size=4)
    assert report.ok and report.inputs == "10 given samples"
    total = calls[-1][1]  # node steps: three chunks of every node
    assert total % 3 == 0 and total // 3 >= len(report.entries)
    assert {t for _, t in calls} == {total}
    with pytest.raises(ValueError, match="GraphIR or example inputs"):
        ncet.check_exactness(model)


@pytest.mark.parametrize("depth", [197, 400])
def test_progress_moves_within_one_chunk(depth):
    # a deep model checked in one chunk still reports progress as its nodes are walked
    model = nn.Sequential(*[nn.ReLU() for _ in range(depth)]).eval()
    report, calls = checked_with_progress(model, torch.randn(5, 3))
    assert report.ok and len(calls) >= 50
    assert calls[-1] == (depth + 2, depth + 2)  # input, the ReLUs, output


def test_progress_of_many_small_chunks_is_throttled():
    model, shapes = load_example("mlp")
    report, calls = checked_with_progress(model, torch.randn(300, *shapes[0]), chunk_size=1)
    assert report.ok and len(calls) >= 50  # 300 chunks, at most 101 reports


def test_progress_never_goes_back_when_the_model_is_traced_again():
    # the recorded trace's outputs differ from eager execution: the check runs a second
    # time on a fresh trace, and the progress it reports continues instead of restarting
    model = Aliasing()
    report, _ = checked_with_progress(model, ncet.convert(model, (4,)))
    assert report.traced_differs


def test_progress_printed_as_a_percentage(capsys):
    model = nn.Sequential(*[nn.ReLU() for _ in range(20)]).eval()
    ncet.check_exactness(model, torch.randn(5, 3), progress=True)
    err = capsys.readouterr().err
    assert err.endswith("check_exactness: 100%\n") and "check_exactness: 50%" in err


class Aliasing(nn.Module):
    """Eager and traced execution differ: `y += 1` mutates the alias z in eager mode, but
    FX records an out-of-place add, so the traced graph (and the IR) never see it."""

    def forward(self, x):
        y = x * 1.0
        z = y
        y += 1.0
        return z * 2.0


def test_eager_differences_are_caught_at_the_output():
    model = Aliasing()
    report = ncet.check_exactness(model, ncet.convert(model, (4,)))
    assert not report.ok
    assert report.first_violation is None  # every node agrees with the traced graph
    assert report.outputs[0].violations > 0 and report.traced_differs
    assert report.summary().startswith(f"VIOLATION at output {report.outputs[0].name!r}")


def test_reduced_precision_flags_change_the_declared_arithmetic():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        model = read_arithmetic_model()
        assert model.operand_u == 2.0 ** -8
        assert model.gamma(torch.float32, "Linear", 10) > gamma(2, 2.0 ** -8)
        assert model.gamma(torch.float32, "Add", 1) == gamma(1, UNIT_ROUNDOFF[torch.float32])
        assert "reduced-precision" in model.describe()
        wide = nn.Linear(300, 2)  # 300 terms: a bf16 sum would be vacuous, a float32 one is not
        report = ncet.check_exactness(wide, ncet.convert(wide, (300,)), samples_per_scale=4)
        assert 0 < report.entries[0].local_bound < 1e30 and report.first_violation is None
        # oneDNN flushes subnormal operands in these modes: widened bounds with the
        # underflow term, certified, and the report says which arithmetic it assumed
        assert report.ok and report.arithmetic.certified and report.arithmetic.flush
        assert "flushes subnormal float32 operands" in report.summary()
        assert "flush-to-zero seen" in report.summary().splitlines()[0]
    finally:
        torch.set_float32_matmul_precision(before)
    assert read_arithmetic_model().operand_u == 0


def test_flush_denormal_is_certified_with_the_underflow_term_and_nnpack_is_not():
    model, shapes = load_example("mlp")
    ir = ncet.convert(model, *shapes)
    try:
        torch.set_flush_denormal(True)
        report = ncet.check_exactness(model, ir, samples_per_scale=4)
    finally:
        torch.set_flush_denormal(False)
    assert report.ok and report.arithmetic.certified and report.arithmetic.flush
    assert "flush-to-zero seen" in report.summary() and "denormals-are-zero" in report.summary()
    with torch.backends.mkldnn.flags(enabled=False):
        assert not read_arithmetic_model().certified  # convolutions may run in NNPACK
    assert read_arithmetic_model().certified and not read_arithmetic_model().flush


def test_the_underflow_term_is_the_documented_formula():
    """docs/exactness.md §2.2: Phi = SAFETY [(3 + 2 Gamma(k)) (C(eta m) + C(eta_64 1)) +
    2 k eta], m the operands that may be flushed; for a Linear C(E) = |W| E; 0 without
    flushing and for an exact op."""
    from ncet.exactness.arithmetic import ArithmeticModel
    from ncet.exactness.bounds import SAFETY
    from ncet.exactness.flush_bounds import flush_term, flushable
    lin = nn.Linear(5, 3)
    ir = ncet.convert(nn.Sequential(lin, nn.ReLU()).eval(), (5,))
    consts = dict(ir.constants)
    abs_consts = {k: v.double().abs() for k, v in consts.items()}
    linear, relu = [n for n in ir.nodes if n.op_type in ("Linear", "ReLU")]
    flushing = ArithmeticModel(flush=True)
    eta, eta64, k = 2.0 ** -126, 2.0 ** -1022, 5 + 2
    g = flushing.gamma(torch.float32, "Linear", k)
    w = lin.weight.detach().double().abs()
    x = torch.tensor([[1.0, 1e-39, 0.0, -2e-40, 3e-38]])  # two subnormal elements
    m = torch.tensor([[False, True, False, True, False]])
    assert torch.equal(flushable(x, eta), m)
    assert torch.equal(flushable(x.double(), eta), m)  # normal doubles below eta
    for masks, ms in ((None, torch.ones(1, 5, dtype=torch.float64)), ([m], m.double())):
        want = SAFETY * ((3 + 2 * g) * (eta * ms @ w.T + eta64 * w.sum(1)) + 2 * k * eta)
        got = flush_term(linear, [(5,)], abs_consts, consts, torch.float32, flushing,
                         masks=masks)
        assert got.shape == (1, 3) and torch.allclose(got, want, rtol=1e-12, atol=0)
    assert flush_term(linear, [(5,)], abs_consts, consts, torch.float32, ArithmeticModel()) == 0
    assert flush_term(relu, [(3,)], abs_consts, consts, torch.float32, flushing) == 0
    # no operand that may be flushed: the C(eta_64 1) and k eta part alone
    none = flush_term(linear, [(5,)], abs_consts, consts, torch.float32, flushing,
                      masks=[torch.zeros(1, 5, dtype=torch.bool)])
    assert torch.allclose(none, SAFETY * ((3 + 2 * g) * eta64 * w.sum(1) + 2 * k * eta),
                          rtol=1e-12, atol=0)
    # a float32 operand of a float64 node is read as zero below float32's smallest normal
    wide = flush_term(linear, [(5,)], abs_consts, consts, torch.float64, flushing,
                      (torch.float32,))
    assert bool((wide >= SAFETY * 3 * eta * w.sum(1)).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_underflow_term_is_added_on_both_paths(monkeypatch, dtype):
    """Forced flushing (the probe says so; no thread's state is changed): every rounding
    node's bounds grow on the fast and the reference path alike, the two reports relate as
    docs/exactness.md §2.5 says, and the graph is still certified."""
    from ncet.exactness import fast_paths, probes
    from tests.test_exactness_fast_paths import assert_same_reports, has_float32_dots

    model = EveryFusedRule().eval()
    with torch.no_grad():
        model.conv.bias.zero_()  # the first node's values stay near 2^-120, where Phi shows
    model = model.to(dtype)
    ir = ncet.convert(model, (2, 4, 4), dtype=dtype)
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(8, 2, 4, 4, generator=g) * 2.0 ** -120).to(dtype)
    # the gradual bounds for comparison, whether or not this host's bf16 kernels flush
    monkeypatch.setattr(probes, "probe_low_precision_subnormals", lambda dtype: None)
    plain = ncet.check_exactness(model, ir, x)
    monkeypatch.setattr(probes, "probe_subnormals",
                        lambda: "denormals-are-zero is set on the calling thread (forced)")
    with fast_paths.reference_path():
        reference = ncet.check_exactness(model, ir, x)
    fast = ncet.check_exactness(model, ir, x)
    assert fast.ok and fast.arithmetic.flush and not plain.arithmetic.flush
    assert_same_reports(fast, reference, has_float32_dots(ir))
    for flushed, gradual in zip(fast.entries, plain.entries):
        assert flushed.e2e_max_bound >= gradual.e2e_max_bound, flushed.name
    assert fast.entries[0].name == "conv"
    assert fast.entries[0].e2e_max_bound > plain.entries[0].e2e_max_bound


def test_subnormal_scalars_are_covered():
    """A scalar rounded to a float32 subnormal has an absolute, not relative, error."""
    model = nn.Sequential(nn.LeakyReLU(1e-40))
    x = torch.tensor([[1e30, -1e30, -7e29, 3e29]])
    assert ncet.check_exactness(model, ncet.convert(model, (4,)), x).ok


def negative_variance():
    bn = nn.BatchNorm1d(2).eval()
    bn.running_var[0] = -1e-6
    return bn


class TinyDivisor(nn.Module):
    def forward(self, x):
        return x / 1e-40


class HugeIntBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.tensor([2 ** 60, 3]))

    def forward(self, x):
        return x * self.k


@pytest.mark.parametrize(("build", "shape", "code"), [
    (negative_variance, (2,), "batch-norm-negative-var"),
    (TinyDivisor, (3,), "constant-subnormal"),
    (HugeIntBuffer, (2,), "affine-constant-type"),
], ids=["negative running_var", "subnormal divisor", "int buffer beyond 2**53"])
def test_constants_the_bounds_cannot_cover_are_rejected(build, shape, code):
    with pytest.raises(ncet.SupportBoundaryError) as info:
        ncet.convert(build(), shape)
    assert info.value.code == code


class StridedHugeWeightBatchNorm(nn.Module):
    """BatchNorm after a transpose (PyTorch normalises first, then scales): an underflowing
    intermediate multiplied by a huge weight."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)
        with torch.no_grad():
            self.bn.weight.fill_(1e35)
            self.bn.running_var.fill_(1e10)

    def forward(self, x):
        return self.bn(x.transpose(1, 2)).transpose(1, 2)


class LargeAlphaTinyConstant(nn.Module):
    def forward(self, x):
        return torch.add(x, 3e-40, alpha=1e30)


@pytest.mark.parametrize(("model", "shape", "x"), [
    (StridedHugeWeightBatchNorm, (4, 3),
     torch.tensor([[1e-30, 2e-31, -3e-32]] * 4) * torch.logspace(-10, 0, 8).reshape(-1, 1, 1)),
    (LargeAlphaTinyConstant, (4,), None),
], ids=["BatchNorm: huge weight after underflow", "x + alpha*c: c rounds to a subnormal"])
def test_underflow_near_huge_constants_is_covered(model, shape, x):
    m = model().eval()
    inputs = () if x is None else (x,)
    assert ncet.check_exactness(m, ncet.convert(m, shape), *inputs).ok


def test_batch_norm_with_subnormal_variance_is_rejected():
    bn = nn.BatchNorm1d(2, eps=1e-40).eval()
    bn.running_var.zero_()
    with pytest.raises(ncet.SupportBoundaryError) as info:
        ncet.convert(bn, (2,))
    assert info.value.code == "constant-subnormal"


class BeyondFloat32(nn.Module):
    def forward(self, x):
        return x * 1e39


class HugeAlpha(nn.Module):
    def forward(self, x):
        return torch.add(x, x, alpha=1e39)


class SmallIntBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.tensor([2, -128], dtype=torch.int8))

    def forward(self, x):
        return x * self.k


@pytest.mark.parametrize(("model", "code"), [
    (BeyondFloat32, "constant-not-finite"),
    (HugeAlpha, "alpha"),
    (lambda: nn.BatchNorm1d(2, eps=float("nan")).eval(), "constant-not-finite"),
], ids=["x * 1e39 in float32", "alpha 1e39 in float32", "BatchNorm eps NaN"])
def test_constants_that_round_to_infinity_are_rejected(model, code):
    """Found by the model fuzzer: PyTorch rounds these to inf (or NaN) in the op's dtype."""
    with pytest.raises(ncet.SupportBoundaryError) as info:
        ncet.convert(model(), (2,))
    assert info.value.code == code


def test_small_integer_buffers_are_accepted():
    """Found by the model fuzzer: an int8 buffer was taken for an int beyond 2**53."""
    model = SmallIntBuffer()
    report = ncet.check_exactness(model, ncet.convert(model, (2,)), samples_per_scale=4)
    assert report.ok


class EveryFusedRule(nn.Module):
    """One node per fused bound form: BatchNorm (with and without affine), LeakyReLU, Add
    and Sub (alpha 1 and not), ElementwiseAffine (mul, div, add/sub on either side, scalar
    and tensor constants) and float32 Linear/Conv2d."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.bn_plain = nn.BatchNorm2d(3, affine=False)
        self.fc = nn.Linear(48, 5)
        self.register_buffer("k", torch.tensor([0.5, -3.0, 1e-3]).reshape(3, 1, 1))
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(-2, 2)

    def forward(self, x):
        y = self.bn_plain(self.bn(self.conv(x)))
        y = F.leaky_relu(y, 0.2) + y
        y = torch.sub(y, y * 0.5, alpha=3.0) - y / 7.0
        y = torch.add(y, self.k, alpha=-2.0) + torch.add(self.k, y, alpha=0.3)
        y = 2.5 - y * self.k
        return self.fc(y[:, :, :4, :4].flatten(1))


def test_fused_broadcast_agrees_with_torch():
    # LinearBound.local's shape check: every pair and a sample of triples of shapes of rank
    # 0-3 with sizes 1-3, against torch.broadcast_shapes (None where torch refuses)
    from ncet.exactness.fused_bounds import _broadcast
    shapes = [s for rank in range(4) for s in itertools.product((1, 2, 3), repeat=rank)]
    cases = [(a, b) for a in shapes for b in shapes] + \
        [(a, b, c) for a, b, c in itertools.product(shapes[::3], shapes[1::4], shapes[2::5])]
    for case in cases:
        try:
            want = tuple(torch.broadcast_shapes(*case))
        except RuntimeError:
            want = None
        assert _broadcast(*case) == want, case


@pytest.mark.parametrize("radius", [1e-3, 2.0 ** 300, 2.0 ** -140],
                         ids=["small-radii", "beyond-float32", "below-float32-normal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_fused_bounds_equal_the_rules(dtype, radius):
    """The fused forms (LinearBound, DotBound) compute the rules of bounds.py: never below
    them (the SAFETY margin kept) and never looser by more than float32 rounding, also for
    the radii of deep networks, far beyond float32, and radii below float32's normal range
    (DotBound scales them first)."""
    from ncet.evaluate import EVALUATORS
    from ncet.exactness.bounds import SAFETY, end_to_end_radius, node_local_bound, rounding
    from ncet.exactness.float32_dots import (
        DotBound,
        carry_exponent,
        dot_sum32,
        round_up_to_float32,
    )
    from ncet.exactness.fused_bounds import LINEAR_FORMS, LinearBound
    from ncet.exactness.rules import BOUND_RULES

    model = EveryFusedRule().eval().to(dtype)
    ir = ncet.convert(model, (2, 4, 4), dtype=dtype)
    arithmetic = read_arithmetic_model()
    consts = {k: v.to(torch.float64) for k, v in ir.constants.items()}
    abs_consts = {k: v.abs() for k, v in consts.items()}
    g = torch.Generator().manual_seed(0)
    values = {ir.inputs[0].name: torch.randn(6, 2, 4, 4, generator=g, dtype=torch.float64)}
    seen = set()
    for node in ir.nodes[1:-1]:
        xs = [values[i] for i in node.inputs]
        values[node.name] = EVALUATORS[node.op_type](node, xs, consts)
        rule = BOUND_RULES[node.op_type]
        if rule.magnitude is None:
            continue
        xs = [x.to(dtype).to(torch.float64) for x in xs]  # PyTorch's values: in its dtype
        radii = [torch.rand(x.shape, generator=g, dtype=torch.float64) * radius for x in xs]
        r = rounding(node, xs, abs_consts, ir.constants)
        # the reference path's formulas, without their SAFETY factor
        local = node_local_bound(node, r, dtype, arithmetic) / SAFETY
        total = end_to_end_radius(node, r, dtype, arithmetic, radii, abs_consts) / SAFETY
        if node.op_type in LINEAR_FORMS:
            fused = LinearBound.of(node, LINEAR_FORMS[node.op_type](node, abs_consts, xs[0].dim()),
                                   r.k, dtype, arithmetic)
            got_local = fused.local([x.abs() for x in xs])
            got_total = fused.total(got_local, radii)
            slack = 1e-12
        elif node.op_type in ("Linear", "Conv2d") and dtype == torch.float32:
            abs32 = {k: v.abs() for k, v in ir.constants.items()}
            fused = DotBound.of(node, ir.constants, dtype, arithmetic)
            got_local = fused.local(dot_sum32(node, [x.abs().float() for x in xs], abs32,
                                              False))
            s = carry_exponent(radii)
            assert (s == 0) == (2.0 ** -64 < radius < 2.0 ** 64), node.name
            up = [round_up_to_float32(e, exponent=s) for e in radii]
            assert all(bool((u.double() * 2.0 ** s >= e).all()) for u, e in zip(up, radii))
            got_total = fused.total(got_local, dot_sum32(node, up, abs32, True), s)
            slack = 1e-4  # float32 sums rounded up
        else:
            continue
        seen.add(node.op_type)
        for got, want in ((got_local, local), (got_total, total)):
            assert got.dtype == torch.float64 and got.shape == want.shape, node.name
            assert bool((got >= want * (1 + 2.0 ** -21)).all()), node.name
            assert bool((got <= want * SAFETY * (1 + slack)).all()), node.name
    expected = {"BatchNorm", "LeakyReLU", "Add", "Sub", "ElementwiseAffine"}
    assert seen == expected | ({"Linear", "Conv2d"} if dtype == torch.float32 else set())


@pytest.mark.parametrize("bound", [torch.tensor([0.0, math.nan, 1.0]), math.nan],
                         ids=["nan-at-one-element", "nan-scalar"])
def test_a_nan_bound_is_not_checked_never_a_pass(bound):
    """B9 in docs/reliability.md: a NaN bound certifies nothing, whatever the error there:
    its elements are counted as not checked, which withholds the node's certificate."""
    from ncet.exactness.stats import CheckStats

    stats = CheckStats()
    torch_value = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    stats.update(torch_value, torch.tensor([1.0, 2.5, 3.0], dtype=torch.float64), bound,
                 torch.float32)
    assert stats.unbounded == (1 if isinstance(bound, torch.Tensor) else 3)


def test_the_float32_route_keeps_radii_below_the_smallest_normal_under_flushing():
    """Under flushing a float32 radius below 2^-126 would be stored or read as zero: it is
    raised to 2^-126 (never below the radius), also after scaling by 2^-s."""
    from ncet.exactness.float32_dots import round_up_to_float32
    tiny = 2.0 ** -126
    radii = torch.tensor([0.0, 1e-300, 1e-40, tiny, 1.0, 2.0 ** 70], dtype=torch.float64)
    for exponent in (0, 10):
        up = round_up_to_float32(radii, exponent=exponent, flush=True).double() * 2.0 ** exponent
        assert bool((up >= radii).all())
        assert bool((up[1:] >= tiny * 2.0 ** exponent).all())
    gradual = round_up_to_float32(radii, flush=False).double()
    assert bool((gradual >= radii).all()) and 0 < float(gradual[2]) < tiny


# --- hooks: code the model runs that the GraphIR does not have -------------------------------
class _HookNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 4)
        self.block = nn.Sequential(nn.ReLU(), nn.Linear(4, 3))
        self.unused = nn.Linear(4, 4)

    def forward(self, x):
        return self.block(self.l1(x))


def _zero_above_1e7(module, args, out):
    """Changes the output only where |value| > 1e7: never on the generated samples."""
    return torch.where(out.abs() > 1e7, torch.zeros_like(out), out)


def _noop_pre(module, args):
    return None


def _noop_kwargs(module, args, kwargs, out):
    return None


# (id, register a hook on the model, the note's words, where: a node or None for the outputs)
HOOK_CASES = [
    ("forward-hook-on-leaf-off-samples",
     lambda m: m.l1.register_forward_hook(_zero_above_1e7),
     "a forward hook on module 'l1', _zero_above_1e7", "l1"),
    ("pre-hook-on-leaf", lambda m: m.block[1].register_forward_pre_hook(_noop_pre),
     "a forward pre-hook on module 'block.1', _noop_pre", "block_1"),
    ("hook-on-traced-through-module", lambda m: m.block.register_forward_hook(_zero_above_1e7),
     "a forward hook on module 'block', _zero_above_1e7", None),
    ("hook-on-the-model", lambda m: m.register_forward_hook(_noop_kwargs, with_kwargs=True),
     "a forward hook on the model itself, _noop_kwargs", None),
    ("global-forward-hook",
     lambda m: nn.modules.module.register_module_forward_hook(_zero_above_1e7),
     "a forward hook registered for every module", None),
    ("global-pre-hook", lambda m: nn.modules.module.register_module_forward_pre_hook(_noop_pre),
     "a forward pre-hook registered for every module", None),
]


@pytest.mark.parametrize("register, words, node", [c[1:] for c in HOOK_CASES],
                         ids=[c[0] for c in HOOK_CASES])
def test_any_hook_leaves_the_check_not_certified(register, words, node):
    """A hook is not part of the GraphIR, and what it does off the samples is unknown: the
    report is NOT CERTIFIED, with a note naming the module and the hook (at a leaf's node, or
    at the outputs), and never reads exact. The hook stays registered and is not run by
    convert."""
    from tests.test_no_mutation import assert_same, snapshot

    torch.manual_seed(0)
    model = _HookNet().eval()
    handle = register(model)
    try:
        before = snapshot(model)
        ir = ncet.convert(model, (4,))
        report = ncet.check_exactness(model, ir, samples_per_scale=4)
        assert_same(before, snapshot(model))
    finally:
        handle.remove()
    _assert_not_certified_at(report, ir, node, words)
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok  # the hook removed


def _assert_not_certified_at(report, ir, node, words):
    """NOT CERTIFIED with no violation, unchecked exactly at `node` (at the outputs for None),
    each flagged entry's note holding `words` and saying it may act off the samples."""
    assert not report.ok and report.first_violation is None, report.summary()
    assert report.summary().startswith("NOT CERTIFIED") and "exact within" not in report.summary()
    flagged = [node] if node is not None else list(ir.outputs)
    assert set(report.unchecked) == set(flagged)
    for name in flagged:
        assert words in report.entry(name).note and "off the samples" in report.entry(name).note


def _gate(y):
    """Zeroes values above 1e8: never on the generated samples."""
    return torch.where(y.abs() > 1e8, torch.zeros_like(y), y)


class _CallNet(_HookNet):
    def __call__(self, x):
        return _gate(super().__call__(x))


def _instance_forward(model, monkeypatch):
    linear = model.l1
    monkeypatch.setattr(linear, "forward", lambda x: _gate(nn.Linear.forward(linear, x)),
                        raising=False)


def _instance_call(name):
    def override(model, monkeypatch):
        linear = model.l1
        monkeypatch.setattr(linear, name, lambda *a, **k: _gate(nn.Linear.forward(linear, *a)),
                            raising=False)
    return override


_RELU, _LINEAR, _TENSOR_RELU = F.relu, F.linear, torch.Tensor.relu
_C_LINEAR, _ISUB = torch._C._nn.linear, torch._C.TensorBase.__isub__

# (id, the model's class, an override in place before convert, the note's words, where)
OVERRIDE_CASES = [
    ("instance-forward-on-leaf", _HookNet, _instance_forward,
     "module 'l1' has an instance attribute `forward`", "l1"),
    ("leaf-class-forward-patched", _HookNet,
     lambda m, mp: mp.setattr(nn.ReLU, "forward", lambda self, x: _gate(_RELU(x))),
     "module 'block.0' has ReLU.forward patched", "block_0"),
    ("functional-relu-patched", _HookNet,
     lambda m, mp: mp.setattr(F, "relu", lambda x, inplace=False: _gate(_RELU(x))),
     "torch.nn.functional.relu patched", None),
    ("functional-linear-patched", _HookNet,
     lambda m, mp: mp.setattr(F, "linear", lambda x, w, b=None: _gate(_LINEAR(x, w, b))),
     "torch.nn.functional.linear patched", None),
    ("tensor-method-patched", _HookNet,
     lambda m, mp: mp.setattr(torch.Tensor, "relu", lambda self: _gate(_TENSOR_RELU(self))),
     "torch.Tensor.relu patched", None),
    ("root-class-overrides-call", _CallNet, lambda m, mp: None,
     "the model itself has class _CallNet overriding nn.Module.__call__", None),
    ("instance-call-impl-on-leaf", _HookNet, _instance_call("_call_impl"),
     "module 'l1' has an instance attribute `_call_impl`", "l1"),
    ("compiled-call-on-leaf", _HookNet, _instance_call("_compiled_call_impl"),
     "module 'l1' has a compiled call", "l1"),
    ("c-nn-linear-patched", _HookNet,  # what F.linear calls at call time
     lambda m, mp: mp.setattr(torch._C._nn, "linear", lambda x, w, b=None: _gate(
         _C_LINEAR(x, w, b))),
     "torch._C._nn.linear patched", None),
    ("tensor-dunder-shadowing-tensorbase", _HookNet,  # what `y -= c` calls
     lambda m, mp: mp.setattr(torch.Tensor, "__isub__", lambda self, o: _ISUB(self, o),
                              raising=False),
     "torch.Tensor.__isub__ patched", None),
]


@pytest.mark.parametrize("build, override, words, node", [c[1:] for c in OVERRIDE_CASES],
                         ids=[c[0] for c in OVERRIDE_CASES])
def test_any_override_of_torch_code_leaves_the_check_not_certified(build, override, words,
                                                                   node, monkeypatch):
    """Code the model runs instead of torch's own (an instance forward, a patched leaf class,
    torch function or Tensor method, a __call__ override), in place before convert and acting
    only above 1e8: the report is NOT CERTIFIED with a note naming it, the model is not
    changed, and once the override is gone the same GraphIR certifies."""
    from tests.test_no_mutation import assert_same, snapshot

    torch.manual_seed(0)
    model = build().eval()
    override(model, monkeypatch)
    before = snapshot(model)
    ir = ncet.convert(model, (4,))
    report = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert_same(before, snapshot(model))
    monkeypatch.undo()
    _assert_not_certified_at(report, ir, node, words)
    if build is not _CallNet:
        assert ncet.check_exactness(model, ir, samples_per_scale=4).ok  # the override gone


@pytest.mark.parametrize("mode", ["function", "dispatch"])
def test_an_active_torch_mode_leaves_the_check_not_certified(mode):
    """A TorchFunctionMode or TorchDispatchMode active around the check runs its own code for
    every op (here: torch's, unchanged): unknown off the samples, so NOT CERTIFIED."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passing(TorchFunctionMode if mode == "function" else TorchDispatchMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    model = _HookNet().eval()
    ir = ncet.convert(model, (4,))
    with Passing():
        report = ncet.check_exactness(model, ir, samples_per_scale=4)
    words = "a TorchFunctionMode is active" if mode == "function" else \
        "a TorchDispatchMode is active"
    _assert_not_certified_at(report, ir, None, words)
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok  # the mode left


def test_a_clean_model_has_no_override():
    from ncet.exactness.overrides import model_overrides
    from ncet.frontend.trace import trace_model

    for name in ("mlp", "lenet", "residual_cnn"):
        model, shapes = load_example(name)
        assert list(model_overrides(trace_model(model, len(shapes)))) == []


def test_a_hook_acting_off_the_samples_is_not_certified():
    """The adversarial case: the hook zeroes l1's output above 1e7, so the model and the
    GraphIR differ there (PyTorch is the oracle), though they agree on every sample."""
    torch.manual_seed(0)
    model = _HookNet().eval()
    model.l1.register_forward_hook(_zero_above_1e7)
    ir = ncet.convert(model, (4,))
    x = torch.full((1, 4), 1e8)
    with torch.no_grad():
        assert not torch.equal(model(x).double(), ncet.evaluate(ir, x))
    report = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert not report.ok and report.unchecked == ("l1",)


def test_a_hook_that_changes_values_on_the_samples_is_a_violation_naming_it():
    torch.manual_seed(0)
    model = _HookNet().eval()
    model.l1.register_forward_hook(lambda m, args, out: out * 2.0)
    report = ncet.check_exactness(model, ncet.convert(model, (4,)), samples_per_scale=4)
    assert report.first_violation.name == "l1"
    assert "forward hook on module 'l1'" in report.first_violation.note


def test_a_hook_on_a_module_forward_does_not_call_is_ignored():
    torch.manual_seed(0)
    model = _HookNet().eval()
    model.unused.register_forward_hook(_zero_above_1e7)
    assert ncet.check_exactness(model, ncet.convert(model, (4,)), samples_per_scale=4).ok


def test_a_hook_on_a_leaf_module_given_as_the_model_is_named_at_its_node():
    torch.manual_seed(0)
    model = nn.Linear(4, 3).eval()
    handle = model.register_forward_hook(_zero_above_1e7)
    ir = ncet.convert(model, (4,))
    report = ncet.check_exactness(model, ir, samples_per_scale=2)
    assert not report.ok and report.first_violation is None
    (name,) = report.unchecked
    assert "a forward hook on the model itself, _zero_above_1e7" in report.entry(name).note
    handle.remove()
    assert ncet.check_exactness(model, ir, samples_per_scale=2).ok
