"""The search for the worst float deviation over a region: a certified lower bound of
max |f_float(x) - f_exact(x)| found by trying points, the test a float margin must pass.

`find_deviation(network, region)` runs the network in its own dtype (float32) at many float32
points of the region: the corners (all of them up to `ALL_CORNERS` inputs, a random sample
above), uniform random points, a projected gradient ascent on the float64 output's magnitude
(float32's error grows with the values the sums add up; the error itself is not smooth), and
random perturbations around the worst points found. Each point is run by PyTorch on the
GraphIR (batched, and the finalists again one at a time) and, given the ONNX file, by
onnxruntime as deployed (default session options). The float64 run ranks the points; the
finalists are then certified: |f_float - exact| >= |f_float - v| - r with (v, r) the
certificate's enclosure of the exact value (`ncet.exactness.enclosure.enclose`), or the exact
rational output (`ncet.properties.exact_eval.rational_at`) where the enclosure's radius is not
negligible. The points are float32 numbers inside the exact box, so the input is exact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from ..evaluate import EVALUATORS, evaluate
from ..exactness.enclosure import enclose
from ..ir import GraphIR
from ..properties.exact_eval import RationalUnavailable, rational_at, single_input
from .deviation_runs import RUN_BUDGET, float_runner, onnxruntime_runner, region_boxes

ALL_CORNERS = 10
"""Every corner of a box is tried up to this many inputs (2^10 points); a random sample of
corners above."""

KEEP = 3
"""Candidates kept per output element and runtime for the certification."""

ROUNDS = 4
"""Rounds of perturbations around the worst points found so far (samples / 2 each)."""

RADIUS_SHARE = 0.01
"""Above this share of the float64 difference the enclosure's radius is not negligible: the
candidate is evaluated in exact rationals instead (where the op set allows)."""

RATIONAL_WORK = 1 << 24
"""Multiply-adds the exact rational evaluations may take in all (Python integers: about a
microsecond each): between 2 and 32 points, the worst-ranked first."""

_F64 = torch.float64


@dataclass(frozen=True, eq=False)
class Deviation:
    """The worst deviation a search found: for each output element j (VNN-LIB numbering),
    `deviation[j]` <= |f_float(points[j]) - f_exact(points[j])|_j, proven.

    Attributes:
        deviation: float64 (m,): the largest certified lower bound found (0 where none).
        points: float32 (m, n): the input (flattened) achieving it.
        runtimes: Per output, who computed the float value ("pytorch", "pytorch batch 1",
            "onnxruntime"), "" where nothing was found.
        exact: Per output, how the exact value was bounded ("enclosure", "rational").
        evaluated: Points run.
        boxes: Boxes searched (inward-rounded boxes holding no float are skipped).
        seconds: Wall time.
    """

    deviation: torch.Tensor
    points: torch.Tensor
    runtimes: tuple[str, ...]
    exact: tuple[str, ...]
    evaluated: int
    boxes: int
    seconds: float

    @property
    def num_outputs(self) -> int:
        """m, the number of output elements."""
        return int(self.deviation.numel())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (points as lists of floats)."""
        return {"deviation": self.deviation.tolist(), "points": self.points.tolist(),
                "runtimes": list(self.runtimes), "exact": list(self.exact),
                "evaluated": self.evaluated, "boxes": self.boxes, "seconds": self.seconds}

    def __repr__(self) -> str:
        worst = float(self.deviation.max()) if self.deviation.numel() else 0.0
        return (f"Deviation({self.num_outputs} outputs, max {worst:.3g}, {self.evaluated} "
                f"points, {self.boxes} box{'es' * (self.boxes != 1)})")


class _Candidates:
    """Per output element and runtime, the KEEP points of largest float64-ranked deviation
    (indices into the pool of points run) with the float value computed there."""

    def __init__(self, m: int, runtimes: list[str]):
        self.runtimes = runtimes
        self.score = np.full((len(runtimes), m, KEEP), -1.0)
        self.at = np.zeros((len(runtimes), m, KEEP), dtype=np.int64)
        self.y = np.zeros((len(runtimes), m, KEEP))
        self.pool: list[np.ndarray] = []
        self.size = 0

    def add(self, k: int, x: np.ndarray, y: np.ndarray, ref: np.ndarray,
            first: int | None = None) -> int:
        """Runtime k's outputs y (batch, m) at points x against the float64 reference; x
        joins the pool unless it is there already from index `first`."""
        if first is None:
            first = self.size
            self.pool.append(x)
            self.size += len(x)
        d = np.abs(y - ref)
        d[~np.isfinite(d)] = -1.0
        top = np.argsort(d, axis=0)[-KEEP:]  # (KEEP, m)
        cols = np.arange(d.shape[1])
        score = np.concatenate([self.score[k], d[top, cols].T], 1)
        at = np.concatenate([self.at[k], (top + first).T], 1)
        ys = np.concatenate([self.y[k], y[top, cols].T], 1)
        keep = np.argsort(score, axis=1)[:, -KEEP:]
        self.score[k] = np.take_along_axis(score, keep, 1)
        self.at[k] = np.take_along_axis(at, keep, 1)
        self.y[k] = np.take_along_axis(ys, keep, 1)
        return first

    def points(self, index: np.ndarray) -> np.ndarray:
        pool = np.concatenate(self.pool) if len(self.pool) > 1 else self.pool[0]
        self.pool = [pool]
        return pool[index]

    def worst_points(self, count: int) -> np.ndarray:
        """Up to `count` distinct points among the best ones (each output's best first)."""
        live = self.score >= 0
        if not live.any():
            return np.zeros((0, self.pool[0].shape[1] if self.pool else 0), dtype=np.float32)
        order = np.argsort(-self.score, axis=-1)
        ranked = np.take_along_axis(self.at, order, -1).transpose(2, 0, 1).reshape(-1)[
            np.take_along_axis(live, order, -1).transpose(2, 0, 1).reshape(-1)]
        _, first = np.unique(ranked, return_index=True)
        return self.points(ranked[np.sort(first)][:count])


def _forward64(ir: GraphIR, x: torch.Tensor, consts) -> torch.Tensor:
    """The float64 output, flattened per sample, differentiable (evaluate runs no_grad)."""
    env = {ir.inputs[0].name: x}
    for node in ir.nodes:
        if node.op_type not in ("Input", "Output"):
            env[node.name] = EVALUATORS[node.op_type](node, [env[i] for i in node.inputs],
                                                     consts)
    return torch.cat([env[o].reshape(x.shape[0], -1) for o in ir.outputs], 1)


def _reference(ir: GraphIR, x: np.ndarray, shape) -> np.ndarray:
    """Float64 outputs (batch, m) at float32 points x (batch, n): the ranking reference."""
    out = evaluate(ir, torch.from_numpy(x).reshape(-1, *shape).to(_F64))
    outs = out if isinstance(out, tuple) else (out,)
    return torch.cat([o.reshape(x.shape[0], -1) for o in outs], 1).numpy()


def _inside(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Float64 points rounded to float32 and held inside their float32 boxes (rows of lo, hi
    broadcast against x)."""
    return np.minimum(np.maximum(x.astype(np.float32), lo), hi)


def _uniform(lo, hi, rng) -> np.ndarray:
    return _inside(lo + (hi.astype(np.float64) - lo) * rng.random(lo.shape), lo, hi)


def _starting_points(lo, hi, samples: int, rng) -> np.ndarray:
    """Each box's corners (all of them up to ALL_CORNERS inputs, else random ones) and
    uniform random points; lo, hi of shape (boxes, n)."""
    boxes, n = lo.shape
    if n <= ALL_CORNERS:
        bits = np.tile((np.arange(1 << n)[:, None] >> np.arange(n)) & 1, (boxes, 1))
        owner = np.repeat(np.arange(boxes), 1 << n)
    else:
        each = max(samples // (4 * boxes), 2)
        bits = rng.integers(0, 2, (boxes * each, n))
        bits[::each], bits[1::each] = 0, 1
        owner = np.repeat(np.arange(boxes), each)
    corners = np.where(bits.astype(bool), hi[owner], lo[owner]).astype(np.float32)
    owner = np.repeat(np.arange(boxes), max(samples // (2 * boxes), 1))
    return np.concatenate([corners, _uniform(lo[owner], hi[owner], rng)])


def _ascent(ir, lo, hi, starts: np.ndarray, m: int, steps: int, rng, consts):
    """Projected sign-gradient ascent of +-y_j (random j and sign per start) in float64,
    each start in its own box (rows of lo, hi); yields the float32 iterates."""
    shape = single_input(ir).shape
    lo64, hi64 = torch.from_numpy(lo.astype(np.float64)), torch.from_numpy(hi.astype(np.float64))
    width = hi64 - lo64
    rows = torch.arange(len(starts))
    target = torch.from_numpy(rng.integers(0, m, len(starts)))
    sign = torch.from_numpy(rng.choice([-1.0, 1.0], len(starts)))
    x = torch.from_numpy(starts.astype(np.float64))
    for step in range(steps):
        x.requires_grad_(True)
        with torch.enable_grad():
            y = _forward64(ir, x.reshape(-1, *shape), consts)
            (grad,) = torch.autograd.grad((sign * y[rows, target]).sum(), x)
        size = 0.25 * 0.8 ** step
        x = torch.minimum(torch.maximum(x.detach() + size * width * grad.sign(), lo64), hi64)
        yield _inside(x.numpy(), lo, hi)


def _owners(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each point, the first box holding it."""
    if len(lo) == 1:
        return np.zeros(len(x), dtype=np.int64)
    inside = np.stack([((x >= a) & (x <= b)).all(1) for a, b in zip(lo, hi)], 1)
    return inside.argmax(1)


def _perturbations(centres: np.ndarray, lo, hi, count: int, rng) -> np.ndarray:
    """`count` points near the centres: a random subset of coordinates moved by a random
    scale (a few ulps to a tenth of the box), inside the centre's box."""
    if len(centres) == 0:
        return centres
    pick = rng.integers(0, len(centres), count)
    owner = _owners(centres, lo, hi)[pick]
    a, b = lo[owner], hi[owner]
    base = centres[pick].astype(np.float64)
    scale = 10.0 ** rng.uniform(-7, -1, (count, 1)) * (b.astype(np.float64) - a)
    mask = rng.random(base.shape) < rng.uniform(0.05, 1.0, (count, 1))
    return _inside(base + mask * scale * rng.standard_normal(base.shape), a, b)


def _floor(q: Fraction) -> float:
    """The largest float64 <= q (q >= 0)."""
    v = float(q)
    return float(np.nextafter(v, -np.inf)) if Fraction(v) > q else v


def _multiply_adds(ir: GraphIR) -> int:
    """The network's multiply-adds per sample (Linear and Conv2d nodes)."""
    total = 0
    for node in ir.nodes:
        if node.op_type in ("Linear", "Conv2d"):
            weight = ir.constants[node.attrs["weight"]].numel()
            total += weight * (int(np.prod(node.shape[1:])) if node.op_type == "Conv2d" else 1)
    return total


def _certify(ir: GraphIR, shape, distinct: np.ndarray, which: np.ndarray,
             outputs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Certified lower bounds of |ys[i] - exact(distinct[which[i]])[outputs[i]]| for float32
    points `distinct` (p, n) and candidates i (point, output index, float value), and how
    the exact value was bounded for each candidate."""
    value = np.zeros(len(ys))
    radius = np.zeros(len(ys))
    chunk = max(RUN_BUDGET // distinct.shape[1], 1)
    for s in range(0, len(distinct), chunk):
        out = enclose(ir, torch.from_numpy(distinct[s:s + chunk]).reshape(-1, *shape).to(_F64))
        v = torch.cat([out[o][0].reshape(-1, int(np.prod(out[o][0].shape[1:])))
                       for o in ir.outputs], 1)
        r = torch.cat([torch.as_tensor(out[o][1]).expand_as(out[o][0]).reshape(v.shape[0], -1)
                       for o in ir.outputs], 1)
        mine = (which >= s) & (which < s + chunk)
        value[mine] = v.numpy()[which[mine] - s, outputs[mine]]
        radius[mine] = r.numpy()[which[mine] - s, outputs[mine]]
    diff = np.nextafter(np.abs(ys - value), 0.0)
    lower = np.maximum(np.nextafter(diff - radius, -np.inf), 0.0)
    how = ["enclosure"] * len(ys)
    exact: dict[int, list[Fraction] | None] = {}
    loose = np.flatnonzero((radius > RADIUS_SHARE * diff) & (diff > 0))
    loose = loose[np.lexsort((-diff[loose], outputs[loose]))]  # by output, worst first
    first = np.ones(len(loose), dtype=bool)
    first[1:] = outputs[loose][1:] != outputs[loose][:-1]
    second = np.zeros(len(loose), dtype=bool)
    second[1:] = first[:-1] & ~first[1:]
    chosen = loose[first | second]  # each output's two worst candidates, the worst first
    chosen = chosen[np.argsort(-diff[chosen], kind="stable")]
    most = int(np.clip(RATIONAL_WORK // max(_multiply_adds(ir), 1), 2, 32))
    for i in chosen:
        if which[i] not in exact and len(exact) < most:
            try:
                exact[which[i]] = rational_at(ir, [Fraction(float(v)) for v in distinct[which[i]]])
            except RationalUnavailable:
                exact[which[i]] = None
    for i in range(len(ys)):
        values = exact.get(which[i])
        if values is not None:
            lower[i] = _floor(abs(Fraction(float(ys[i])) - values[outputs[i]]))
            how[i] = "rational"
    return lower, how


def find_deviation(network: GraphIR, region, *, onnx_file=None, samples: int = 256,
                   ascent_steps: int = 16, seed: int = 0) -> Deviation:
    """Search the region for the worst deviation of the float network from its exact
    meaning, and prove each one found (module docstring).

    Args:
        network: A GraphIR with one Input node (from `ncet.convert` or `ncet.from_onnx`).
        region: A `ncet.Property` (every box), a (lower, upper) tuple of tensors or arrays
            (one sample's shape, or flattened), or a list of such tuples. Bounds are rounded
            inward to float32: only float32 points inside the exact box are tried (a box
            with a decimal bound of zero width may hold none: it is skipped).
        onnx_file: The ONNX file deployed: also run every point in onnxruntime.
        samples: Points drawn over all boxes: half uniform, a quarter random corners (all
            corners up to `ALL_CORNERS` inputs), a quarter gradient-ascent starts; and as
            many perturbations of the worst points found.
        ascent_steps: Steps of the gradient ascent.
        seed: The random generator's seed (the search is deterministic given it).

    Returns:
        A `Deviation`: per output element, a proven lower bound of the largest
        |f_float - f_exact| found, the point and the runtime.

    Raises:
        ValueError: Several inputs, or a region whose size is not the input's.
        RuntimeError: The arithmetic in force is outside the certificate's model (no
            certified enclosure of the exact value).

    Example:
        >>> found = find_deviation(ir, prop, onnx_file="net.onnx")
        >>> assert (found.deviation <= ncet.float_margin(ir, prop).eps).all()
    """
    start = time.perf_counter()
    node = single_input(network)
    shape, n = node.shape, int(np.prod(node.shape))
    boxes = region_boxes(region, n)
    runners = [("pytorch", float_runner(network))]
    if onnx_file is not None:
        runners.append(("onnxruntime", onnxruntime_runner(onnx_file, n)))
    m = _reference(network, np.zeros((1, n), dtype=np.float32), shape).shape[1]
    found = _Candidates(m, [name for name, _ in runners] + ["pytorch batch 1"])
    if boxes:
        lo, hi = np.stack([b[0] for b in boxes]), np.stack([b[1] for b in boxes])
        _search(network, shape, runners, found, lo, hi, samples, ascent_steps,
                np.random.default_rng(seed))
    return _best(network, shape, found, len(boxes), start)


def _search(ir, shape, runners, found: _Candidates, lo, hi, samples, steps, rng) -> None:
    """Run every point of the search (module docstring) and keep the candidates."""
    n, m = lo.shape[1], found.score.shape[1]
    chunk = max(RUN_BUDGET // max(n, m), 1)

    def run(x: np.ndarray) -> None:
        for s in range(0, len(x), chunk):
            part = x[s:s + chunk]
            ref, first = _reference(ir, part, shape), None
            for k, (_, runner) in enumerate(runners):
                first = found.add(k, part, runner(part, shape), ref, first)

    run(_starting_points(lo, hi, samples, rng))
    if steps > 0:
        count = max(samples // 4, 1)
        owner = np.arange(count) % len(lo)
        worst = found.worst_points(count // 2)
        starts = np.concatenate([worst, _uniform(lo[owner], hi[owner], rng)])[:count]
        owner = np.concatenate([_owners(worst, lo, hi), owner])[:count]
        for iterate in _ascent(ir, lo[owner], hi[owner], starts, m, steps, rng,
                               {k: v.to(_F64) for k, v in ir.constants.items()}):
            run(iterate)
    for _ in range(ROUNDS):  # a hill climb: around the worst points found so far
        run(_perturbations(found.worst_points(min(4 * m, samples)), lo, hi,
                           max(samples // 2, 1), rng))
    single = found.worst_points(max(min(2 * KEEP * m, samples // 4), 8))
    if len(single):
        ref = _reference(ir, single, shape)
        one = np.concatenate([runners[0][1](single[i:i + 1], shape) for i in range(len(single))])
        found.add(len(runners), single, one, ref)


def _best(ir, shape, found: _Candidates, boxes: int, start: float) -> Deviation:
    """Certify every candidate and keep, per output, the largest proven deviation."""
    r, m, keep = found.score.shape
    live = (found.score >= 0).reshape(-1)
    outputs = np.tile(np.repeat(np.arange(m), keep), r)[live]
    runtime = np.repeat(np.arange(r), m * keep)[live]
    index = found.at.reshape(-1)[live]
    n = found.pool[0].shape[1] if found.pool else 0
    deviation, points = np.zeros(m), np.zeros((m, n), dtype=np.float32)
    who, how = [""] * m, [""] * m
    if len(index):
        unique, which = np.unique(index, return_inverse=True)
        which = which.reshape(-1)
        distinct = found.points(unique)
        lower, exact = _certify(ir, shape, distinct, which, outputs, found.y.reshape(-1)[live])
        for i in np.argsort(lower):  # ascending: each output ends with its largest
            j = outputs[i]
            if lower[i] > deviation[j]:
                deviation[j], points[j], who[j], how[j] = (
                    lower[i], distinct[which[i]], found.runtimes[runtime[i]], exact[i])
    return Deviation(torch.from_numpy(deviation), torch.from_numpy(points), tuple(who),
                     tuple(how), found.size, boxes, time.perf_counter() - start)
