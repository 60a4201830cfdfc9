"""The per-sample output shape of an IR node from its inputs' shapes and its attributes, as
PyTorch computes it (`ncet.evaluate`'s semantics), with the checks PyTorch would make when
it runs: one small function per op_type. An import works out every node's shape here, in
microseconds, rather than by running the reference evaluator on meta tensors (tens of
microseconds per node through torch's decompositions); tests hold both to each other."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

Shape = tuple[int, ...]
ShapeRule = Callable[[Mapping, Sequence[Shape], Mapping[str, Shape]], Shape]


class ShapeError(ValueError):
    """The node does not compute on inputs of these shapes."""


def _need(condition: bool, why: str) -> None:
    if not condition:
        raise ShapeError(why)


def _broadcast(*shapes: Shape) -> Shape:
    rank = max(len(s) for s in shapes)
    out = []
    for sizes in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes]):
        kept = {d for d in sizes if d != 1}
        _need(len(kept) <= 1, f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(kept.pop() if kept else 1)
    return tuple(out)


def _linear(a, xs, c):
    (x,), w = xs, c[a["weight"]]
    _need(len(x) >= 1 and len(w) == 2 and x[-1] == w[1],
          f"a Linear of weight {list(w)} on per-sample shape {list(x)}")
    if a["bias"] is not None:
        _need(c[a["bias"]] == (w[0],), f"a bias of shape {list(c[a['bias']])}")
    return (*x[:-1], w[0])


def _window(size: int, kernel: int, stride: int, before: int, after: int, dilation: int,
            ceil: bool = False, pool: bool = False) -> int:
    span = size + before + after - dilation * (kernel - 1) - 1
    _need(span >= 0, f"a window of {kernel} (dilation {dilation}) larger than the padded "
          f"input {size + before + after}")
    out = (-(-span // stride) if ceil else span // stride) + 1
    if pool and ceil and (out - 1) * stride >= size + before:
        out -= 1  # PyTorch drops a last window that starts in the right padding
    return out


def _conv2d(a, xs, c):
    (x,), w = xs, c[a["weight"]]
    top, bottom, left, right = a["padding"]
    groups = a["groups"]
    _need(len(x) == 3 and len(w) == 4 and x[0] == w[1] * groups and w[0] % groups == 0,
          f"a Conv2d of weight {list(w)} (groups {groups}) on per-sample shape {list(x)}")
    if a["bias"] is not None:
        _need(c[a["bias"]] == (w[0],), f"a bias of shape {list(c[a['bias']])}")
    (sh, sw), (dh, dw) = a["stride"], a["dilation"]
    return (w[0], _window(x[1], w[2], sh, top, bottom, dh),
            _window(x[2], w[3], sw, left, right, dw))


def _pool(a, xs, c):
    (x,) = xs
    _need(len(x) == 3, f"2-d pooling of per-sample shape {list(x)}")
    dilation = a.get("dilation", [1, 1])
    for k, p, d in zip(a["kernel_size"], a["padding"], dilation):
        _need(2 * p <= d * (k - 1) + 1, "pad should be at most half of the effective "
              "kernel size (PyTorch refuses more)")
    sizes = [_window(n, k, s, p, p, d, a["ceil_mode"], pool=True) for n, k, s, p, d in
             zip(x[1:], a["kernel_size"], a["stride"], a["padding"], dilation)]
    _need(min(sizes) >= 1, "an empty pooled output")
    return (x[0], *sizes)


def _batch_norm(a, xs, c):
    (x,) = xs
    _need(1 <= len(x) <= 3 and c[a["mean"]] == (x[0],),
          f"a BatchNorm of {list(c[a['mean']])} channels on per-sample shape {list(x)}")
    return x


def _affine(a, xs, c):
    (x,) = xs
    if a["constant"] is None:
        return x
    out = _broadcast((1, *x), c[a["constant"]])
    _need(out[1:] == tuple(x) and len(out) == len(x) + 1,
          f"a constant of shape {list(c[a['constant']])} changes per-sample shape {list(x)}")
    return x


def _flatten(a, xs, c):
    (x,) = xs
    start, end = a["start_dim"], a["end_dim"]
    _need(0 <= start <= end < max(len(x), 1), f"flatten {start}..{end} of {list(x)}")
    return (*x[:start], math.prod(x[start:end + 1]), *x[end + 1:])


def _concat(a, xs, c):
    axis = a["axis"]
    first = xs[0]
    _need(0 <= axis < len(first) and all(
        len(s) == len(first) and all(s[k] == first[k] for k in range(len(s)) if k != axis)
        for s in xs), f"concatenating {[list(s) for s in xs]} on axis {axis}")
    return (*first[:axis], sum(s[axis] for s in xs), *first[axis + 1:])


def _reduce_mean(a, xs, c):
    (x,) = xs
    axes = set(a["axes"])
    _need(all(0 <= k < len(x) for k in axes), f"axes {sorted(axes)} of {list(x)}")
    return tuple(1 if k in axes else d for k, d in enumerate(x) if a["keepdim"] or
                 k not in axes)


def _reshape(a, xs, c):
    (x,) = xs
    _need(math.prod(a["shape"]) == math.prod(x), f"reshape {list(x)} to {a['shape']}")
    return tuple(a["shape"])


def _permute(a, xs, c):
    (x,) = xs
    _need(sorted(a["perm"]) == list(range(len(x))), f"perm {a['perm']} of {list(x)}")
    return tuple(x[p] for p in a["perm"])


def _transpose(a, xs, c):
    (x,) = xs
    i, j = a["dim0"], a["dim1"]
    _need(0 <= i < len(x) and 0 <= j < len(x), f"transpose {i}, {j} of {list(x)}")
    out = list(x)
    out[i], out[j] = out[j], out[i]
    return tuple(out)


def _index(a, xs, c):
    (x,) = xs
    out, axis = [], 0
    for entry in a["index"]:
        if entry is None:
            out.append(1)
            continue
        _need(axis < len(x), f"index {a['index']} of {list(x)}")
        if isinstance(entry, (list, tuple)):
            out.append(len(range(*slice(*entry).indices(x[axis]))))
        else:
            _need(-x[axis] <= entry < x[axis], f"index {entry} of size {x[axis]}")
        axis += 1
    return (*out, *x[axis:])


SHAPE_RULES: dict[str, ShapeRule] = {
    "Linear": _linear,
    "Conv2d": _conv2d,
    "BatchNorm": _batch_norm,
    "AdaptiveAvgPool2d": lambda a, xs, c: (xs[0][0], *a["output_size"]),
    "AvgPool2d": _pool,
    "MaxPool2d": _pool,
    "Identity": lambda a, xs, c: xs[0],
    "ReLU": lambda a, xs, c: xs[0],
    "LeakyReLU": lambda a, xs, c: xs[0],
    "Flatten": _flatten,
    "Add": lambda a, xs, c: _broadcast(*xs),
    "Sub": lambda a, xs, c: _broadcast(*xs),
    "ElementwiseAffine": _affine,
    "Concat": _concat,
    "ReduceMean": _reduce_mean,
    "Reshape": _reshape,
    "Permute": _permute,
    "Transpose": _transpose,
    "GetItem": _index,
    "Slice": _index,
}
"""op_type -> its per-sample output shape from its attributes, input shapes and constants'
shapes (`ncet.evaluate`'s semantics)."""


def output_shape(op_type: str, attrs: Mapping, inputs: Sequence[Shape],
                 constants: Mapping[str, Shape]) -> Shape:
    """The node's per-sample output shape.

    Raises:
        ShapeError: PyTorch would refuse to compute it.
    """
    return tuple(int(d) for d in SHAPE_RULES[op_type](attrs, [tuple(s) for s in inputs],
                                                        constants))
