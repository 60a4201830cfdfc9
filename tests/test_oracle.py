"""An independent high-precision oracle for the exactness contract (DESIGN.md section 3).

`ORACLE` evaluates GraphIR at 256 bits with mpmath on numpy object arrays, one small function
per op_type written from docs/ir.md and PyTorch's documented semantics; it uses neither torch
ops nor ncet's EVALUATORS. Inputs (float32-representable, so exact in both precisions) and
constants are taken as exact reals. The tests check, for every element of every node:

* float64: |value - exact| <= radius, with (value, radius) from `ncet.exactness.enclosure.enclose`;
* float32 (single-op graphs): |eager float32 model - exact| <= `local_bound(..., float32)`.

The oracle's own error (2^-256 relative per operation) is covered by a slack of
2^-200 * (1 + |exact|); where a radius is positive, |value - exact| / radius <= 1 must also
hold without that slack. Bounds are also checked to be non-vacuous (loosely): radius /
(1 + |value|) stays under a limit per test.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mpmath import mpf
from torch import nn

import ncet
from ncet.exactness.enclosure import enclose, local_bound
from ncet.examples import load_example

PREC = 256
SLACK = mpf(2) ** -200
ZERO = mpf(0)
SCALES = (1e-6, 1.0, 1e4)


# --- the oracle ------------------------------------------------------------------------------

def mp_array(t: torch.Tensor) -> np.ndarray:
    """The exact values of a float tensor as an object array of mpf."""
    flat = [mpf(v) for v in t.detach().double().flatten().tolist()]
    return np.array(flat + [None], dtype=object)[:-1].reshape(tuple(t.shape))


def emap(fn, x):
    return np.frompyfunc(fn, 1, 1)(x)


def _pool_size(size, k, s, p, d, ceil):
    """PyTorch's pooling output length (pooling_output_shape)."""
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)
    out = num // s + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def linear(n, xs, c):
    x, w, b = xs[0], c[n.attrs["weight"]], c.get(n.attrs["bias"])
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty((rows.shape[0], w.shape[0]), dtype=object)
    for i, j in np.ndindex(out.shape):
        out[i, j] = mpmath.fdot(rows[i], w[j]) + (ZERO if b is None else b[j])
    return out.reshape(*x.shape[:-1], w.shape[0])


def _pad_index(i, size, mode):
    if 0 <= i < size or mode == "zeros":
        return i
    if mode == "reflect":
        return -i if i < 0 else 2 * (size - 1) - i
    if mode == "replicate":
        return min(max(i, 0), size - 1)
    return i % size  # circular


def conv2d(n, xs, c):
    a, x = n.attrs, xs[0]
    w, b = c[a["weight"]], c.get(a["bias"])
    top, bottom, left, right = a["padding"]
    (sh, sw), (dh, dw), g = a["stride"], a["dilation"], a["groups"]
    nb, cin, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    rows = [_pad_index(i, h, a["padding_mode"]) for i in range(-top, h + bottom)]
    cols = [_pad_index(j, wd, a["padding_mode"]) for j in range(-left, wd + right)]
    xp = np.full((nb, cin, len(rows), len(cols)), ZERO, dtype=object)
    for r, i in enumerate(rows):
        for s, j in enumerate(cols):
            if 0 <= i < h and 0 <= j < wd:
                xp[:, :, r, s] = x[:, :, i, j]
    oh = (len(rows) - dh * (kh - 1) - 1) // sh + 1
    ow = (len(cols) - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((nb, cout, oh, ow), dtype=object)
    for m, o, p, q in np.ndindex(out.shape):
        grp = o // (cout // g)
        patch = xp[m, grp * cg:(grp + 1) * cg, p * sh:p * sh + dh * (kh - 1) + 1:dh,
                   q * sw:q * sw + dw * (kw - 1) + 1:dw]
        out[m, o, p, q] = mpmath.fdot(patch.flatten(), w[o].flatten()) + (
            ZERO if b is None else b[o])
    return out


def batch_norm(n, xs, c):
    a, x = n.attrs, xs[0]
    ch = {k: d if a[k] is None else c[a[k]].reshape((-1,) + (1,) * (x.ndim - 2))
          for k, d in (("mean", 0), ("var", 0), ("weight", 1), ("bias", 0))}
    root = emap(mpmath.sqrt, ch["var"] + mpf(a["eps"]))
    return (x - ch["mean"]) / root * ch["weight"] + ch["bias"]


def adaptive_avg_pool2d(n, xs, c):
    x, (oh, ow) = xs[0], n.attrs["output_size"]
    h, w = x.shape[2:]
    out = np.empty(x.shape[:2] + (oh, ow), dtype=object)
    for i in range(oh):
        r0, r1 = i * h // oh, -(-(i + 1) * h // oh)
        for j in range(ow):
            c0, c1 = j * w // ow, -(-(j + 1) * w // ow)
            out[:, :, i, j] = x[:, :, r0:r1, c0:c1].sum(axis=(2, 3)) / ((r1 - r0) * (c1 - c0))
    return out


def _windows(n, h, w, dilation=(1, 1)):
    """(output row, col, in-bounds rows, in-bounds cols, padded window size) per output."""
    (kh, kw), (sh, sw), (ph, pw) = n.attrs["kernel_size"], n.attrs["stride"], n.attrs["padding"]
    oh = _pool_size(h, kh, sh, ph, dilation[0], n.attrs["ceil_mode"])
    ow = _pool_size(w, kw, sw, pw, dilation[1], n.attrs["ceil_mode"])
    assert (oh, ow) == tuple(n.shape[1:]), (oh, ow, n)
    for p, q in np.ndindex(oh, ow):
        r0, c0 = p * sh - ph, q * sw - pw
        rs = [r0 + i * dilation[0] for i in range(kh) if 0 <= r0 + i * dilation[0] < h]
        cs = [c0 + j * dilation[1] for j in range(kw) if 0 <= c0 + j * dilation[1] < w]
        padded = (min(r0 + kh, h + ph) - r0) * (min(c0 + kw, w + pw) - c0)
        yield p, q, rs, cs, padded


def avg_pool2d(n, xs, c):
    a, x = n.attrs, xs[0]
    out = np.empty(x.shape[:2] + tuple(n.shape[1:]), dtype=object)
    for p, q, rs, cs, padded in _windows(n, *x.shape[2:]):
        divisor = a["divisor_override"] or (padded if a["count_include_pad"]
                                            else len(rs) * len(cs))
        out[:, :, p, q] = x[:, :, rs][:, :, :, cs].sum(axis=(2, 3)) / divisor
    return out


def max_pool2d(n, xs, c):
    x = xs[0]
    out = np.empty(x.shape[:2] + tuple(n.shape[1:]), dtype=object)
    for p, q, rs, cs, _ in _windows(n, *x.shape[2:], dilation=n.attrs["dilation"]):
        items = [x[:, :, i, j] for i in rs for j in cs]
        out[:, :, p, q] = functools.reduce(np.maximum, items)
    return out


def affine(n, xs, c):
    a, x = n.attrs, xs[0]
    k = mpf(a["scalar"]) if a["constant"] is None else c[a["constant"]]
    lhs, rhs = (x, k) if a["tensor_position"] == 0 else (k, x)
    return {"mul": lambda: x * k, "div": lambda: x / k,
            "add": lambda: lhs + mpf(a["alpha"]) * rhs,
            "sub": lambda: lhs - mpf(a["alpha"]) * rhs}[a["kind"]]()


def flatten(n, xs, c):
    x, s, e = xs[0], n.attrs["start_dim"] + 1, n.attrs["end_dim"] + 1
    return x.reshape(x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


def reduce_mean(n, xs, c):
    axes = tuple(i + 1 for i in n.attrs["axes"])
    count = math.prod(xs[0].shape[i] for i in axes)
    return xs[0].sum(axis=axes, keepdims=n.attrs["keepdim"]) / count


def index(n, xs, c):
    items = [slice(*e) if isinstance(e, list) else e for e in n.attrs["index"]]
    return xs[0][(slice(None), *items)]


ORACLE = {
    "Linear": linear,
    "Conv2d": conv2d,
    "BatchNorm": batch_norm,
    "AdaptiveAvgPool2d": adaptive_avg_pool2d,
    "AvgPool2d": avg_pool2d,
    "MaxPool2d": max_pool2d,
    "Identity": lambda n, xs, c: xs[0],
    "ReLU": lambda n, xs, c: emap(lambda v: v if v > 0 else ZERO, xs[0]),
    "LeakyReLU": lambda n, xs, c: emap(
        lambda v: v if v >= 0 else mpf(n.attrs["negative_slope"]) * v, xs[0]),
    "Flatten": flatten,
    "Add": lambda n, xs, c: xs[0] + mpf(n.attrs["alpha"]) * xs[1],
    "Sub": lambda n, xs, c: xs[0] - mpf(n.attrs["alpha"]) * xs[1],
    "ElementwiseAffine": affine,
    "Concat": lambda n, xs, c: np.concatenate(xs, axis=n.attrs["axis"] + 1),
    "ReduceMean": reduce_mean,
    "Reshape": lambda n, xs, c: xs[0].reshape((xs[0].shape[0], *n.attrs["shape"])),
    "Permute": lambda n, xs, c: xs[0].transpose((0, *[p + 1 for p in n.attrs["perm"]])),
    "Transpose": lambda n, xs, c: np.swapaxes(xs[0], n.attrs["dim0"] + 1, n.attrs["dim1"] + 1),
    "GetItem": index,
    "Slice": index,
}


def exact_values(ir, *inputs: torch.Tensor) -> dict[str, np.ndarray]:
    """Every node's exact value (batched object arrays of mpf), computed at PREC bits."""
    with mpmath.workprec(PREC):
        consts = {k: mp_array(v) for k, v in ir.constants.items()}
        env = {n.name: mp_array(x) for n, x in zip(ir.inputs, inputs)}
        for node in ir.nodes:
            if node.op_type not in ("Input", "Output"):
                env[node.name] = ORACLE[node.op_type](node, [env[i] for i in node.inputs], consts)
                assert env[node.name].shape[1:] == tuple(node.shape), node
    return env


def violations(node, value, radius, exact, worst=None) -> list:
    """Elements where |value - exact| > radius (+ the oracle's slack); `worst[0]`, if given,
    gets the largest |value - exact| / radius where the radius is positive."""
    assert tuple(value.shape) == exact.shape, (node, value.shape, exact.shape)
    bad = []
    with mpmath.workprec(PREC):
        flat = zip(value.double().flatten().tolist(),
                   radius.double().expand_as(value).flatten().tolist(), exact.flatten())
        for i, (v, r, e) in enumerate(flat):
            err = abs(mpf(v) - e)
            if worst is not None and r > 0:
                worst[0] = max(worst[0], float(err / r))
            if not err <= mpf(r) + SLACK * (1 + abs(e)):
                bad.append((node.name, node.op_type, i, v, float(e), r, float(err - mpf(r))))
    return bad


# --- models and inputs -----------------------------------------------------------------------

class Fn(nn.Module):
    """forward(x) = fn(self, x); keyword tensors become buffers."""

    def __init__(self, fn, **buffers):
        super().__init__()
        self.fn = fn
        for name, value in buffers.items():
            self.register_buffer(name, value)

    def forward(self, x):
        return self.fn(self, x)


class Fn2(Fn):
    """forward(x, y) = fn(self, x, y)."""

    def forward(self, x, y):
        return self.fn(self, x, y)


def filled(module: nn.Module, seed: int = 0) -> nn.Module:
    """Fill float parameters and buffers from a local generator (variances positive)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in [*module.named_parameters(), *module.named_buffers()]:
            if t.is_floating_point():
                v = torch.randn(t.shape, generator=g)
                t.copy_(v.abs() + 0.1 if name.endswith("running_var") else v)
    return module.eval()


def inputs_at(shapes, scale: float, batch: int = 3, seed: int = 1) -> list[torch.Tensor]:
    """float32-representable inputs (held as float64) of both signs, every 5th exactly 0."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for shape in shapes:
        x = (torch.randn((batch, *shape), generator=g) * scale).float()
        x.view(-1)[::5] = 0.0
        out.append(x.double())
    return out


def buf(*shape, seed=3, positive=False):
    t = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    return t.abs() + 0.5 if positive else t


def row(name, build, *shapes):
    return pytest.param(build, shapes, name.split("[")[0], id=name)


def mod(cls, *args, **kwargs):
    return lambda: filled(cls(*args, **kwargs))


def fn(f, **buffers):
    return lambda: Fn(f, **buffers)


def fn2(f):
    return lambda: Fn2(f)


ROWS = [
    row("Linear", mod(nn.Linear, 4, 3), (4,)),
    row("Linear[nobias,rank2]", mod(nn.Linear, 4, 3, bias=False), (2, 4)),
    row("Conv2d[stride2]", mod(nn.Conv2d, 2, 3, 3, stride=2), (2, 5, 5)),
    row("Conv2d[pad1,dil2]", mod(nn.Conv2d, 2, 2, 3, padding=1, dilation=2), (2, 6, 6)),
    row("Conv2d[groups2]", mod(nn.Conv2d, 4, 2, 2, groups=2), (4, 4, 4)),
    row("Conv2d[reflect]", mod(nn.Conv2d, 2, 2, 3, padding=1, padding_mode="reflect"), (2, 4, 4)),
    row("Conv2d[replicate]", mod(nn.Conv2d, 1, 2, 3, padding=2, padding_mode="replicate"),
        (1, 3, 3)),
    row("Conv2d[circular]", mod(nn.Conv2d, 1, 2, 3, padding=1, padding_mode="circular"), (1, 4, 3)),
    row("Conv2d[same,even]", mod(nn.Conv2d, 2, 2, (2, 4), padding="same"), (2, 5, 5)),
    row("BatchNorm[1d]", mod(nn.BatchNorm1d, 3, eps=1e-3), (3,)),
    row("BatchNorm[1d,plain]", mod(nn.BatchNorm1d, 3, eps=1e-3, affine=False), (3, 4)),
    row("BatchNorm[2d]", mod(nn.BatchNorm2d, 2, eps=1e-3), (2, 3, 3)),
    row("BatchNorm[2d,plain]", mod(nn.BatchNorm2d, 2, affine=False), (2, 3, 3)),
    row("AdaptiveAvgPool2d[4to2]", mod(nn.AdaptiveAvgPool2d, 2), (2, 4, 4)),
    row("AdaptiveAvgPool2d[5to3]", mod(nn.AdaptiveAvgPool2d, 3), (2, 5, 5)),
    row("AdaptiveAvgPool2d[5x4to2x3]", mod(nn.AdaptiveAvgPool2d, (2, 3)), (1, 5, 4)),
    row("AvgPool2d[ceil]", mod(nn.AvgPool2d, 2, ceil_mode=True), (2, 5, 5)),
    row("AvgPool2d[pad1,exclude]", mod(nn.AvgPool2d, 3, 2, 1, count_include_pad=False),
        (2, 5, 5)),
    row("AvgPool2d[pad1,ceil,include]", mod(nn.AvgPool2d, 3, 2, 1, ceil_mode=True), (1, 6, 6)),
    row("AvgPool2d[divisor3]", mod(nn.AvgPool2d, 2, divisor_override=3), (2, 4, 4)),
    row("MaxPool2d[pad1]", mod(nn.MaxPool2d, 3, 2, padding=1), (2, 5, 5)),
    row("MaxPool2d[dil2]", mod(nn.MaxPool2d, 2, 1, dilation=2), (2, 5, 5)),
    row("MaxPool2d[ceil]", mod(nn.MaxPool2d, 2, ceil_mode=True), (2, 5, 5)),
    row("Identity", mod(nn.Identity), (4,)),
    row("ReLU", mod(nn.ReLU), (2, 3)),
    row("LeakyReLU", mod(nn.LeakyReLU, 0.1), (2, 3)),
    row("Flatten", mod(nn.Flatten), (2, 3, 2)),
    row("Flatten[1,2]", mod(nn.Flatten, 2, 3), (2, 3, 2)),
    row("Add[alpha0.3]", fn2(lambda m, x, y: torch.add(x, y, alpha=0.3)), (2, 3), (2, 3)),
    row("Add[broadcast]", fn2(lambda m, x, y: x + y), (2, 3), (1, 3)),
    row("Sub[alpha0.3]", fn2(lambda m, x, y: torch.sub(x, y, alpha=0.3)), (2, 3), (2, 3)),
    row("ElementwiseAffine[x*0.1]", fn(lambda m, x: x * 0.1), (2, 3)),
    row("ElementwiseAffine[x/3]", fn(lambda m, x: x / 3.0), (2, 3)),
    row("ElementwiseAffine[1.5-x]", fn(lambda m, x: 1.5 - x), (2, 3)),
    row("ElementwiseAffine[add(x,c,0.7)]", fn(lambda m, x: torch.add(x, m.c, alpha=0.7),
                                              c=buf(3)), (2, 3)),
    row("ElementwiseAffine[x/c]", fn(lambda m, x: x / m.c, c=buf(2, 1, positive=True)), (2, 3)),
    row("Concat", fn2(lambda m, x, y: torch.cat([x, y], dim=1)), (2, 3), (1, 3)),
    row("ReduceMean", fn(lambda m, x: x.mean(dim=(1, 2))), (2, 3, 3)),
    row("ReduceMean[keepdim]", fn(lambda m, x: x.mean(-1, keepdim=True)), (2, 5)),
    row("Reshape", fn(lambda m, x: x.view(-1, 3, 2)), (2, 3)),
    row("Permute", fn(lambda m, x: x.permute(0, 2, 3, 1)), (2, 3, 2)),
    row("Transpose", fn(lambda m, x: x.transpose(1, 2)), (2, 3)),
    row("GetItem", fn(lambda m, x: x[:, 1, 2]), (2, 3)),
    row("Slice", fn(lambda m, x: x[:, ::2, None, ..., 1:3]), (4, 3, 4)),
]


def check_enclosure(ir, inputs, ratio_limit=1e-10) -> None:
    """Every node's float64 enclosure contains the exact value (|value - exact| / radius <= 1
    wherever the radius is positive, even without the oracle's slack); radii are not
    vacuous."""
    enclosure = enclose(ir, *inputs)
    exact = exact_values(ir, *inputs)
    bad = []
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        value, radius = enclosure[node.name]
        worst = [0.0]
        bad += violations(node, value, radius, exact[node.name], worst)
        assert worst[0] <= 1, f"error beyond the radius at {node!r}: |err|/radius = {worst[0]!r}"
        ratio = float((radius / (1 + value.abs())).max()) if value.numel() else 0.0
        assert ratio <= ratio_limit, f"vacuous bound at {node!r}: radius/(1+|v|) = {ratio:.3g}"
    assert not bad, "outside the enclosure (node, op, flat index, value, exact, radius, " \
        f"excess): {bad[:5]} ({len(bad)} in all)"


def only_op(ir):
    (node,) = [n for n in ir.nodes if n.op_type not in ("Input", "Output")]
    return node


def check_float32(model, ir, xs) -> None:
    """|eager float32 model - exact| <= local_bound(node, xs, float32) on a single-op graph."""
    node = only_op(ir)
    with torch.no_grad():
        got = model.float()(*[x.float() for x in xs])
    assert got.dtype == torch.float32
    bound = local_bound(node, xs, dict(ir.constants), torch.float32)
    bad = violations(node, got, bound, exact_values(ir, *xs)[node.name])
    assert not bad, "float32 outside the local bound (node, op, flat index, value, exact, " \
        f"bound, excess): {bad[:3]} ({len(bad)} in all)"


# --- the tests -------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", SCALES, ids=lambda s: f"x{s:g}")
@pytest.mark.parametrize(("build", "shapes", "op_type"), ROWS)
def test_float64_enclosure_per_op(build, shapes, op_type, scale):
    """The float64 reference and its certified radius enclose the exact value."""
    ir = ncet.convert(build(), *shapes)
    assert only_op(ir).op_type == op_type, ir
    check_enclosure(ir, inputs_at(shapes, scale))


@pytest.mark.parametrize("scale", SCALES, ids=lambda s: f"x{s:g}")
@pytest.mark.parametrize(("build", "shapes", "op_type"), ROWS)
def test_float32_local_bound_per_op(build, shapes, op_type, scale):
    """PyTorch's own float32 result is within the node's float32 rounding bound."""
    model = build()
    check_float32(model, ncet.convert(model, *shapes), inputs_at(shapes, scale))


def _bn_at_mean(seed):
    """BatchNorm2d with large means and small variances; x = mean + tiny (cancellation)."""
    bn = filled(nn.BatchNorm2d(2, eps=1e-3), seed)
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([1234.5, -0.75]))
        bn.running_var.copy_(torch.tensor([1e-4, 3e-6]))
    x = bn.running_mean.reshape(1, 2, 1, 1).expand(3, 2, 3, 3).clone()
    return bn, [(x + inputs_at([(2, 3, 3)], 1e-4, seed=seed)[0].float()).double()]


def _x_plus_tiny_minus_x(seed):
    return Fn(lambda m, x: x + (1e-7 - x)), inputs_at([(2, 3)], 1e4, seed=seed)


def _add_cancel(seed):
    model = Fn2(lambda m, x, y: torch.add(x, y, alpha=0.3))
    y = inputs_at([(5,)], 1e4, seed=seed)[0]
    x = (-0.3 * y).float().double() + inputs_at([(5,)], 1e-3, seed=seed + 1)[0]
    return model, [x.float().double(), y]


def _linear_cancel(seed):
    lin = nn.Linear(2, 1, bias=True)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.3, 0.7]]))
        lin.bias.fill_(1e-5)
    a = inputs_at([(1,)], 1e4, seed=seed)[0]
    x = torch.cat([a, (-0.3 * a / 0.7).float().double()], dim=1)
    return lin.eval(), [x]


CANCEL = [pytest.param(f, id=f.__name__.strip("_")) for f in
          (_bn_at_mean, _x_plus_tiny_minus_x, _add_cancel, _linear_cancel)]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("make", CANCEL)
def test_cancellation(make, seed):
    """Adversarial cancellation: the exact result is far smaller than the terms summed."""
    model, xs = make(seed)
    ir = ncet.convert(model, *[tuple(x.shape[1:]) for x in xs])
    check_enclosure(ir, xs, ratio_limit=1e-9)
    if len(ir.nodes) == len(xs) + 2:  # one operator node: also the float32 side
        check_float32(model, ir, xs)


def _bn_subnormal_weight():
    bn = nn.BatchNorm1d(3, eps=1e-3)
    with torch.no_grad():
        bn.running_var.copy_(torch.tensor([0.7, 1.3, 2.0]))
        bn.weight.copy_(torch.tensor([1e-40, 3e-41, 1.0]))
    return bn.eval()


SUBNORMAL = [  # float32 scalars/products in the subnormal range, times |x| ~ 1e30
    pytest.param(fn(lambda m, x: x * 1e-40), id="ElementwiseAffine[x*1e-40]"),
    pytest.param(fn(lambda m, x: torch.sub(m.c, x, alpha=1e-40), c=torch.zeros(3)),
                 id="ElementwiseAffine[sub(c,x,1e-40)]"),
    pytest.param(fn2(lambda m, x, y: torch.add(x, y, alpha=1e-40)), id="Add[1e-40]"),
    pytest.param(fn2(lambda m, x, y: torch.sub(x, y, alpha=3e-41)), id="Sub[3e-41]"),
    pytest.param(lambda: nn.LeakyReLU(1e-40), id="LeakyReLU[1e-40]"),
    pytest.param(_bn_subnormal_weight, id="BatchNorm[weight 3e-41]"),
]


@pytest.mark.parametrize("build", SUBNORMAL)
def test_float32_subnormal_constant(build):
    """A Python scalar (or BatchNorm's fused weight/sqrt(var+eps)) that float32 rounds into the
    subnormal range carries an absolute error (up to 2^-150) that |x| then scales up: a relative
    gamma_k term plus k * eta * (1 + M) does not cover it when |x| is large."""
    model = build()
    shapes = [(3,)] * (2 if isinstance(model, Fn2) else 1)
    x = torch.tensor([[-1e30, 7e29, -3e29], [1e30, -2.0, 0.0]]).float().double()
    xs = [torch.zeros_like(x), x] if len(shapes) == 2 else [x]
    ir = ncet.convert(model, *shapes)
    check_enclosure(ir, xs, ratio_limit=math.inf)
    check_float32(model, ir, xs)


class SmallCNN(nn.Module):
    """conv -> BN -> relu -> maxpool -> conv -> residual add -> avgpool -> flatten -> linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3, eps=1e-3)
        self.conv2 = nn.Conv2d(3, 3, 3, padding=1, bias=False)
        self.fc = nn.Linear(12, 4)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2, ceil_mode=True)
        y = F.avg_pool2d(self.conv2(y) + y * 0.5, 2, ceil_mode=True)
        return self.fc(torch.flatten(y, 1))


COMPOSED = [
    pytest.param(lambda: load_example("mlp"), 3, SCALES, id="mlp"),
    pytest.param(lambda: load_example("lenet"), 1, (1.0,), id="lenet"),
    pytest.param(lambda: load_example("residual_cnn"), 1, (1.0,), id="residual_cnn"),
    pytest.param(lambda: (filled(SmallCNN()), ((2, 6, 6),)), 2, SCALES, id="small_cnn"),
]


@pytest.mark.parametrize(("load", "batch", "scales"), COMPOSED)
def test_composed_enclosure(load, batch, scales):
    """Radii propagated through whole graphs still enclose the exact values at every node."""
    model, shapes = load()
    ir = ncet.convert(model, *shapes)
    for scale in scales:
        check_enclosure(ir, inputs_at(shapes, scale, batch=batch), 1e-9)



# --- under flush-to-zero: every thread flushing, and bfloat16 kernels ------------------------

class FlushProbe(nn.Module):
    """Linear -> * c (a buffer of the model's dtype) -> ReLU -> Linear: each child one IR
    node, so PyTorch's value at every node is the output of a child."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 8), Scale(), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x):
        return self.layers(x)


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.linspace(0.5, 2.0, 8))

    def forward(self, x):
        return x * self.c


def flush_probe(dtype: torch.dtype) -> FlushProbe:
    """FlushProbe with half its first weights scaled by 2^40 (a subnormal input read as zero
    loses up to 2^40 eta there, far beyond the k eta of gradual underflow), the other half by
    2^-4 (products of inputs near 2^-126 underflow and are flushed), and its first bias by
    2^-100 (so that it does not hide either)."""
    model = filled(FlushProbe(), seed=5)
    with torch.no_grad():
        model.layers[0].weight[:, :8] *= 2.0 ** 40
        model.layers[0].weight[:, 8:] *= 2.0 ** -4
        model.layers[0].bias.mul_(2.0 ** -100)
    return model.to(dtype)


FLUSH_ROWS = 64
"""At this batch a bfloat16 Linear takes oneDNN's kernels (AVX512-BF16/AMX), which flush."""


def flush_inputs(dtype: torch.dtype) -> torch.Tensor:
    """Rows at 2^-126 (subnormal and near-underflow elements), 2^-120 and 1, every 5th
    element 0; made before any flag is set, so the subnormals are stored."""
    g = torch.Generator().manual_seed(7)
    scales = torch.tensor([2.0 ** -126, 2.0 ** -120, 1.0]).repeat_interleave(
        torch.tensor([32, 16, 16])).reshape(-1, 1)
    x = torch.randn(FLUSH_ROWS, 16, generator=g) * scales
    x.view(-1)[::5] = 0.0
    return x.to(dtype)


FLUSHING_RUN = """
import json, sys, torch, ncet
from tests.test_oracle import flush_probe, flush_inputs
dtype = getattr(torch, sys.argv[1])
torch.manual_seed(0)
model, x = flush_probe(dtype).eval(), flush_inputs(dtype)
bits = torch.int16 if dtype == torch.bfloat16 else torch.int32
stored_subnormal = bool(((x.abs() < torch.finfo(dtype).tiny) & (x.view(bits) != 0)).any())
torch.set_num_threads(2)
torch.set_flush_denormal(True)      # the calling thread, before the workers start
_ = torch.randn(1 << 20) * 2        # the OpenMP workers start now and copy it: every thread
values = [x]
with torch.no_grad():
    for layer in model.layers:
        values.append(layer(values[-1]))
flushed = bool(((values[0] * 1.0).view(bits) == 0).sum() > (x.view(bits) == 0).sum())
ir = ncet.convert(model, (16,), dtype=dtype)
report = ncet.check_exactness(model, ir, x)
faults = {}
for name, index in (("layers.1.c", 0), ("layers.3.weight", (0, 0))):
    faulty = ir.constants[name].clone()
    up = torch.nextafter(faulty[index].bfloat16(), torch.tensor(float("inf"), dtype=torch.bfloat16))
    faulty[index] += (up.float() - faulty[index].bfloat16().float()).to(dtype)  # one bf16 ulp
    seeded = ncet.check_exactness(model, ncet.GraphIR(ir.nodes, {**ir.constants, name: faulty}), x)
    faults[name] = None if seeded.first_violation is None else seeded.first_violation.name
from ncet.exactness.enclosure import enclose
enclosure = enclose(ir, x)  # the float64 reference and its radii, computed while flushing
torch.save({"values": values, "enclosure": enclosure}, sys.argv[2])
print(json.dumps({"ok": report.ok, "flush": report.arithmetic.flush,
                  "operand_u": report.arithmetic.operand_u,
                  "summary": report.summary(), "flushed": flushed,
                  "stored_subnormal": stored_subnormal, "faults": faults}))
"""


def flushing_run(dtype: torch.dtype, path, env: dict[str, str] | None = None) -> tuple[dict, dict]:
    """FlushProbe run in a fresh interpreter with flush-to-zero and denormals-are-zero on
    every thread (and `env` added to its environment): the check's verdict there, and
    PyTorch's value at every node ("values") and `enclose`'s ("enclosure")."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", FLUSHING_RUN,
                           str(dtype).removeprefix("torch."), str(path)],
                          capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), torch.load(path)


def flush_ratios(dtype: torch.dtype, values: list[torch.Tensor], flush: bool = True,
                 operand_u: float = 0.0) -> tuple[dict[str, list[float]], list]:
    """Every node's PyTorch value (computed while flushing) against the exact value on
    PyTorch's own inputs, held to `local_bound` with the underflow term (`flush`) or
    without: |error| / bound per element where the bound is positive, by node, and the
    elements outside the bound."""
    from ncet.exactness.arithmetic import ArithmeticModel
    model = flush_probe(dtype).eval()
    ir = ncet.convert(model, (16,), dtype=dtype)
    nodes = [n for n in ir.nodes if n.op_type not in ("Input", "Output")]
    assert len(nodes) == len(values) - 1
    arithmetic = ArithmeticModel(operand_u, flush=flush)
    ratios, bad = {}, []
    with mpmath.workprec(PREC):
        consts = {k: mp_array(v) for k, v in ir.constants.items()}
    for node, x, t in zip(nodes, values, values[1:]):
        bound = local_bound(node, [x], dict(ir.constants), dtype, arithmetic)
        with mpmath.workprec(PREC):
            exact = ORACLE[node.op_type](node, [mp_array(x)], consts)
            ratios[node.name] = [float(abs(mpf(v) - e) / r) for v, r, e in zip(
                t.double().flatten().tolist(),
                bound.double().expand_as(t).flatten().tolist(), exact.flatten()) if r > 0]
        bad += violations(node, t, bound, exact)
    return ratios, bad


@pytest.mark.parametrize(("dtype", "env"), [
    (torch.float32, {}), (torch.bfloat16, {}),
    (torch.float32, {"ONEDNN_DEFAULT_FPMATH_MODE": "BF16"}),
], ids=["float32", "bfloat16", "float32-onednn-bf16-mode"])
def test_every_node_under_flush_to_zero_is_within_the_bound(dtype, env, tmp_path):
    """Flush-to-zero and denormals-are-zero on every thread (in bfloat16 also oneDNN's
    kernels at 64 rows; with oneDNN's bf16 math mode, its float32 products with bf16
    operands): the check certifies with the underflow term, and the exact oracle holds
    PyTorch's value at every node to that bound (ratio <= 1); the bounds of gradual
    underflow do not hold there, so the flush is real and the term needed."""
    found, saved = flushing_run(dtype, tmp_path / "values.pt", env)
    values = saved["values"]
    assert found["stored_subnormal"] and found["flushed"], "nothing was flushed"
    assert found["ok"] and found["flush"], found["summary"]
    assert "flush-to-zero seen" in found["summary"]
    operand_u = 2.0 ** -8 if env else 0.0
    assert found["operand_u"] == operand_u
    # one bf16 ulp of the scale 0.5 (exact products, so PyTorch's value has no rounding to
    # hide it in) is found in both dtypes; one bf16 ulp of a weight only in float32 products:
    # in a bfloat16 Linear, or with bf16 operands, it is within the roundings the rule
    # allows (§5.3)
    assert found["faults"]["layers.1.c"] == "mul"
    if dtype == torch.float32 and not env:
        assert found["faults"]["layers.3.weight"] == "layers_3"
    ratios, bad = flush_ratios(dtype, values, operand_u=operand_u)
    assert not bad, f"outside the bound under flushing: {bad[:3]} ({len(bad)} in all)"
    assert all(r <= 1 for rs in ratios.values() for r in rs)
    _, gradual = flush_ratios(dtype, values, flush=False, operand_u=operand_u)
    assert gradual, "gradual underflow's bounds hold: the run did not need the term"
    # the reference's enclosure, computed while flushing, contains the exact values
    ir = ncet.convert(flush_probe(dtype).eval(), (16,), dtype=dtype)
    exact = exact_values(ir, values[0])
    outside = []
    for node in ir.nodes[1:-1]:
        value, radius = saved["enclosure"][node.name]
        outside += violations(node, value, radius, exact[node.name])
    assert not outside, f"outside the enclosure under flushing: {outside[:3]}"


# --- under flushing, end to end: subnormal graph inputs through exact ops ---------------------

def daz_models() -> dict[str, tuple[nn.Module, tuple]]:
    """Input -> ReLU -> Linear and Input -> MaxPool -> Conv (padding 1), weights 2^40: a
    subnormal input that denormals-are-zero reads as zero before the rounding node loses up
    to 2^40 eta there, which no rounding node's own inputs show (they are zeros)."""
    relu = nn.Sequential(nn.ReLU(), nn.Linear(4, 2, bias=False))
    pool = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(1, 2, 3, padding=1, bias=False))
    with torch.no_grad():
        relu[1].weight.fill_(2.0 ** 40)
        pool[1].weight.fill_(2.0 ** 40)
    return {"ReLU-Linear": (relu.eval(), (4,)), "MaxPool-Conv": (pool.eval(), (1, 4, 4))}


def daz_input(shape: tuple) -> torch.Tensor:
    """Three samples of positive subnormal float32 values, made from their bits (stored
    before any flag is set)."""
    count = math.prod(shape)
    bits = (torch.arange(3 * count, dtype=torch.int32) % 7 + 1) << 19
    return bits.view(torch.float32).reshape(3, *shape).clone()


DAZ_RUN = """
import json, sys, torch, ncet
from tests.test_oracle import daz_models, daz_input
torch.set_num_threads(2)
torch.set_flush_denormal(True)      # the calling thread, before the workers start
_ = torch.randn(1 << 20) * 2        # the OpenMP workers start now and copy it: every thread
found, saved = {}, {}
for name, (model, shape) in daz_models().items():
    x = daz_input(shape)
    ir = ncet.convert(model, shape)
    report = ncet.check_exactness(model, ir, x)
    with torch.no_grad():
        saved[name] = model(x)
    found[name] = {"ok": report.ok, "flush": report.arithmetic.flush,
                   "bound": report.outputs[0].max_bound, "summary": report.summary()}
torch.save(saved, sys.argv[1])
print(json.dumps(found))
"""


def test_subnormal_inputs_through_exact_ops_under_flushing(tmp_path):
    """Flush-to-zero and denormals-are-zero on every thread, subnormal graph inputs into
    ReLU -> Linear and MaxPool -> Conv: PyTorch's output (zeros) is far from the exact value
    on the original inputs, and the certificate's end-to-end bound at the output holds it
    (ratio <= 1): the inputs' radius eta carried through the exact op is charged."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", DAZ_RUN, str(tmp_path / "out.pt")],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    saved = torch.load(tmp_path / "out.pt")
    for name, (model, shape) in daz_models().items():
        x = daz_input(shape)
        ir = ncet.convert(model, shape)
        exact = exact_values(ir, x)[ir.outputs[0]]
        got = found[name]
        assert got["flush"], got["summary"]
        with mpmath.workprec(PREC):
            errors = [abs(mpf(v) - e) for v, e in zip(
                saved[name].double().flatten().tolist(), exact.flatten())]
            worst = float(max(errors))
        smallest = float(min(abs(e) for e in exact.flatten()))
        assert worst > 2.0 ** -126 * 2.0 ** 30, f"{name}: not flushed ({worst:.3g})"
        assert smallest > 0
        assert got["ok"], f"{name}: {got['summary']}"
        assert worst <= got["bound"], f"{name}: error {worst:.3g} > bound {got['bound']:.3g}"


# --- every op's row under flushing: subnormal inputs, every thread flushing -------------------

FLUSH_SCALE = 2.0 ** -124
"""Inputs of the flushed rows: randn times this, about a fifth of them subnormal in float32."""

FLUSHED_ROWS_RUN = """
import sys, torch
from tests.test_oracle import ROWS, FLUSH_SCALE, inputs_at
rows = [(p.id, p.values[0], p.values[1]) for p in ROWS]
inputs = {name: [x.float() for x in inputs_at(shapes, FLUSH_SCALE)] for name, _, shapes in rows}
torch.set_num_threads(2)
torch.set_flush_denormal(True)      # the calling thread, before the workers start
_ = torch.randn(1 << 20) * 2        # the OpenMP workers start now and copy it: every thread
with torch.no_grad():
    values = {name: build().float()(*inputs[name]) for name, build, _ in rows}
flushed = bool((torch.tensor([1e-40]) * 1.0 == 0).all())
torch.save({"inputs": inputs, "values": values, "flushed": flushed}, sys.argv[1])
"""


def test_every_op_under_flush_to_zero_is_within_its_local_bound(tmp_path):
    """Every per-op row (Conv2d with padding, BatchNorm, the pools, Add, LeakyReLU, the
    data movement ops...) computed in float32 with flush-to-zero and denormals-are-zero on
    every thread, on inputs near 2^-124 (a fifth of them subnormal): the exact oracle holds
    PyTorch's value to `local_bound` with the underflow term (ratio <= 1), which the
    gradual bounds alone do not."""
    import os
    import subprocess
    import sys

    from ncet.exactness.arithmetic import ArithmeticModel
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = tmp_path / "rows.pt"
    done = subprocess.run([sys.executable, "-c", FLUSHED_ROWS_RUN, str(path)],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = torch.load(path)
    assert saved["flushed"], "the subprocess did not flush: the test would prove nothing"
    bad, worst, gradual, subnormal = [], {}, [], 0
    for param in ROWS:
        name, (build, shapes, op_type) = param.id, param.values
        xs, got = saved["inputs"][name], saved["values"][name]
        subnormal += sum(int(((x != 0) & (x.abs() < 2.0 ** -126)).sum()) for x in xs)
        ir = ncet.convert(build(), *shapes)
        node = only_op(ir)
        assert node.op_type == op_type, name
        exact = exact_values(ir, *xs)[node.name]
        for flush, found in ((True, bad), (False, gradual)):
            bound = local_bound(node, xs, dict(ir.constants), torch.float32,
                                ArithmeticModel(flush=flush))
            ratio = [0.0]
            found += violations(node, got, bound, exact, ratio)
            if flush:
                worst[name] = ratio[0]
    assert subnormal > 100, subnormal
    assert not bad, f"outside the bound under flushing: {bad[:3]} ({len(bad)} in all)"
    assert max(worst.values()) <= 1, worst
    # without the term the comparisons' flushed reads (MaxPool, ReLU) are outside: it is needed
    assert gradual, "the gradual bounds hold: nothing was read as zero"
