"""The running statistics of check_exactness (ncet/exactness/stats.py), each against a plain
reference computation: index choice, the bounded ratio sample and its median, the ulp."""

from __future__ import annotations

import math

import pytest
import torch

from ncet.exactness.stats import (
    CheckStats,
    RatioSample,
    choose_indices,
    element,
    first_max,
    median_ratios,
    sample_indices,
    ulp_above,
)


def one_at_a_time(total: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """The stratified choice written out for one total (what choose_indices vectorises)."""
    if total <= k:
        return torch.arange(total)
    edges = torch.arange(k + 1) * total // k
    width = edges[1:] - edges[:-1]
    draw = (torch.rand(k, generator=generator, dtype=torch.float64) * width).long()
    return edges[:-1] + torch.minimum(draw, width - 1)


@pytest.mark.parametrize("totals", [[], [3], [300, 2, 1000, 256, 257, 10 ** 9, 0, 5000]])
def test_choose_indices_draws_what_one_at_a_time_would(totals):
    fast = choose_indices(totals, 256, torch.Generator().manual_seed(7))
    generator = torch.Generator().manual_seed(7)
    slow = [one_at_a_time(total, 256, generator) for total in totals]
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        assert torch.equal(a, b)
    assert torch.equal(sample_indices(1000, 256, torch.Generator().manual_seed(7)),
                       one_at_a_time(1000, 256, torch.Generator().manual_seed(7)))


def test_ratio_sample_keeps_one_buffer_and_weighs_every_chunk_alike():
    sample = RatioSample()
    chunks = 40
    for chunk in range(chunks):
        sample.add(torch.full((256,), float(chunk), dtype=torch.float64))
        assert sample.values.numel() == 256  # the first chunk's size, never more
    counts = torch.bincount(sample.kept().long(), minlength=chunks)
    assert counts.sum() == sample.filled and int(counts.min()) >= 1
    assert int(counts.max()) - int(counts.min()) <= 1 + int(counts.max()) // 2
    # every chunk weighs alike, so the median of the kept values is the middle chunk's
    assert abs(median_ratios([sample])[0] - (chunks - 1) / 2) <= 1


@pytest.mark.parametrize("values", [
    [0.5, 0.25, 2.0], [3.0, math.inf, 1.0, math.nan, 2.0], [math.inf, math.nan], [],
    [7.0]], ids=["finite", "non-finite-dropped", "none-finite", "empty", "one"])
def test_median_ratios_is_the_median_of_the_finite_values(values):
    samples = [RatioSample(), RatioSample()]
    if values:
        samples[0].add(torch.tensor(values, dtype=torch.float64))
    finite = [v for v in values if math.isfinite(v)]
    expected = float(torch.tensor(finite).median()) if finite else 0.0
    assert median_ratios(samples) == [expected, 0.0]


def _first_max_cases():
    """(name, tensor): lengths below, at and past the row cut, ties, NaN, infinities."""
    g = torch.Generator().manual_seed(3)
    for n in (1, 7, 4096, 32_768, 32_769, 40_000, 163_840, 163_841):
        yield f"random-{n}", torch.rand(n, generator=g, dtype=torch.float64)
    tie = torch.zeros(40_000, dtype=torch.float64)
    tie[[17, 4_500, 39_999]] = 2.0
    yield "tie-in-two-rows", tie
    late = torch.zeros(40_000, dtype=torch.float64)
    late[[39_998, 39_999]] = 1.0  # the tie in the ragged tail
    yield "tie-in-tail", late
    nan = torch.rand(40_000, generator=g, dtype=torch.float64)
    nan[[3_000, 36_000]] = math.nan
    nan[100] = math.inf
    yield "nan-over-inf", nan
    yield "all-inf", torch.full((33_000,), math.inf, dtype=torch.float64)
    yield "negative", -torch.rand(33_000, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("values", [v for _, v in _first_max_cases()],
                         ids=[name for name, _ in _first_max_cases()])
def test_first_max_is_max_over_dim_0(values):
    """The two-level reduction gives what `flat.max(0)` gives: the value and its first
    index, NaN counted as the largest."""
    value, index = values.max(0)
    got_value, got_index = first_max(values)
    assert got_index == int(index)
    assert got_value == float(value) or (math.isnan(got_value) and math.isnan(float(value)))


@pytest.mark.parametrize("value", [
    torch.arange(24.0).reshape(2, 3, 4), torch.arange(24.0).reshape(4, 3, 2).permute(2, 1, 0),
    torch.tensor(5.0), torch.arange(4.0), torch.arange(3.0).reshape(1, 3, 1)],
    ids=["contiguous", "permuted", "scalar", "last-axis", "middle-axis"])
def test_element_reads_the_broadcast_value_row_major(value):
    shape = torch.Size((2, 3, 4))
    flat = value.expand(shape).reshape(-1)  # what element avoids building
    assert [element(value, shape, i) for i in range(24)] == flat.tolist()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32,
                                   torch.float64], ids=str)
def test_ulp_above_is_the_spacing_nextafter_gives(dtype):
    info = torch.finfo(dtype)
    values = [0.0, info.smallest_normal * info.eps, info.smallest_normal / 3,
              info.smallest_normal, 1.0, 1.5, 2.0, -2.0, 3.0e-3, info.max / 2, info.max,
              -info.max]
    values += torch.randn(200, generator=torch.Generator().manual_seed(0)).tolist()
    for value in values:
        t = torch.tensor(abs(value), dtype=dtype)
        spacing = torch.nextafter(t, torch.tensor(math.inf, dtype=dtype)) - t
        assert ulp_above(float(t), dtype) == float(spacing.to(torch.float64)), value
    assert ulp_above(math.inf, dtype) == math.inf and ulp_above(math.nan, dtype) == math.inf


def test_check_stats_against_a_written_out_comparison():
    g = torch.Generator().manual_seed(3)
    expected = torch.randn(6, 5, generator=g, dtype=torch.float64)
    torch_value = expected + 1e-7 * torch.randn(6, 5, generator=g, dtype=torch.float64)
    bound = torch.full((6, 5), 1.5e-7, dtype=torch.float64)
    stats = CheckStats()
    stats.update(torch_value, expected, bound, torch.float32, relative=True)
    error = (torch_value - expected).abs()
    ratio = error / bound
    worst = int(ratio.reshape(-1).argmax())
    assert stats.max_error == float(error.max())
    assert stats.max_rel_error == float((error / expected.abs()).max())
    assert stats.ratio == float(ratio.max())
    assert stats.violations == int((ratio > 1).sum())
    assert stats.bound_at_worst == 1.5e-7
    assert stats.error_at_worst == float(error.reshape(-1)[worst])
    assert stats.elements == 30
    assert stats.median_ratio == float(ratio.reshape(-1).median())


_CHUNK_COUNTS = (1, 2, 3, 63, 64, 65, 129, 200)
_NODE_SIZES = (1, 2, 3, 4, 7, 256, 300, 1000)


@pytest.mark.parametrize("size", _NODE_SIZES)
@pytest.mark.parametrize("chunks", _CHUNK_COUNTS)
def test_ratio_sample_is_a_bounded_thinning_of_every_chunks_ratios(chunks, size):
    # every ratio is its element's position in the whole run (+1, so none is exact)
    stats = CheckStats()
    stream = []
    for chunk in range(chunks):
        ratios = torch.arange(chunk * size, (chunk + 1) * size, dtype=torch.float64) + 1
        stats.update(ratios.clone(), torch.zeros(size, dtype=torch.float64), 1.0,
                     torch.float64)
        stream.append(ratios[::max(1, size // 256)])  # what update promises to sample
    stream = torch.cat(stream)
    sample = stats.ratios
    kept = sample.kept()
    # the first chunk's sample, at least 256
    capacity = max(256, stream.shape[0] // chunks)
    assert sample.values.numel() == capacity and kept.numel() <= capacity
    # the stream's every thin-th ratio from the first, none left out, with the smallest
    # power-of-two stride that fits the buffer (the stride doubles only when it must)
    thin = 1
    while -(-stream.shape[0] // thin) > capacity:
        thin *= 2
    assert torch.equal(kept, stream[::thin])
    assert kept.numel() >= min(stream.shape[0], (capacity + 1) // 2)  # never under half
    assert stats.elements == chunks * size


@pytest.mark.parametrize("chunks", (1, 2, 63, 64, 65, 200))
def test_ratio_sample_of_a_two_element_node_survives_many_chunks(chunks):
    sample = RatioSample()
    for chunk in range(chunks):
        sample.add(torch.tensor([2.0 * chunk, 2.0 * chunk + 1], dtype=torch.float64))
    kept = sample.kept()
    assert kept.numel() == min(2 * chunks, 256) or 128 <= kept.numel() <= 256
    assert kept[0] == 0.0  # the stream's first ratio, and every value a ratio seen
    assert all(float(v).is_integer() and 0 <= v < 2 * chunks for v in kept)
    if 2 * chunks <= 256:  # nothing thinned while everything fits
        assert torch.equal(kept, torch.arange(2 * chunks, dtype=torch.float64))
