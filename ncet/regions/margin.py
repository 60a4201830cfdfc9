"""`float_margin`: a certified bound on |float32 - exact| at every output, for every input of
a region (docs/margins.md).

Per box, in topological order: interval bounds of every node, tightened by CROWN-style linear
bounds at the inputs of ReLUs and max pools (`linear_bounds.py`), so that most ReLUs are
stable; each node's own rounding bounded at the largest |float input| over the box; the
float error at the same nonlinearities' inputs bounded through the network's sensitivity
(`float_errors.backward_errors`), and at the outputs likewise. Low-dimensional boxes are
split, the piece with the largest eps first, within a work budget. A piece whose float
values may come near the dtype's overflow threshold gets eps = inf (no bound).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..exactness.arithmetic import UNIT_ROUNDOFF, read_arithmetic_model
from ..exactness.bounds import SAFETY
from ..exactness.rules import subnormal_constants
from ..ir import GraphIR
from .float_errors import (
    INPUT_ROUNDING,
    MAX_GENERATORS,
    Errors,
    backward_errors,
    float_range,
    forward_error,
    record_slopes,
    rounding_bound,
)
from .linear_bounds import State, crown_bounds, interval_step, magnitude_step, unit_rows
from .linear_maps import NONLINEAR, is_affine, offset
from .margin_record import Margin

MAX_ROWS = 2048
"""The widest node bounded by a backward pass (CROWN values, sensitivity errors): a pass
over a node of n elements pulls 2n rows through everything before it. Wider nodes get
interval bounds and |W|-product errors (sound, looser)."""

MAX_WORK = 1 << 28
"""A backward pass is run for a node only if its rows times the widest node before it stay
within this many elements (the cost of the pass, `_Network.backward`)."""

CHUNK = 1 << 22
"""Rows are pulled back in chunks of at most this many elements at the widest node."""

SPLIT_DIMENSIONS = 16
"""Boxes with at most this many input elements are split (`AUTO_PIECES` pieces)."""

AUTO_PIECES = 2048
"""How many pieces a low-dimensional box is split into by default."""

AUTO_WORK = 1 << 33
"""The default splitting stops where the pieces' estimated cost (`_Network._work`, in
multiply-adds) would pass this: about 20 s on this machine (ACAS Xu's 2,048 pieces are
just under it; an 8-512-512-512 MLP gets 10)."""

BATCH = 16
"""How many pieces are split, and their halves bounded together, at a time."""

ONE_THREAD_BELOW = 4096
"""Networks whose widest node has at most this many elements are bounded on one thread."""

SIMPLIFICATION = "<simplification>"
"""The key of the simplification's bound in the contributions (`simplified=`)."""

_F64 = torch.float64


@dataclass(frozen=True)
class _Piece:
    eps: torch.Tensor
    lower: torch.Tensor
    upper: torch.Tensor
    shares: dict[str, torch.Tensor]
    unstable: dict[str, tuple[int, int]]
    influence: torch.Tensor


class _Network:
    """What every box of one network shares: constants, shapes, offsets, the nodes a
    backward pass is run for."""

    def __init__(self, ir: GraphIR, max_rows: int):
        if len(ir.inputs) != 1:
            raise ValueError(f"float_margin needs a network with one input; this one has "
                             f"{len(ir.inputs)} ({', '.join(n.name for n in ir.inputs)})")
        self.ir, self.input = ir, ir.inputs[0]
        self.consts = {k: v.to(_F64) for k, v in ir.constants.items()}
        self.abs_consts = {k: v.abs() for k, v in self.consts.items()}
        self.shapes = {n.name: tuple(n.shape) for n in ir.nodes if n.op_type != "Output"}
        self.dtypes = {n.name: getattr(torch, n.dtype) for n in ir.nodes
                       if n.op_type != "Output"}
        self.offsets = {n.name: offset(n, [self.shapes[i] for i in n.inputs], self.consts)
                        for n in ir.nodes if is_affine(n)}
        feeds = {n.inputs[0] for n in ir.nodes if n.op_type in NONLINEAR}
        widest, self.chunk = 0, {}
        for node in ir.nodes[:-1]:
            widest = max(widest, math.prod(self.shapes[node.name]))
            self.chunk[node.name] = max(1, CHUNK // widest)
        self.backward = {name for name in feeds | set(ir.outputs)
                         if math.prod(self.shapes[name]) <= max_rows and 2 * math.prod(
                             self.shapes[name]) * CHUNK // self.chunk[name] <= MAX_WORK}
        self.work = self._work()
        biggest = max(math.prod(s) for s in self.shapes.values())
        self.slack = max(2.0 ** -30, 16 * len(ir.nodes) * biggest * 2.0 ** -53)
        self.arithmetic = read_arithmetic_model()
        if self.arithmetic.flush and (tiny := subnormal_constants(
                ir.nodes, ir.constants, self.arithmetic.flushing_kernels)):
            self.arithmetic = self.arithmetic.outside(
                f"subnormal constants ({', '.join(tiny[:5])}) may be flushed to zero")
        if not self.arithmetic.certified:
            raise RuntimeError("no certified float margin: " + self.arithmetic.describe())

    def _work(self) -> int:
        """The cost of bounding one piece, in multiply-adds: each backward pass's rows times
        what lies before its node (weights of Linear/Conv2d nodes, elements of the rest)."""
        before, total = 0, 0
        for node in self.ir.nodes[:-1]:
            weight = node.attrs.get("weight") if node.op_type in ("Linear", "Conv2d") else None
            size = math.prod(self.shapes[node.name])
            before += size * (1 if weight is None else self.consts[weight][0].numel())
            if node.name in self.backward:
                total += 2 * size * before
        return max(1, total)

    def bound(self, lower: torch.Tensor, upper: torch.Tensor, input_rounding: bool
              ) -> list[_Piece]:
        """Bound P boxes at once ((P, *input shape) tensors), one `_Piece` each."""
        state = State(self.ir.nodes, self.consts, self.abs_consts, self.shapes, self.offsets,
                      self.slack)
        errors = Errors(self.arithmetic, dict(self.ir.constants))
        name = self.input.name
        state.lower[name], state.upper[name] = lower, upper
        state.magnitude[name] = torch.maximum(lower.abs(), upper.abs())
        errors.eps[name] = self._input_error(state.magnitude[name], input_rounding)
        overflow = torch.zeros(lower.shape[0], dtype=torch.bool)
        for node in self.ir.nodes:
            if node.op_type in ("Input", "Output"):
                continue
            state.magnitude[node.name] = magnitude_step(state, node)
            state.widen(node.name, *interval_step(state, node))
            if node.name in self.backward and node.name not in self.ir.outputs:
                state.widen(node.name, *crown_bounds(
                    state, node.name, (lower, upper),
                    max(1, self.chunk[node.name] // lower.shape[0])))
            errors.delta[node.name] = rounding_bound(state, errors, node, self.dtypes)
            if node.op_type in NONLINEAR:
                record_slopes(state, errors, node)
            errors.eps[node.name] = forward_error(state, errors, node)
            overflow |= self._may_overflow(state, errors, node)
        return self._outputs(state, errors, (lower, upper), overflow)

    def _may_overflow(self, state: State, errors: Errors, node) -> torch.Tensor:
        """Per piece: may the node's float value, or a partial sum inside it, come near the
        largest finite number of its dtype (where rounding gives infinity, outside the
        model), or is its bound not finite? Such a piece gets eps = inf."""
        top = torch.finfo(self.dtypes[node.name]).max / 4
        low, high = float_range(state, errors, node.name)
        reach = torch.maximum(low.abs(), high.abs()).reshape(low.shape[0], -1)
        bad = ~torch.isfinite(reach).all(1) | (reach >= top).any(1)
        delta = errors.delta[node.name]
        if isinstance(delta, torch.Tensor):
            d = delta.expand(low.shape[0], *delta.shape[1:]).reshape(low.shape[0], -1)
            bad |= ~torch.isfinite(d).all(1) | (d >= top).any(1)
        return bad

    def _errors(self, state: State, errors: Errors, name: str, generators: int
                ) -> dict[str, torch.Tensor]:
        """`backward_errors` for every element of `name`, in chunks of rows: each node's
        share, (P, elements)."""
        shape, pieces = self.shapes[name], state.lower[name].shape[0]
        n, step = math.prod(shape), max(1, self.chunk[name] // pieces)
        starts = range(0, n, step)
        parts = [backward_errors(state, errors, name,
                                 unit_rows(n, a, min(n, a + step)).view(-1, *shape),
                                 generators) for a in starts]
        zero = torch.zeros(pieces * n, dtype=_F64)
        return {k: torch.cat([p.get(k, zero[:pieces * (min(n, a + step) - a)]).view(pieces, -1)
                              for a, p in zip(starts, parts)], 1)
                for k in {k for p in parts for k in p}}

    def _input_error(self, magnitude: torch.Tensor, input_rounding: bool) -> torch.Tensor:
        dtype = self.dtypes[self.input.name]
        eps = torch.zeros_like(magnitude)
        if input_rounding:  # round to nearest: u |x|, or half the subnormal spacing
            eps = eps + UNIT_ROUNDOFF[dtype] * magnitude + torch.finfo(dtype).smallest_normal \
                * UNIT_ROUNDOFF[dtype]
        if self.arithmetic.flush:  # a subnormal input read as zero
            eps = eps + torch.finfo(dtype).smallest_normal
        return SAFETY * eps

    def _outputs(self, state: State, errors: Errors, box, overflow: torch.Tensor
                 ) -> list[_Piece]:
        pieces = box[0].shape[0]
        eps, lower, upper, shares = [], [], [], {}
        for name in self.ir.outputs:
            n = math.prod(self.shapes[name])
            if name in self.backward and n and not bool(overflow.all()):
                state.widen(name, *crown_bounds(state, name, box,
                                                max(1, self.chunk[name] // pieces)))
                own = self._errors(state, errors, name, MAX_GENERATORS)
                eps.append(SAFETY * sum(own.values()))
                for key, value in own.items():
                    shares.setdefault(key, []).append((len(eps) - 1, value))
            else:
                eps.append(errors.eps[name].reshape(pieces, n))
            lower.append(state.lower[name].reshape(pieces, n))
            upper.append(state.upper[name].reshape(pieces, n))
        starts = np.cumsum([0, *(e.shape[1] for e in eps)])
        merged = {}
        for key, parts in shares.items():
            full = torch.zeros((pieces, int(starts[-1])), dtype=_F64)
            for k, value in parts:
                full[:, starts[k]:starts[k + 1]] = value
            merged[key] = full
        influence = torch.as_tensor(state.influence, dtype=_F64).expand_as(box[0]) \
            * (box[1] - box[0])
        eps, lower, upper = torch.cat(eps, 1), torch.cat(lower, 1), torch.cat(upper, 1)
        eps[overflow] = torch.inf  # a float value may be infinite: no bound
        eps = torch.where(eps.isnan(), torch.inf, eps)
        lower = torch.where(lower.isnan(), -torch.inf, lower)
        upper = torch.where(upper.isnan(), torch.inf, upper)
        return [_Piece(eps[i], lower[i], upper[i], {k: v[i] for k, v in merged.items()},
                       dict(errors.unstable), influence[i:i + 1]) for i in range(pieces)]


def _as_box(shape: tuple[int, ...], lower, upper) -> tuple[torch.Tensor, torch.Tensor]:
    pair = []
    for side in (lower, upper):
        t = torch.as_tensor(np.asarray(side, dtype=np.float64)).to(_F64)
        if t.numel() != math.prod(shape):
            raise ValueError(f"a region bound has {t.numel()} elements; the network's input "
                             f"has {math.prod(shape)} (shape {list(shape)})")
        pair.append(t.reshape(1, *shape))
    lower, upper = pair
    if not (torch.isfinite(lower).all() and torch.isfinite(upper).all()):
        raise ValueError("a region bound is not finite: float_margin needs a bounded box")
    if bool((lower > upper).any()):
        j = int((lower > upper).flatten().nonzero()[0])
        raise ValueError(f"an empty region: input element {j} has lower bound "
                         f"{float(lower.flatten()[j])} above its upper bound "
                         f"{float(upper.flatten()[j])}")
    return lower, upper


def region_boxes(ir: GraphIR, region) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The region as boxes of float64 tensors of the input's shape (batch 1): a Property's
    boxes rounded outward to float64, a (lower, upper) pair, or a list of pairs."""
    from ..properties import Property
    shape = tuple(ir.inputs[0].shape)
    if isinstance(region, Property):
        if region.num_inputs != math.prod(shape):
            raise ValueError(f"the property has {region.num_inputs} inputs; the network's "
                             f"input has {math.prod(shape)} elements (shape {list(shape)})")
        pairs = region.input_boxes_as(np.float64, "outward")
    elif isinstance(region, tuple) and len(region) == 2:
        pairs = [region]
    elif isinstance(region, list) and region:
        pairs = region
    else:
        raise TypeError("region must be a Property, a (lower, upper) pair or a list of "
                        f"pairs; got {type(region).__name__}")
    return [_as_box(shape, lo, hi) for lo, hi in pairs]


def _split(lower, upper, score):
    """Bisect the box along the side with the largest score (width times how much the
    bounds' backward passes leaned on that input)."""
    j = int(score.flatten().argmax())
    mid = (lower.flatten()[j] + upper.flatten()[j]) / 2
    left_upper, right_lower = upper.clone(), lower.clone()
    left_upper.view(-1)[j] = mid
    right_lower.view(-1)[j] = mid
    return (lower, left_upper), (right_lower, upper)


def _bound_box(net: _Network, box, pieces: int, input_rounding: bool) -> list[_Piece]:
    """Bound the box, then split the pieces with the largest eps (up to `BATCH` at a time,
    bounded together) until there are `pieces`."""
    lower, upper = box
    done = list(zip([box], net.bound(lower, upper, input_rounding)))
    batch = 1 if any(n.op_type == "MaxPool2d" for n in net.ir.nodes) else BATCH
    while len(done) < pieces and bool((upper > lower).any()):
        count = min(batch, len(done), pieces - len(done))
        order = sorted(range(len(done)), key=lambda i: -float(done[i][1].eps.max()))
        worst = sorted(order[:count], reverse=True)
        parts = [part for i in worst for part in _split(*done[i][0], done[i][1].influence)]
        for i in worst:
            done.pop(i)
        groups = [parts] if batch > 1 else [[part] for part in parts]
        for group in groups:
            lows = torch.cat([lo for lo, _ in group])
            highs = torch.cat([hi for _, hi in group])
            done.extend(zip(group, net.bound(lows, highs, input_rounding)))
    return [piece for _, piece in done]


def default_pieces(net: _Network, boxes: int) -> int:
    """Pieces per box when `splits` is None: `AUTO_PIECES` shared by the boxes and within
    `AUTO_WORK` (the estimated cost of a piece, `_Network.work`), for boxes of at most
    `SPLIT_DIMENSIONS` inputs on networks whose widest node has at most `ONE_THREAD_BELOW`
    elements (a `BATCH`-th of that with a MaxPool2d, whose pieces are bounded one at a
    time); 1 otherwise."""
    widest = max(math.prod(s) for s in net.shapes.values())
    if widest > ONE_THREAD_BELOW or math.prod(net.shapes[net.input.name]) > SPLIT_DIMENSIONS:
        return 1
    pieces = min(AUTO_PIECES, AUTO_WORK // net.work)
    if any(n.op_type == "MaxPool2d" for n in net.ir.nodes):  # bounded one at a time
        pieces //= BATCH
    return max(1, pieces // boxes)


def float_margin(network: GraphIR, region, *, input_rounding: bool = False,
                 splits: int | None = None, max_rows: int = MAX_ROWS,
                 simplified: GraphIR | None = None) -> Margin:
    """A certified bound eps with |f_float(x) - [[G]](x)| <= eps for every x in `region`,
    per output element, under the certificate's arithmetic model (docs/margins.md).

    Args:
        network: A GraphIR with one input (from `convert` or `from_onnx`).
        region: A `Property` (its boxes; eps is the largest over them), a (lower, upper)
            pair of tensors or arrays (one sample's shape, or flattened), or a list of pairs.
        input_rounding: Also cover the input's rounding to the network's dtype (a region
            written in decimals, a deployed input in float32).
        splits: How many pieces each box may be split into (None: `AUTO_PIECES` shared by
            the boxes, for inputs of at most `SPLIT_DIMENSIONS` elements on networks whose
            widest node has at most `ONE_THREAD_BELOW` elements; else 1).
        max_rows: The widest node bounded by backward passes (`MAX_ROWS`).
        simplified: `ncet.simplify(network)`'s graph, when a verifier judges that one:
            eps then bounds |f_float(x) - [[simplified]](x)|, the deployed network against
            the simplified one's exact value (this margin plus the simplification's bound
            over the region, `SIMPLIFICATION`), so that a verdict on the simplified file
            speaks about `network` as deployed; the range holds both exact outputs.

    Returns:
        A `Margin`: `.eps` (float64, one value per output element, VNN-LIB numbering), the
        exact output's certified range, each node's share, unstable counts.

    Raises:
        ValueError: A region that does not fit the network's input, is empty or unbounded,
            or a network with more than one input.
        RuntimeError: The host's arithmetic is outside the certificate's model.

    Example:
        >>> margin = ncet.float_margin(ncet.from_onnx("net.onnx"), ncet.read_vnnlib("p.vnnlib"))
        >>> margin.eps.max()
    """
    start = time.perf_counter()
    if not isinstance(network, GraphIR):
        raise TypeError(f"network must be a GraphIR (from ncet.convert or ncet.from_onnx); "
                        f"got {type(network).__name__}")
    net = _Network(network, max_rows)
    boxes = region_boxes(network, region)
    small = max(math.prod(s) for s in net.shapes.values()) <= ONE_THREAD_BELOW
    if splits is None:
        splits = default_pieces(net, len(boxes))
    if splits < 1:
        raise ValueError(f"splits must be at least 1; got {splits}")
    threads = torch.get_num_threads()
    try:  # small matrices: threads only contend (10x slower on a busy 2-core machine)
        if small:
            torch.set_num_threads(1)
        pieces = [p for box in boxes for p in _bound_box(net, box, splits, input_rounding)]
    finally:
        torch.set_num_threads(threads)
    eps = torch.stack([p.eps for p in pieces])
    worst = eps.argmax(0)
    keys = {k for p in pieces for k in p.shares}
    shares = {k: torch.stack([p.shares.get(k, torch.zeros_like(p.eps)) for p in pieces]
                             ).gather(0, worst[None]).squeeze(0) for k in sorted(keys)}
    unstable = {}
    for p in pieces:
        for k, (n, total) in p.unstable.items():
            unstable[k] = (max(n, unstable.get(k, (0, 0))[0]), total)
    eps = eps.max(0).values
    lower = torch.stack([p.lower for p in pieces]).min(0).values
    upper = torch.stack([p.upper for p in pieces]).max(0).values
    if simplified is not None:
        from ..passes.region_bound import simplification_bound
        bound = simplification_bound(network, simplified, region)
        eps, lower, upper = eps + bound, lower - bound, upper + bound
        eps, upper, lower = eps * SAFETY, upper + upper.abs() * 2 ** -52, \
            lower - lower.abs() * 2 ** -52
        shares[SIMPLIFICATION] = bound
    return Margin(eps=eps, lower=lower, upper=upper, contributions=shares, unstable=unstable,
                  boxes=len(boxes), pieces=len(pieces),
                  dtype=network.node(network.outputs[0]).dtype, input_rounding=input_rounding,
                  arithmetic=net.arithmetic.describe(), seconds=time.perf_counter() - start)


__all__ = ["INPUT_ROUNDING", "SIMPLIFICATION", "float_margin", "region_boxes"]
