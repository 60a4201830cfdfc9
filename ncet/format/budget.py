"""The memory and work a file's graph implies, and how much of it `load` accepts.

A graph of a few hundred bytes can declare one that holds gigabytes when run (a huge Input
shape, padding, broadcasting, an adaptive pooling to a huge size) or runs for minutes (a large
pooling window). `ncet.load`'s meaning check (`ncet.format.consistency.check_consistency`) runs the
graph on meta tensors, which costs it almost nothing whatever the graph; but before that,
`estimate` bounds what *evaluating* the graph at the check's batch sizes would hold and do,
from the declared shapes, the attributes and the constants' shapes alone, and `check_budget`
refuses a graph whose cost is over the file's `Budget`: a floor plus a multiple of the file's
size, capped, unless the caller gives limits. So a file implies no more than its size
justifies, and a real run of the check (should the meta path ever give way) stays bounded.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import GraphIRFormatError
from ..ir import CONSTANT_ATTRS, OP_SCHEMAS, GraphIR, IRNode

MEMORY_FLOOR = 256 * 2**20
MEMORY_PER_FILE_BYTE = 16
MEMORY_CAP = 4 * 2**30
"""Default memory limit, in bytes of what evaluating the graph at the check's batch sizes
would hold: the floor plus this many bytes per byte of the file, and never more than the cap
(a CNN of 16 channels on 3 x 224 x 224 inputs is about 85 MiB)."""

WORK_FLOOR = 10**9
WORK_PER_FILE_BYTE = 1024
WORK_CAP = 10**11
"""Default work limit of the meaning check, in multiply-adds and element visits (1.5 x 10^9
a second for pooling windows to 6 x 10^9 for convolutions, float64 on a 2-core AMD EPYC): the
floor plus this much per byte of the file, capped."""

ELEMENT_BYTES = 8
"""The check computes in float64."""


@dataclass(frozen=True, slots=True)
class Budget:
    """How much memory (bytes) and work the meaning check may spend on one file."""

    bytes: int
    work: int
    file_size: int
    given_bytes: bool = False  # the caller set `bytes` (max_check_bytes), not the default
    given_work: bool = False


def budget_for(file_size: int, max_check_bytes: int | None = None,
               max_check_work: int | None = None) -> Budget:
    """The budget for a file of `file_size` bytes: each given limit as it is, else the default.

    Raises:
        TypeError: A limit is not an int (or None).
        ValueError: A limit is not positive.
    """
    for name, value in (("max_check_bytes", max_check_bytes), ("max_check_work", max_check_work)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    memory = min(MEMORY_CAP, MEMORY_FLOOR + MEMORY_PER_FILE_BYTE * file_size)
    work = min(WORK_CAP, WORK_FLOOR + WORK_PER_FILE_BYTE * file_size)
    return Budget(memory if max_check_bytes is None else max_check_bytes,
                  work if max_check_work is None else max_check_work, file_size,
                  max_check_bytes is not None, max_check_work is not None)


@dataclass(frozen=True, slots=True)
class NodeCost:
    """One node at one batch size: elements of its result and of its temporary buffers (both
    upper bounds), and its work."""

    out: int
    scratch: int
    work: int


@dataclass(frozen=True, slots=True)
class Cost:
    """What the meaning check would spend on a graph: its peak memory in bytes, its work, and
    the nodes that dominate each (with their share)."""

    bytes: int
    work: int
    biggest: str  # the node holding the most memory, described
    biggest_bytes: int
    busiest: str  # the node doing the most work, described
    busiest_work: int


Shape = tuple[int, ...]
CostRule = Callable[[IRNode, list[Shape], Mapping[str, Shape]], NodeCost]


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def touch_cost(node, xs, c) -> NodeCost:
    """A result no larger than the first input (elementwise, layout, reductions, views)."""
    return NodeCost(_numel(xs[0]), 0, sum(map(_numel, xs)) + _numel(xs[0]))


def _broadcast(a: Shape, b: Shape) -> Shape | None:
    out = []
    for x, y in zip(reversed((1,) * (len(b) - len(a)) + a), reversed((1,) * (len(a) - len(b)) + b)):
        if x != y and 1 not in (x, y):
            return None  # PyTorch refuses before allocating
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _binary(node, xs, c) -> NodeCost:
    shape = _broadcast(xs[0], xs[1])
    out = _numel(shape) if shape is not None else max(map(_numel, xs))
    return NodeCost(out, 0, out + sum(map(_numel, xs)))


def _affine(node, xs, c) -> NodeCost:
    name = node.attrs["constant"]
    shape = xs[0] if name is None else _broadcast(xs[0], c[name])
    out = _numel(shape) if shape is not None else max(_numel(xs[0]), _numel(c[name]))
    filled = name is None and node.attrs["tensor_position"] == 1  # c - x: c filled first
    return NodeCost(out, _numel(xs[0]) if filled else 0, 2 * out)


def _concat(node, xs, c) -> NodeCost:
    out = sum(map(_numel, xs))
    return NodeCost(out, 0, 2 * out)


def _linear(node, xs, c) -> NodeCost:
    x, w = xs[0], c[node.attrs["weight"]]
    rows, (outs, ins) = _numel(x[:-1]), (w if len(w) == 2 else (_numel(w), 1))
    return NodeCost(rows * outs, 0, rows * outs * max(ins, 1) + _numel(x))


def _window(size: int, kernel: int, stride: int, low: int, high: int, dilation: int,
            ceil: bool) -> int:
    """Output length of a pooling or convolution window along one axis (0: PyTorch refuses)."""
    span, reach = size + low + high, dilation * (kernel - 1) + 1
    if span < reach:
        return 0
    stride = max(stride, 1)
    return (span - reach + (stride - 1 if ceil else 0)) // stride + 1


def _conv2d(node, xs, c) -> NodeCost:
    a, x, w = node.attrs, xs[0], c[node.attrs["weight"]]
    if len(x) < 3 or len(w) != 4:
        return touch_cost(node, xs, c)  # PyTorch refuses these ranks before computing
    (channels, height, width), images = x[-3:], _numel(x[:-3])
    top, bottom, left, right = a["padding"]
    (sh, sw), (dh, dw), (outs, ins, kh, kw) = a["stride"], a["dilation"], w
    oh = _window(height, kh, sh, top, bottom, dh, False)
    ow = _window(width, kw, sw, left, right, dw, False)
    out, reduction = images * outs * oh * ow, ins * kh * kw
    padded = images * channels * (height + top + bottom) * (width + left + right)
    columns = images * ins * max(a["groups"], 1) * kh * kw * oh * ow  # an im2col buffer
    return NodeCost(out, padded + columns, out * reduction + padded)


def _pool(node, xs, c) -> NodeCost:
    a, x = node.attrs, xs[0]
    if len(x) < 2:
        return touch_cost(node, xs, c)
    (height, width), planes = x[-2:], _numel(x[:-2])
    (kh, kw), (sh, sw), (ph, pw) = a["kernel_size"], a["stride"], a["padding"]
    dh, dw = a.get("dilation", (1, 1))
    oh = _window(height, kh, sh, ph, ph, dh, a["ceil_mode"])
    ow = _window(width, kw, sw, pw, pw, dw, a["ceil_mode"])
    out = planes * oh * ow
    # scratch: a channels-last copy of the input, indices and a contiguous copy of the result
    return NodeCost(out, _numel(x) + 2 * out, out * kh * kw + _numel(x))


def _adaptive_pool(node, xs, c) -> NodeCost:
    x, (oh, ow) = xs[0], node.attrs["output_size"]
    if len(x) < 2:
        return touch_cost(node, xs, c)
    (height, width), planes = x[-2:], _numel(x[:-2])
    # window i covers rows floor(i*H/oh) .. ceil((i+1)*H/oh): at most H/oh + 2 rows each
    return NodeCost(planes * oh * ow, 0, planes * (height + 2 * oh) * (width + 2 * ow))


COST_RULES: dict[str, CostRule] = {
    "Add": _binary, "Sub": _binary, "ElementwiseAffine": _affine, "Concat": _concat,
    "Linear": _linear, "Conv2d": _conv2d, "AvgPool2d": _pool, "MaxPool2d": _pool,
    "AdaptiveAvgPool2d": _adaptive_pool,
}
"""Per op_type, its cost at one batch size from the batched input shapes, the attributes and
the constants' shapes; every other op_type costs `touch_cost` (a result no larger than its
input)."""

assert set(COST_RULES) <= set(OP_SCHEMAS)


def _constant_names(node: IRNode) -> list[str]:
    return [node.attrs[k] for k in CONSTANT_ATTRS[node.op_type] if node.attrs[k] is not None]


def estimate(ir: GraphIR, batch_sizes: Sequence[int]) -> Cost:
    """Bound the memory and work of running `ir` once at each batch size, without running it.

    A run keeps every value it computes (the bound counts each node's largest possible
    result, whatever shape it declares) and the constants several nodes share converted to
    float64 (made once for both runs), plus, while one node runs, its temporary buffers and
    its own constants in float64. Work adds up over the runs.

    Args:
        ir: A graph whose declared shapes and attributes have passed the schema checks.
        batch_sizes: The batch sizes of the runs, one after the other.
    """
    shapes = {n.name: n.shape for n in ir.nodes}
    constants = {name: tuple(t.shape) for name, t in ir.constants.items()}
    widened = {name: 0 if t.dtype.itemsize == ELEMENT_BYTES and t.is_floating_point()
               else t.numel() * ELEMENT_BYTES for name, t in ir.constants.items()}
    uses = collections.Counter(k for n in ir.nodes for k in _constant_names(n))
    kept = sum(widened[k] for k, count in uses.items() if count > 1)  # shared: widened once
    steps = [(node, COST_RULES.get(node.op_type, touch_cost), [shapes[i] for i in node.inputs],
              sum(widened[k] for k in _constant_names(node) if uses[k] == 1))
             for node in ir.nodes if node.op_type != "Output"]
    peak = work = biggest_bytes = busiest_work = 0
    biggest = busiest = ir.nodes[0]
    for batch in batch_sizes:
        held = transient = 0
        for node, rule, inputs, own in steps:
            if node.op_type == "Input":
                cost = NodeCost(batch * _numel(node.shape), 0, batch * _numel(node.shape))
            else:
                cost = rule(node, [(batch, *s) for s in inputs], constants)
            extra = cost.scratch * ELEMENT_BYTES + own
            held += cost.out * ELEMENT_BYTES
            transient = max(transient, extra)
            work += cost.work
            if cost.out * ELEMENT_BYTES + extra > biggest_bytes:
                biggest_bytes, biggest = cost.out * ELEMENT_BYTES + extra, node
            if cost.work > busiest_work:
                busiest_work, busiest = cost.work, node
        peak = max(peak, kept + held + transient)
    return Cost(peak, work, _describe(biggest), biggest_bytes, _describe(busiest), busiest_work)


def check_budget(ir: GraphIR, budget: Budget, batch_sizes: Sequence[int]) -> None:
    """Refuse `ir` if running it at `batch_sizes` could cost more than `budget`.

    Raises:
        GraphIRFormatError: Over the memory or the work limit; the message says what the
            graph implies, the limit, and how to raise it.
    """
    cost = estimate(ir, batch_sizes)
    if cost.bytes > budget.bytes:
        raise GraphIRFormatError(
            f"over the meaning check's memory limit: running the graph at batch sizes "
            f"{_sizes(batch_sizes)} would hold up to {_bytes(cost.bytes)} (the most at "
            f"{cost.biggest}: {_bytes(cost.biggest_bytes)}), and {_allowance(budget, 'bytes')}. "
            f"If you trust the file, raise the limit: ncet.load(path, max_check_bytes="
            f"{cost.bytes}), or skip the check with verify=False")
    if cost.work > budget.work:
        raise GraphIRFormatError(
            f"over the meaning check's work limit: running the graph at batch sizes "
            f"{_sizes(batch_sizes)} would take about {_count(cost.work)} multiply-adds and element "
            f"visits (the most at {cost.busiest}: {_count(cost.busiest_work)}), and "
            f"{_allowance(budget, 'work')}. If you trust the file, raise the limit: "
            f"ncet.load(path, max_check_work={cost.work}), or skip the check with verify=False")


def _describe(node: IRNode) -> str:
    return f"node {node.name!r:.80} ({node.op_type})"


def _sizes(batch_sizes: Sequence[int]) -> str:
    return " and ".join(map(str, batch_sizes))


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    for power, unit in enumerate(("KiB", "MiB", "GiB", "TiB", "PiB"), 1):
        if n < 1024 ** (power + 1) or unit == "PiB":
            return f"{_count(n // 1024 ** (power - 1) / 1024)} {unit}"
    raise AssertionError("unreachable")


def _count(n: float) -> str:
    """Three significant digits; a number beyond float range by its power of ten."""
    return f"{n:.3g}" if n < 1e300 else f"10^{len(str(int(n))) - 1}"


def _allowance(budget: Budget, kind: str) -> str:
    if kind == "bytes":
        if budget.given_bytes:
            return f"max_check_bytes allows {_bytes(budget.bytes)}"
        return (f"this {budget.file_size}-byte file allows {_bytes(budget.bytes)} "
                f"({_bytes(MEMORY_FLOOR)} + {MEMORY_PER_FILE_BYTE} bytes per byte of file, "
                f"at most {_bytes(MEMORY_CAP)})")
    if budget.given_work:
        return f"max_check_work allows {_count(budget.work)}"
    return (f"this {budget.file_size}-byte file allows {_count(budget.work)} "
            f"({_count(WORK_FLOOR)} + {WORK_PER_FILE_BYTE} per byte of file, "
            f"at most {_count(WORK_CAP)})")
