"""Adversarial review of `ncet.float_margin` (issue 34): each test is a fault found in the
margin's code, proven with an oracle that does not use ncet's bound code (exact rationals from
`rational_at`, PyTorch's float32 evaluation). Each failed before its fix; the comment above
each test says where the fault sat and how it was to be fixed (the fixes: an overflow check
giving eps = inf, NaN never returned, rows summed for any rank, a zero coefficient taking
nothing from an infinite bound, a work budget for the default splitting, a positive
denominator in the exact AvgPool2d)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from torch import nn

import ncet
from ncet.properties.exact_eval import rational_at


class Lambda(nn.Module):
    def __init__(self, fn, *modules):
        super().__init__()
        self.fn, self.layers = fn, nn.ModuleList(modules)

    def forward(self, x):
        return self.fn(self.layers, x)


def _float32_at(ir, x32: torch.Tensor) -> list[float]:
    """PyTorch's float32 evaluation of the GraphIR at one float32 point, flattened."""
    out = ncet.evaluate(ir, x32.reshape(1, *x32.shape), dtype=torch.float32)
    out = out if isinstance(out, tuple) else (out,)
    return [float(v) for o in out for v in o.flatten()]


def _exact_at(ir, x32: torch.Tensor) -> list[Fraction]:
    return rational_at(ir, [Fraction(float(v)) for v in x32.flatten()])


def _covered(deviation: float | Fraction, eps: float) -> bool:
    """|f32 - exact| <= eps, exactly: an infinite eps (no bound claimed) covers anything, a
    NaN nothing, a finite eps no infinite deviation."""
    if eps == float("inf"):
        return True
    return deviation != float("inf") and eps == eps and Fraction(deviation) <= Fraction(eps)


def _within(lo: float, value: Fraction, hi: float) -> bool:
    """lo <= value <= hi exactly, infinite ends allowed (NaN ends hold nothing)."""
    return lo == lo and hi == hi and (lo == -float("inf") or Fraction(lo) <= value) and (
        hi == float("inf") or value <= Fraction(hi))


# --- 1. float32 overflow is outside the rounding model, and eps ignores it -----------------
# Fault: the rounding bound B(S, X) of every rule (ncet/exactness/bounds.py: Rounding.bound,
# used by ncet/regions/float_errors.py: rounding_bound) models a rounding as a relative error
# u|v| plus an underflow term; a value beyond the dtype's largest finite number rounds to
# infinity instead, an error no finite eps covers. float_margin never checks that the float
# range of a node (state.lower/upper -/+ errors.eps) stays below the overflow threshold
# (ncet/regions/margin.py: _Network.bound), so it returns a finite eps where float32 gives inf.
# Here x * 4 overflows float32 at x = 3e38 and * 0.125 brings the exact value back to 1.5e38.
# Proposed fix: in _Network.bound, after each node's eps, if max(|lower|, |upper|) + eps of a
# node (or of the input under input_rounding) may reach (2 - 2^-p) 2^emax of its dtype (the
# round-to-nearest overflow threshold: float32 2^128 (1 - 2^-25)), raise a ValueError naming
# the node ("float32 may overflow at node l over the region") or return eps = inf for the
# outputs it reaches; the same check for float64 bound arithmetic (finding 2).
def test_an_intermediate_float32_overflow_is_not_covered_by_a_finite_eps():
    linear = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        linear.weight.fill_(4.0)
    ir = ncet.convert(Lambda(lambda layers, x: layers[0](x) * 0.125, linear).eval(), (1,))
    x32 = torch.tensor([3e38], dtype=torch.float32)
    lower, upper = torch.tensor([1e38], dtype=torch.float64), x32.double()
    exact = _exact_at(ir, x32)[0]
    assert exact == Fraction(float(x32)) * 4 / 8  # finite: 1.5e38
    y32 = _float32_at(ir, x32)[0]
    assert y32 == float("inf")  # float32: 4 x overflows before the product by 0.125
    try:
        margin = ncet.float_margin(ir, (lower, upper))
    except (ValueError, RuntimeError):
        return  # a refusal is a correct answer
    assert _covered(abs(Fraction(y32) - exact) if y32 != float("inf") else y32,
                    float(margin.eps[0])), (y32, float(exact), margin.eps)
    assert float(margin.eps[0]) == float("inf"), "a float32 overflow leaves no bound"


# --- 2. a wide (finite) region makes eps and the value bounds NaN --------------------------
# Fault: the float64 arithmetic of the bounds overflows for regions near float64's largest
# number: (lower + upper) / 2, hi - lo in the ReLU chord (linear_bounds.py: interval_step,
# _relu_lines) and |W| |x| sums reach inf, then inf - inf = NaN, and float_margin returns
# eps = NaN and lower = upper = NaN (ncet/regions/margin.py: _Network.bound), which contain no
# exact output and cover no error (every comparison with NaN is False); `tighten` would
# refuse the NaN only later. The box [-1.7e308, 1.7e308]^3 is finite and valid (region_boxes
# accepts it); the point x = 0 is in it.
# Proposed fix: the overflow check of finding 1 (a region or a node whose float range
# reaches the overflow threshold of its dtype is refused with a ValueError naming it), which
# also keeps every float64 intermediate of the bounds finite.
def test_a_huge_finite_region_gives_nan_eps_and_nan_bounds():
    torch.manual_seed(0)
    ir = ncet.convert(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).eval(), (3,))
    big = torch.full((3,), 1.7e308, dtype=torch.float64)
    try:
        margin = ncet.float_margin(ir, (-big, big), splits=4)
    except (ValueError, RuntimeError):
        return  # a refusal is a correct answer
    x32 = torch.zeros(3)
    exact, y32 = _exact_at(ir, x32), _float32_at(ir, x32)
    for j in range(2):
        assert _covered(abs(Fraction(y32[j]) - exact[j]), float(margin.eps[j])), margin.eps
        lo, hi = float(margin.lower[j]), float(margin.upper[j])
        assert _within(lo, exact[j], hi), (lo, hi)


# --- 3. an output with no elements crashes float_margin -----------------------------------
# Fault: ncet/regions/margin.py: _Network._outputs sums the backward pass's shares with
# `sum(own.values())`; an output of zero elements has no rows, so no shares, and the sum is
# the int/float 0, not a (pieces, 0) tensor: `e.shape[1]` raises AttributeError. `convert`
# accepts the model (h[:, 1:1] is a valid, empty Slice) and every other NCET entry point
# handles it.
# Proposed fix: `sum(own.values(), torch.zeros((pieces, n), dtype=torch.float64))` (and the
# same start for any other sum over shares).
def test_an_output_with_no_elements_is_bounded():
    torch.manual_seed(0)
    ir = ncet.convert(Lambda(lambda layers, x: (layers[0](x)[:, 1:1], layers[0](x)),
                             nn.Linear(3, 2)).eval(), (3,))
    lower, upper = -torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    margin = ncet.float_margin(ir, (lower, upper))
    assert margin.eps.shape == (2,)
    x32 = torch.tensor([0.5, -0.25, 1.0])
    y32 = _float32_at(ir, x32)
    # the exact oracle reads one output: the graph with only the second returned
    exact = rational_at(ncet.GraphIR(ir.nodes[:-1] + (type(ir.nodes[-1])(
        ir.nodes[-1].name, "Output", (ir.outputs[1],), {"tuple": False}, None, "",
        ir.nodes[-1].source),), ir.constants), [Fraction(float(v)) for v in x32])
    for j in range(2):
        assert _covered(abs(Fraction(y32[j]) - exact[j]), float(margin.eps[j]))


# The same fault at ordinary magnitudes: a float16 network (convert(..., dtype=float16), whose
# bounds use float16's u and eta, docs/exactness.md §2.3) overflows at 65504. Inputs up to
# 300 times a weight of 300 give inf in float16; the exact output, halved, is 45,000, a float16
# number. float_margin returns eps of about 99 (ncet/regions/margin.py: _Network.bound has no
# overflow check). Proposed fix: as above.
def test_a_float16_overflow_at_ordinary_inputs_is_not_covered_by_a_finite_eps():
    linear = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        linear.weight.fill_(300.0)
    model = Lambda(lambda layers, x: layers[0](x) * 0.5, linear).half().eval()
    ir = ncet.convert(model, (1,), dtype=torch.float16)
    x16 = torch.tensor([300.0], dtype=torch.float16)
    exact = _exact_at(ir, x16)[0]
    assert exact == 45000
    y16 = float(ncet.evaluate(ir, x16[None], dtype=torch.float16).flatten()[0])
    with torch.no_grad():
        assert y16 == float("inf") == float(model(x16[None]).flatten()[0])
    try:
        margin = ncet.float_margin(ir, (torch.tensor([100.0]), torch.tensor([300.0])))
    except (ValueError, RuntimeError):
        return  # a refusal is a correct answer
    assert _covered(y16, float(margin.eps[0])), (y16, margin.eps)
    assert float(margin.eps[0]) == float("inf"), "a float16 overflow leaves no bound"


# --- 4. default splitting ignores the cost of one piece -----------------------------------
# Fault: ncet/regions/margin.py: float_margin splits every box of at most SPLIT_DIMENSIONS (16)
# inputs on a network whose widest node has at most ONE_THREAD_BELOW (4,096) elements into
# AUTO_PIECES (2,048) pieces, and _bound_box keeps bisecting until that count whatever a piece
# costs and whether the split still pays (the module docstring says "while it pays"). On an
# MLP 8-512-512-512 (525k weights, about twice mnist_fc's 256x2) one piece takes about 2 s
# here; 2,048 pieces (4,095 piece-bounds, 16 at a time at 1,024 CROWN rows each) take hours,
# while eps barely moves (8-500-500-500: 3.899e-4 unsplit, 3.855e-4 after 16 pieces, 33 s).
# Memory too: the row chunks (margin.py: _Network.__init__, `CHUNK // widest`) are sized for
# one piece, and lower_bounds / backward_errors repeat them for the 16 pieces bounded
# together, so 16x the intended 4M elements per tensor: 8-1000-1000-1000 peaks at 5.3 GB for
# 17 pieces (82 s; 1.2 GB and 3.9 s unsplit, eps 1.398e-3 vs 1.371e-3); a 2000-wide one held
# 6.5 GB after 10 minutes of the default.
# Proposed fix: choose the default pieces from the cost of the first bound (a time or work
# budget, e.g. stop when the elapsed time would pass 60 s, or pieces x rows x widest node
# within a fixed budget), and stop splitting when the largest eps has not dropped by some
# fraction over the last round of splits; size the row chunks by CHUNK // (widest x pieces
# bounded together); say in the Margin how many pieces it used and why.
def test_the_default_splitting_stays_within_its_work_budget():
    """Fixed by a work budget (margin.py: default_pieces): the pieces a box gets by default
    times the estimated cost of one stay within AUTO_WORK; ACAS Xu-sized networks keep the
    full AUTO_PIECES. Checked on the policy, not by timing (speed goals are benchmarks)."""
    from ncet.regions.margin import AUTO_PIECES, AUTO_WORK, _Network, default_pieces
    torch.manual_seed(0)
    width = 512
    mlp = ncet.convert(nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, width),
                                     nn.ReLU(), nn.Linear(width, width)).eval(), (8,))
    net = _Network(mlp, 2048)
    pieces = default_pieces(net, 1)
    assert 1 <= pieces <= 16 and pieces * net.work <= AUTO_WORK, (pieces, net.work)
    small = ncet.convert(nn.Sequential(*[m for _ in range(6) for m in (
        nn.Linear(5 if _ == 0 else 50, 50), nn.ReLU())], nn.Linear(50, 5)).eval(), (5,))
    assert default_pieces(_Network(small, 2048), 1) == AUTO_PIECES
    assert default_pieces(_Network(small, 2048), 4) == AUTO_PIECES // 4


# --- 5. a node with a per-sample shape of () (one number per sample) crashes ---------------
# Fault: the backward passes lay rows out as (Q, *shape) and reduce them with `.flatten(1)`
# (ncet/regions/linear_bounds.py: lower_bounds, `(a * state.offsets[...]).flatten(1)`, and
# likewise in ncet/regions/float_errors.py: backward_errors and margin.py), which needs a rank
# of at least 2; a node of per-sample shape () gives rows of shape (Q,) and IndexError
# "Dimension out of range". `convert` accepts such models (y[:, 0], x.mean(1) on a vector) and
# `evaluate` runs them.
# Proposed fix: reduce with `.reshape(t.shape[0], -1).sum(1)` instead of `.flatten(1).sum(1)`
# everywhere rows are summed (or keep every row at least (Q, 1) by viewing scalar nodes as
# shape (1,) inside the region code).
@pytest.mark.parametrize("fn", [lambda layers, x: torch.relu(layers[0](x)).mean((1,)),
                                lambda layers, x: torch.relu(layers[0](x)[:, 0]) - x[:, 1]],
                         ids=["mean-to-scalar", "getitem-to-scalar"])
def test_a_node_with_one_number_per_sample_is_bounded(fn):
    torch.manual_seed(0)
    ir = ncet.convert(Lambda(fn, nn.Linear(3, 4)).eval(), (3,))
    assert tuple(ir.node(ir.outputs[0]).shape) == ()
    lower, upper = -torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    margin = ncet.float_margin(ir, (lower, upper), splits=4)
    x32 = torch.tensor([0.5, -0.25, 1.0])
    exact, y32 = _exact_at(ir, x32)[0], _float32_at(ir, x32)[0]
    assert _covered(abs(Fraction(y32) - exact), float(margin.eps[0]))
    assert Fraction(float(margin.lower[0])) <= exact <= Fraction(float(margin.upper[0]))


# --- 6. (outside ncet/regions) the exact oracle gets AvgPool2d's negative divisor wrong ------
# Found while holding float_margin to exact rationals: ncet/properties/exact_eval.py:
# _avg_pool2d returns Scaled(sums, x.den * divisor) with divisor = divisor_override, which
# may be negative (ATTR_RULES allow any non-zero int; PyTorch divides by it); every Scaled
# rule (ReLU's max(num, 0), reduced()'s gcd, fractions) assumes den > 0, so ReLU of the pool
# keeps the wrong sign: rational_at says 0 where the exact value is 2. float_margin itself is
# right here (its range [0.14, 3.14] at this box holds PyTorch's value); `adjudicate` and the
# CLI's exact rows read rational_at.
# Proposed fix: in _avg_pool2d, Scaled(sums * sign(d), x.den * |d|) (a positive denominator
# always).
def test_the_exact_oracle_divides_by_a_negative_divisor_override():
    model = nn.Sequential(nn.AvgPool2d(3, 1, 1, divisor_override=-2), nn.ReLU()).eval()
    ir = ncet.convert(model, (1, 3, 3))
    x = -torch.ones((1, 3, 3))  # integers: the float64 evaluation below is exact
    expected = model(x[None].double()).flatten()
    assert float(expected[0]) == 2.0  # corner window: 4 elements of -1, over -2
    exact = _exact_at(ir, x)
    assert [float(v) for v in exact] == expected.tolist()


# --- 7. an infinite rounding bound turns into NaN eps ------------------------------------
# Fault: gamma_k(u) is infinite once k u >= 1 (ncet/exactness/arithmetic.py: gamma): a
# float16 ReduceMean, AvgPool2d or AdaptiveAvgPool2d over 2,046 or more elements (a global
# average pool of a 64x64 feature map) gets D = inf (float_errors.py: rounding_bound). The
# region code then multiplies it by zeros: a zero coefficient times inf in
# float_errors.py: backward_errors (`co.span() * per_row(delta, q)`) and a zero weight times an
# infinite |float input| in the next node's rounding (`rounding_bound` -> F.linear(|x|, |W|)),
# giving NaN, and float_margin returns eps = NaN for every output: here output 0 is 0 x mean +
# 0.5, exactly 0.5 in float16 and in exact arithmetic (deviation 0), and output 1's honest
# bound is inf. NaN covers nothing and `tighten` refuses it.
# Proposed fix: keep infinities out of products with zero (torch.where(span == 0, 0, span *
# delta) in backward_errors; the same in rounding_bound's magnitudes and forward_error's
# carry), so that eps is inf exactly where an infinite D reaches; better still, bound float16
# and bfloat16 window sums and means as the matrix products already are (they accumulate in
# float32 on the CPU: low_precision_dot_gamma), which keeps them finite.
def test_an_infinite_rounding_bound_does_not_make_eps_nan():
    linear = nn.Linear(1, 2)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[0.0], [1.0]]))
        linear.bias.copy_(torch.tensor([0.5, 0.0]))
    model = Lambda(lambda layers, x: layers[0](x.mean(1, keepdim=True)), linear).half().eval()
    ir = ncet.convert(model, (2048,), dtype=torch.float16)
    margin = ncet.float_margin(ir, (torch.zeros(2048), torch.ones(2048)))
    x16 = torch.full((2048,), 0.25, dtype=torch.float16)
    exact = _exact_at(ir, x16)
    y16 = [float(v) for v in ncet.evaluate(ir, x16[None], dtype=torch.float16).flatten()]
    assert exact[0] == Fraction(1, 2) == Fraction(y16[0])
    assert _covered(abs(Fraction(y16[0]) - exact[0]), float(margin.eps[0])), margin.eps
    assert not torch.isnan(margin.eps).any(), margin.eps


def test_a_partial_sum_that_overflows_leaves_no_bound():
    """A dot product whose terms are each finite but whose partial sums may pass float32's
    largest number ((x + x + x) - x - x - x, x = 1.5e38, in one order) gets eps = inf,
    though its exact value is 0 and each input is finite."""
    linear = nn.Linear(6, 1, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[1.0, 1.0, 1.0, -1.0, -1.0, -1.0]]))
    ir = ncet.convert(nn.Sequential(linear).eval(), (6,))
    x = torch.full((6,), 1.5e38, dtype=torch.float64)
    ordered = torch.tensor([1.5e38, 1.5e38, 1.5e38], dtype=torch.float32).sum()
    assert ordered == float("inf"), "three of the terms overflow float32 in that order"
    margin = ncet.float_margin(ir, (x, x))
    assert float(margin.eps[0]) == float("inf")
