"""The GraphIR's output at a point in exact arithmetic: a certified float64 enclosure, and an
exact rational evaluation for when the enclosure cannot decide.

`enclose_at(ir, x)`: the float64 reference run with a certified radius around the exact real
value of every output element, |value - [[G]](x)| <= radius, the certificate's own radius
propagation (`ncet.exactness.enclosure`, docs/exactness.md §4.2) started from the point's
own rounding error: x is exact (Fractions), its float64 view is rounded to nearest, and the
difference, rounded up, is the input radius. It covers every op_type, BatchNorm's square root
included (its rounding is in the bound).

`rational_at(ir, x)`: the output as exact rationals. Values are held as one integer array
and one common positive denominator (`Scaled`): a float constant is a dyadic rational, so a
layer is an integer matrix product (Python ints in numpy object arrays), far faster than
Fraction arithmetic. BatchNorm (its square root is irrational in general), MaxPool2d,
AdaptiveAvgPool2d and ReduceMean are outside it (`RATIONAL_OPS`): `RationalUnavailable`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import reduce

import numpy as np
import torch

from ..ir import CONSTANT_ATTRS, GraphIR

RATIONAL_OPS = frozenset({
    "Linear", "Conv2d", "AvgPool2d", "MaxPool2d", "AdaptiveAvgPool2d", "ReduceMean",
    "Identity", "ReLU", "LeakyReLU", "Flatten", "Add", "Sub", "ElementwiseAffine", "Concat",
    "Reshape", "Permute", "Transpose", "GetItem", "Slice"})
"""The op_types `rational_at` evaluates exactly."""


class RationalUnavailable(Exception):
    """The graph holds a node exact rational evaluation does not cover (its name and why)."""


def single_input(ir: GraphIR):
    """The graph's one Input node (VNN-COMP networks have one input and one output)."""
    if len(ir.inputs) != 1:
        raise ValueError(f"the network has {len(ir.inputs)} inputs; a VNN-COMP property "
                         "numbers the elements of one input")
    return ir.inputs[0]


def _up(f: Fraction) -> float:
    """The smallest float64 >= f (f >= 0)."""
    v = float(f)
    return v if Fraction(v) >= f else float(np.nextafter(v, np.inf))


def enclose_at(ir: GraphIR, x: list[Fraction]) -> tuple[np.ndarray, np.ndarray]:
    """(value, radius), float64 arrays over the flattened output: |value - exact| <= radius.
    The certificate's own propagation (`ncet.exactness.enclosure.enclose`), started at the
    float64 nearest to X with X's own rounding as the inputs' radius.

    Raises:
        RuntimeError: the arithmetic in force is outside the certificate's model.
        ValueError: a graph with several inputs or outputs.
    """
    from ..exactness.enclosure import enclose

    node = single_input(ir)
    if ir.nodes[-1].attrs.get("tuple"):
        raise ValueError("the network returns several outputs; a VNN-COMP property numbers "
                         "the elements of one")
    values = np.array([float(v) for v in x], dtype=np.float64)
    radius = np.array([_up(abs(v - Fraction(f))) for v, f in zip(x, values)])
    shape = (1, *node.shape)
    out = enclose(ir, torch.from_numpy(values).reshape(shape),
                  input_radii=[torch.from_numpy(radius).reshape(shape)])
    value, radius = out[ir.nodes[-1].inputs[0]]
    return value.reshape(-1).numpy().copy(), radius.expand_as(value).reshape(-1).numpy().copy()


# --- exact rationals -------------------------------------------------------------------------

@dataclass
class Scaled:
    """An exact tensor: num / den, num an object array of Python ints, den a positive int."""

    num: np.ndarray
    den: int

    def to(self, den: int) -> np.ndarray:
        """The numerators over `den` (a multiple of self.den)."""
        return self.num if den == self.den else self.num * (den // self.den)

    def reduced(self) -> Scaled:
        g = reduce(math.gcd, self.num.reshape(-1).tolist(), self.den)
        return self if g == 1 else Scaled(self.num // g, self.den // g)

    def fractions(self) -> list[Fraction]:
        return [Fraction(int(v), self.den) for v in self.num.reshape(-1)]


def _dyadic(t: torch.Tensor) -> Scaled:
    """A float tensor's exact value as integers over a power of two."""
    a = t.detach().to(torch.float64).numpy()
    if not np.isfinite(a).all():
        raise RationalUnavailable("a constant that is not finite")
    mantissa, exponent = np.frexp(a)
    ints = (mantissa * 2.0 ** 53).astype(np.int64)
    exponent = np.where(ints != 0, exponent.astype(np.int64) - 53, 0)
    low = int(exponent[ints != 0].min()) if (ints != 0).any() else 0
    exponent = np.where(ints != 0, exponent, low)
    num = np.empty(a.size, dtype=object)
    num[:] = [int(i) << int(e - low) for i, e in zip(ints.reshape(-1), exponent.reshape(-1))]
    num = num.reshape(a.shape)
    return Scaled(num, 1 << -low) if low < 0 else Scaled(num * (1 << low), 1)


def _combine(a: Scaled, b: Scaled, sign: int = 1, alpha: Fraction = Fraction(1)) -> Scaled:
    """a + sign * alpha * b."""
    den = math.lcm(a.den, b.den * alpha.denominator)
    return Scaled(a.to(den) + sign * alpha.numerator * b.to(den // alpha.denominator), den)


def _linear(node, xs, c):
    w = c[node.attrs["weight"]]
    x = xs[0]
    y = Scaled(np.dot(x.num, w.num.T), x.den * w.den)
    if node.attrs["bias"] is not None:
        y = _combine(y, c[node.attrs["bias"]])
    return y.reduced()


def _patches(num: np.ndarray, kh: int, kw: int, stride, dilation) -> np.ndarray:
    """(C*kh*kw, oh*ow) columns of one sample's (C, H, W) numerators."""
    ch, h, w = num.shape
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    rows = (np.arange(kh)[:, None] * dilation[0])[:, :, None, None] + \
        (np.arange(oh) * stride[0])[None, None, :, None]
    cols = (np.arange(kw)[None, :] * dilation[1])[:, :, None, None] + \
        (np.arange(ow) * stride[1])[None, None, None, :]
    patch = num[:, rows, cols]  # (C, kh, kw, oh, ow)
    return patch.reshape(ch * kh * kw, oh * ow), oh, ow


def _pad(num: np.ndarray, padding, mode: str = "zeros") -> np.ndarray:
    top, bottom, left, right = padding
    if not any(padding):
        return num
    modes = {"zeros": "constant", "reflect": "reflect", "replicate": "edge",
             "circular": "wrap"}
    width = ((0, 0), (0, 0), (top, bottom), (left, right))
    if mode == "zeros":  # np.pad would insert numpy int64 zeros, which overflow
        out = np.full((num.shape[0], num.shape[1], num.shape[2] + top + bottom,
                       num.shape[3] + left + right), 0, dtype=object)
        out[:, :, top:top + num.shape[2], left:left + num.shape[3]] = num
        return out
    return np.pad(num, width, mode=modes[mode])


def _conv2d(node, xs, c):
    a = node.attrs
    w = c[a["weight"]]
    x = xs[0]
    num = _pad(x.num, a["padding"], a["padding_mode"])[0]
    out_ch, in_per_group, kh, kw = w.num.shape
    groups = a["groups"]
    per_out = out_ch // groups
    parts = []
    for g in range(groups):
        cols, oh, ow = _patches(num[g * in_per_group:(g + 1) * in_per_group], kh, kw,
                                a["stride"], a["dilation"])
        wg = w.num[g * per_out:(g + 1) * per_out].reshape(per_out, -1)
        parts.append(np.dot(wg, cols))
    y = Scaled(np.concatenate(parts).reshape(1, out_ch, oh, ow), x.den * w.den)
    if a["bias"] is not None:
        b = c[a["bias"]]
        y = _combine(y, Scaled(b.num.reshape(1, -1, 1, 1), b.den))
    return y.reduced()


def _avg_pool2d(node, xs, c):
    a = node.attrs
    if a["ceil_mode"] or (any(a["padding"]) and not a["count_include_pad"]):
        raise RationalUnavailable(f"{node.name}: AvgPool2d with ceil_mode or padding not "
                                  "counted")
    x = xs[0]
    ph, pw = a["padding"]
    num = _pad(x.num, (ph, ph, pw, pw))[0]
    kh, kw = a["kernel_size"]
    cols, oh, ow = _patches(num, kh, kw, a["stride"], (1, 1))
    sums = cols.reshape(num.shape[0], kh * kw, oh * ow).sum(axis=1)
    divisor = a["divisor_override"] or kh * kw
    sign = -1 if divisor < 0 else 1  # a Scaled keeps its denominator positive
    return Scaled(sign * sums.reshape(1, num.shape[0], oh, ow), x.den * abs(divisor)).reduced()


def _affine(node, xs, c):
    a = node.attrs
    x = xs[0]
    k = Scaled(np.array(Fraction(a["scalar"]).numerator, dtype=object),
               Fraction(a["scalar"]).denominator) if a["constant"] is None \
        else c[a["constant"]]
    kind, alpha = a["kind"], Fraction(a["alpha"] if a["alpha"] is not None else 1)
    if kind == "mul":
        return Scaled(x.num * k.num, x.den * k.den).reduced()
    if kind == "div":
        if (np.asarray(k.num) == 0).any():
            raise RationalUnavailable(f"{node.name}: a division by zero")
        flat = np.broadcast_to(k.num, np.broadcast_shapes(np.shape(k.num), x.num.shape))
        den = reduce(math.lcm, [abs(int(v)) for v in np.unique(flat.reshape(-1))], 1)
        # x / (k/kd) = x * kd / k, over the common multiple `den` of the |k|
        scale = np.vectorize(lambda v: den // v, otypes=[object])(flat)
        return Scaled(x.num * k.den * scale, x.den * den).reduced()
    lhs, rhs = (x, k) if a["tensor_position"] == 0 else (k, x)
    sign = 1 if kind == "add" else -1
    den = math.lcm(lhs.den, rhs.den * alpha.denominator)
    num = lhs.to(den) + sign * alpha.numerator * rhs.to(den // alpha.denominator)
    return Scaled(np.broadcast_to(num, np.broadcast_shapes(np.shape(num), x.num.shape)).copy(),
                  den).reduced()


def _leaky(node, xs, c):
    x = xs[0]
    s = Fraction(node.attrs["negative_slope"])
    num = np.where(x.num < 0, x.num * s.numerator, x.num * s.denominator)
    return Scaled(num, x.den * s.denominator).reduced()


def _index(node, xs, c):
    from ..evaluate import _per_sample_index
    x = xs[0]
    return Scaled(x.num[_per_sample_index(node.attrs["index"])], x.den)


def _concat(node, xs, c):
    den = reduce(math.lcm, (x.den for x in xs), 1)
    return Scaled(np.concatenate([x.to(den) for x in xs], node.attrs["axis"] + 1), den)


def _layout(f):
    return lambda node, xs, c: Scaled(f(node, xs[0].num), xs[0].den)


def _flatten(node, num):
    a = node.attrs
    shape = num.shape
    start, end = a["start_dim"] + 1, a["end_dim"] + 1 if a["end_dim"] >= 0 else \
        len(shape) + a["end_dim"]
    return num.reshape(*shape[:start], -1, *shape[end + 1:])


def _max_pool2d(node, xs, c):
    a = node.attrs
    if a["ceil_mode"]:
        raise RationalUnavailable(f"{node.name}: MaxPool2d with ceil_mode")
    x = xs[0]
    num = x.num[0]
    ph, pw = a["padding"]
    if ph or pw:  # padding never wins a window: it is below every value (at most half a window)
        low = min(num.reshape(-1).tolist()) - 1
        out = np.full((num.shape[0], num.shape[1] + 2 * ph, num.shape[2] + 2 * pw), low,
                      dtype=object)
        out[:, ph:ph + num.shape[1], pw:pw + num.shape[2]] = num
        num = out
    kh, kw = a["kernel_size"]
    cols, oh, ow = _patches(num, kh, kw, a["stride"], a["dilation"])
    best = cols.reshape(num.shape[0], kh * kw, oh * ow).max(axis=1)
    return Scaled(best.reshape(1, num.shape[0], oh, ow), x.den)


def _adaptive_avg_pool2d(node, xs, c):
    x = xs[0]
    num = x.num[0]
    ch, h, w = num.shape
    oh, ow = node.attrs["output_size"]
    windows = [[(i * n // o, -(-(i + 1) * n // o)) for i in range(o)]
               for n, o in ((h, oh), (w, ow))]
    counts = [(r1 - r0) * (c1 - c0) for r0, r1 in windows[0] for c0, c1 in windows[1]]
    den = reduce(math.lcm, counts, 1)
    out = np.empty((ch, oh * ow), dtype=object)
    k = 0
    for r0, r1 in windows[0]:
        for c0, c1 in windows[1]:
            total = num[:, r0:r1, c0:c1].reshape(ch, -1).sum(axis=1)
            out[:, k] = total * (den // counts[k])
            k += 1
    return Scaled(out.reshape(1, ch, oh, ow), x.den * den).reduced()


def _reduce_mean(node, xs, c):
    x = xs[0]
    axes = tuple(a + 1 for a in node.attrs["axes"])
    count = math.prod(x.num.shape[a] for a in axes)
    total = x.num.sum(axis=axes, keepdims=node.attrs["keepdim"])
    return Scaled(np.asarray(total, dtype=object).reshape(np.shape(total)),
                  x.den * count).reduced()


_ZERO = np.zeros((), dtype=object)  # a Python int 0 (a numpy int64 would overflow)

RATIONAL = {
    "Linear": _linear,
    "Conv2d": _conv2d,
    "AvgPool2d": _avg_pool2d,
    "MaxPool2d": _max_pool2d,
    "AdaptiveAvgPool2d": _adaptive_avg_pool2d,
    "ReduceMean": _reduce_mean,
    "Identity": lambda n, xs, c: xs[0],
    "ReLU": lambda n, xs, c: Scaled(np.where(xs[0].num > 0, xs[0].num, _ZERO), xs[0].den),
    "LeakyReLU": _leaky,
    "Flatten": _layout(_flatten),
    "Add": lambda n, xs, c: _combine(xs[0], xs[1], 1, Fraction(n.attrs["alpha"])).reduced(),
    "Sub": lambda n, xs, c: _combine(xs[0], xs[1], -1, Fraction(n.attrs["alpha"])).reduced(),
    "ElementwiseAffine": _affine,
    "Concat": _concat,
    "Reshape": _layout(lambda n, v: v.reshape(1, *n.attrs["shape"])),
    "Permute": _layout(lambda n, v: v.transpose(0, *[p + 1 for p in n.attrs["perm"]])),
    "Transpose": _layout(lambda n, v: np.swapaxes(v, n.attrs["dim0"] + 1, n.attrs["dim1"] + 1)),
    "GetItem": _index,
    "Slice": _index,
}
assert set(RATIONAL) == RATIONAL_OPS


def rational_at(ir: GraphIR, x: list[Fraction]) -> list[Fraction]:
    """The flattened output at x, exactly.

    Raises:
        RationalUnavailable: a node outside `RATIONAL_OPS` (or AvgPool2d with ceil_mode /
            uncounted padding, a division by zero).
    """
    node = single_input(ir)
    outside = [n for n in ir.nodes if n.op_type not in RATIONAL_OPS | {"Input", "Output"}]
    if outside:
        raise RationalUnavailable(f"{outside[0].name} ({outside[0].op_type}) has no exact "
                                  "rational evaluation here")
    den = reduce(math.lcm, (v.denominator for v in x), 1)
    num = np.empty(len(x), dtype=object)
    num[:] = [v.numerator * (den // v.denominator) for v in x]
    env = {node.name: Scaled(num.reshape(1, *node.shape), den)}
    consts: dict[str, Scaled] = {}
    for n in ir.nodes:
        if n.op_type in ("Input", "Output"):
            continue
        for key in CONSTANT_ATTRS[n.op_type]:
            name = n.attrs.get(key)
            if isinstance(name, str) and name not in consts:
                consts[name] = _dyadic(ir.constants[name])
        env[n.name] = RATIONAL[n.op_type](n, [env[i] for i in n.inputs], consts)
    return env[ir.nodes[-1].inputs[0]].fractions()
