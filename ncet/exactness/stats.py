"""Running statistics of `check_exactness`, folded in chunk by chunk in a few tensor
operations each, in memory that does not grow with the number of samples: per-check maxima
(`CheckStats`), a bounded sample of ratios for the median (`RatioSample`) and the values kept
at chosen elements (`ElementSampler`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

_F64 = torch.float64

_SAMPLED_RATIOS = 256
"""Ratios taken per node and chunk for the median (evenly spaced over the elements)."""


def sample_indices(total: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """k sorted, distinct flat indices into `total` elements (all of them when total <= k):
    the range cut into k equal strata, one index drawn uniformly in each."""
    return choose_indices([total], k, generator)[0]


def choose_indices(totals: list[int], k: int, generator: torch.Generator) -> list[torch.Tensor]:
    """`sample_indices(total, k, generator)` for each total in turn, drawing the same numbers
    from `generator`, in a few tensor operations for all of them."""
    chosen: list[torch.Tensor | None] = [None] * len(totals)
    large = [i for i, total in enumerate(totals) if total > k]
    if large:
        total = torch.tensor([totals[i] for i in large]).unsqueeze(1)
        edges = torch.arange(k + 1) * total // k
        width = edges[:, 1:] - edges[:, :-1]  # >= 1 since total > k
        draw = (torch.rand((len(large), k), generator=generator, dtype=_F64) * width).long()
        rows = edges[:, :-1] + torch.minimum(draw, width - 1)
        for row, i in zip(rows, large):
            chosen[i] = row
    return [torch.arange(total) if c is None else c for c, total in zip(chosen, totals)]


class ElementSampler:
    """PyTorch's and the reference's values of one node at fixed flat element indices of
    its batched value (samples x per-sample shape, row-major), gathered chunk by chunk."""

    __slots__ = ("indices", "per_sample", "size", "torch", "reference")

    def __init__(self, indices: torch.Tensor, per_sample: int, size: int,
                 buffers: torch.Tensor | None = None):
        """`size`: elements of the whole batched value; `buffers`: a (2, len(indices))
        float64 tensor to gather into (NaN: not known), else allocated."""
        self.indices, self.per_sample, self.size = indices, per_sample, size
        if buffers is None:
            buffers = torch.full((2, indices.shape[0]), math.nan, dtype=_F64)
        self.torch, self.reference = buffers[0], buffers[1]

    def take(self, start: int, count: int, torch_value: torch.Tensor | None,
             reference: torch.Tensor | None) -> None:
        """Copy the sampled elements of samples [start, start + count) (None: not known)."""
        first, end = start * self.per_sample, (start + count) * self.per_sample
        whole = first == 0 and end >= self.size  # one chunk holds the whole batch
        if whole:
            lo, hi = 0, self.indices.shape[0]
        else:
            lo, hi = torch.searchsorted(self.indices, torch.tensor([first, end])).tolist()
        if lo == hi:
            return
        where = self.indices if whole else self.indices[lo:hi] - first
        for buffer, value in ((self.torch, torch_value), (self.reference, reference)):
            if isinstance(value, torch.Tensor) and value.numel() == end - first:
                target = buffer if whole else buffer[lo:hi]
                if value.dtype == _F64:
                    torch.take(value, where, out=target)
                else:
                    target.copy_(torch.take(value, where))

    def freeze(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.indices, self.torch, self.reference


class RatioSample:
    """An evenly spread sample of one check's observed/bound ratios over every chunk, for
    the median, in a buffer the size of the first chunk's sample and at least
    `_SAMPLED_RATIOS` (a node of 2 elements checked one sample per chunk still keeps 256
    ratios of the whole run for its median, not 2).

    The chunks' ratios are read as one stream, and the sample is exactly its every
    `thin`-th value from the first (stream positions 0, thin, 2 thin, ...): when the buffer
    would overflow, every other kept value is dropped and `thin` doubles. So each chunk
    keeps its share (within one value), memory does not grow with the number of chunks,
    the buffer is never less than half full once the stream is longer than it, and `thin`
    stays below twice the stream's length (a chunk shorter than the stride keeps one value
    or none, as its positions say)."""

    __slots__ = ("values", "filled", "thin", "seen")

    def __init__(self):
        self.values: torch.Tensor | None = None
        self.filled, self.thin, self.seen = 0, 1, 0

    def add(self, strided: torch.Tensor) -> None:
        """Fold in one chunk's evenly strided ratios (non-finite ones are dropped later)."""
        n = strided.shape[0]
        if self.values is None:
            self.values = torch.empty(max(n, _SAMPLED_RATIOS), dtype=_F64)
        values, capacity = self.values, self.values.shape[0]
        while True:
            first = -self.seen % self.thin  # this chunk's first stream position kept
            count = (n - 1 - first) // self.thin + 1 if first < n else 0
            if self.filled + count <= capacity:
                break
            kept = values[:self.filled:2].clone()
            self.filled, self.thin = kept.shape[0], self.thin * 2
            values[:self.filled] = kept
        if count:
            values[self.filled:self.filled + count] = strided[first::self.thin]
            self.filled += count
        self.seen += n

    def kept(self) -> torch.Tensor:
        return self.values[:self.filled] if self.values is not None \
            else torch.empty(0, dtype=_F64)


def median_ratios(samples: list[RatioSample]) -> list[float]:
    """The (lower) median of the finite ratios of each sample, 0.0 for none, in a few tensor
    operations for all of them."""
    if not any(s.filled for s in samples):
        return [0.0] * len(samples)
    rows = torch.nn.utils.rnn.pad_sequence([s.kept() for s in samples], batch_first=True,
                                           padding_value=math.nan)
    rows = rows.masked_fill_(~torch.isfinite(rows), math.nan)
    return torch.nanmedian(rows, dim=1).values.nan_to_num_(0.0).tolist()


_ROW = 1024
"""Row width of `first_max`'s first reduction."""


def first_max(flat: torch.Tensor) -> tuple[float, int]:
    """The largest value of a 1-D tensor and the first index holding it, as `flat.max(0)`
    (NaN counts as largest), in two vectorised reductions: a max with indices over one long
    dimension runs element by element, about 4x slower than maxima of 1,024-wide rows on
    163,840 elements; below 32,768 the few extra calls cost more than they save."""
    n = flat.shape[0]
    if n <= 32 * _ROW:
        value, index = flat.max(0)
        return float(value), int(index)
    cut = n - n % _ROW
    row_max = flat[:cut].reshape(-1, _ROW).amax(1)
    if cut < n:
        row_max = torch.cat([row_max, flat[cut:].amax(0, keepdim=True)])
    start = int(row_max.argmax()) * _ROW
    row = flat[start:start + _ROW]
    index = int(row.argmax())
    return float(row[index]), start + index


def element(value: torch.Tensor, shape: torch.Size, flat_index: int) -> float:
    """Element `flat_index` (row-major) of `value` broadcast to `shape`, read without
    materialising the broadcast (a scalar radius expanded to a whole chunk, say)."""
    if value.shape == shape and value.is_contiguous():
        return float(value.view(-1)[flat_index])
    index = []
    for size in reversed(shape):
        flat_index, i = divmod(flat_index, size)
        index.append(i)
    return float(value.expand(shape)[tuple(reversed(index))])


_FINFO: dict[torch.dtype, torch.finfo] = {}


def ulp_above(value: float, dtype: torch.dtype) -> float:
    """The spacing of `dtype` just above |value| (a value of that dtype): nextafter(|value|,
    inf) - |value|, inf above the largest finite value or for a non-finite value."""
    info = _FINFO.get(dtype) or _FINFO.setdefault(dtype, torch.finfo(dtype))
    a = abs(value)
    if not a < info.max:
        return math.inf
    if a < info.smallest_normal:
        return info.smallest_normal * info.eps  # the subnormal spacing
    return math.ldexp(info.eps, math.frexp(a)[1] - 1)


@dataclass
class CheckStats:
    """Running maxima of one check (node-local or end to end) at one node."""

    max_error: float = 0.0
    max_rel_error: float = 0.0
    ratio: float = 0.0
    bound_at_worst: float = 0.0
    error_at_worst: float = 0.0
    ulps_at_worst: float = 0.0
    violations: int = 0
    elements: int = 0
    unbounded: int = 0  # elements whose bound is infinite or NaN: not checked
    value_at_worst: float = math.nan  # |reference| at the worst element
    ratios: RatioSample = field(default_factory=RatioSample)
    max_bound: float = 0.0  # the largest finite elementwise bound (end to end only)
    max_value: float = 0.0  # the largest |expected| (end to end only)

    def violate(self) -> None:
        """Record a violation that has no elementwise numbers (shape mismatch, failure)."""
        self.ratio = math.inf
        self.violations += 1

    def update(self, torch_value: torch.Tensor, expected: torch.Tensor,
               bound: torch.Tensor | float, t_dtype: torch.dtype, relative: bool = False,
               scratch: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """Fold in one chunk: |torch_value - expected| against `bound`, elementwise.

        `scratch`: two float64 tensors of the values' shape to work in (else allocated).
        The relative error is |torch_value - expected| / |expected| (inf where expected is
        0 and they differ). Equal infinities agree; a NaN never does; an element whose bound
        is infinite or NaN is not checked (counted in `unbounded`, its ratio taken as 0);
        0/0 is an exact element where nothing may differ (ratio 0). Without `relative`
        (the end-to-end checks) the largest finite bound and the largest |expected| are kept
        too (`max_bound`, `max_value`: the scale `vacuous` bounds are judged by).
        """
        n = expected.numel()
        self.elements += n
        if n == 0:
            return
        scale = not relative
        if isinstance(bound, torch.Tensor):
            top = float(bound.max()) if bound.numel() else 0.0  # max propagates NaN
            if not math.isfinite(top):
                void = ~torch.isfinite(bound.expand_as(expected))
                self.unbounded += int(void.sum())
                if scale:
                    top = float(bound.masked_fill(~torch.isfinite(bound), 0.0).max())
                bound = bound.masked_fill(~torch.isfinite(bound), math.inf)
        elif not math.isfinite(bound):
            self.unbounded += n
            return
        else:
            top = bound
        if scale:
            low, high = torch.aminmax(expected)
            self.max_value = max(self.max_value, -float(low), float(high))  # NaN is ignored
            self.max_bound = max(self.max_bound, top)
        work, spare = scratch if scratch is not None else (None, None)
        error = torch.sub(torch_value, expected, out=work).abs_()
        largest = float(error.max())
        if not math.isfinite(largest):
            error = torch.where(torch_value == expected, 0.0, error).nan_to_num_(math.inf, math.inf)
            largest = float(error.max())
        if largest == 0.0:
            return  # every element is exact
        self.max_error = max(self.max_error, largest)
        if relative:
            rel = torch.div(error, expected, out=spare)  # 0/0 (NaN) where both are 0
            low, high = torch.aminmax(rel)
            if math.isnan(float(high)):
                low, high = torch.aminmax(rel.nan_to_num_(0.0, math.inf, -math.inf))
            self.max_rel_error = max(self.max_rel_error, -float(low), float(high))
        flat = error.div_(bound).reshape(-1)  # observed/bound
        worst_ratio, worst = first_max(flat)
        if math.isnan(worst_ratio):  # inf / inf where an unbounded element is not finite
            flat = flat.nan_to_num_(0.0, math.inf)
            worst_ratio, worst = first_max(flat)
        if worst_ratio > 1:
            self.violations += int((flat > 1).sum())
        self.ratios.add(flat[::max(1, n // _SAMPLED_RATIOS)])
        if worst_ratio >= self.ratio:
            self.ratio = worst_ratio
            self._note_worst(worst, torch_value, expected, bound, t_dtype)

    def _note_worst(self, worst: int, torch_value, expected, bound, t_dtype) -> None:
        """Record the bound, the error and the ulps at the worst element (a flat index)."""
        shape = expected.shape
        if isinstance(bound, torch.Tensor):
            bound = element(bound, shape, worst)
        self.bound_at_worst = bound
        t_worst = element(torch_value, shape, worst)
        e_worst = element(expected, shape, worst)
        self.value_at_worst = abs(e_worst)
        self.error_at_worst = 0.0 if t_worst == e_worst else abs(t_worst - e_worst)
        if math.isnan(self.error_at_worst):
            self.error_at_worst = math.inf
        ulp = ulp_above(t_worst, t_dtype)
        self.ulps_at_worst = self.error_at_worst / ulp if ulp > 0 else 0.0

    @property
    def sensitivity(self) -> float:
        """bound / |value| at the worst element: the smallest relative change of the value
        there that this check would have flagged (NaN when no element differed at all, so
        there is no worst element; inf at a zero value)."""
        if math.isnan(self.value_at_worst) or self.bound_at_worst == 0:
            return math.nan if math.isnan(self.value_at_worst) else 0.0
        return self.bound_at_worst / self.value_at_worst if self.value_at_worst else math.inf

    @property
    def median_ratio(self) -> float:
        return median_ratios([self.ratios])[0]


@dataclass
class NodeStats:
    """Both checks at one node, and what could not be checked."""

    local: CheckStats = field(default_factory=CheckStats)
    end_to_end: CheckStats = field(default_factory=CheckStats)
    notes: list[str] = field(default_factory=list)
    unchecked: bool = False  # some check could not run here: no certificate for this node
    structural: bool = False  # the node does not correspond to what runs (not a number)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
