"""check_exactness: PyTorch's value at every node held to the certified bound, node-local and
end to end, with the first violation in topological order."""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..frontend.conversion import convert
from ..frontend.isolation import untouched
from ..frontend.rewrites import rewrite_graph
from ..frontend.trace import Traced, trace_model
from ..frontend.trace_cache import recorded_trace
from ..ir import GraphIR
from .arithmetic import MATMUL_OPS, changed_since, read_arithmetic_model
from .checker import Checker
from .hooks import flag_hooks
from .report import VALUE_SAMPLE_SIZE, ExactnessReport
from .rules import subnormal_constants

CHUNK_ELEMENTS = 2 ** 20
"""Default chunk: as many samples as keep every node's batched value under this many elements
(8 MiB in float64). Fewer, larger chunks mean fewer tensor operations per sample."""

PROGRESS_UPDATES = 100
"""check_exactness reports progress at most this many times before its final report: each
time another 1/PROGRESS_UPDATES of the node steps is done, within chunks too, so that a
check of one large chunk moves."""

DEFAULT_SCALES = (1e-6, 1.0, 1e4)
"""Input magnitudes of the generated inputs: tiny, unit and large."""

_F64 = torch.float64


def generate_inputs(ir: GraphIR, samples_per_scale: int = 32, seed: int = 0,
                    scales: Sequence[float] = DEFAULT_SCALES) -> tuple[list[torch.Tensor], str]:
    """Seeded test inputs at several scales and signs; returns them and a description.

    Per scale: normal samples, one all-positive and one all-negative sample, one with zeros.
    """
    generator = torch.Generator().manual_seed(seed)
    batches: list[list[torch.Tensor]] = [[] for _ in ir.inputs]
    for scale in scales:
        for i, node in enumerate(ir.inputs):
            x = torch.randn((samples_per_scale, *node.shape), generator=generator, dtype=_F64)
            if samples_per_scale >= 3:
                x[0] = x[0].abs()
                x[1] = -x[1].abs()
                x[2] = torch.where(x[2] > 0, x[2], torch.zeros_like(x[2]))
            batches[i].append((x * scale).to(getattr(torch, node.dtype)))
    inputs = [torch.cat(b) for b in batches]
    text = (f"{len(scales) * samples_per_scale} generated samples (seed {seed}): "
            f"{samples_per_scale} per scale in {list(scales)}, normal with one positive, one "
            "negative and one half-zero sample per scale")
    return inputs, text


def check_exactness(model: nn.Module, ir: GraphIR | None = None, *inputs: torch.Tensor,
                    samples_per_scale: int = 32, seed: int = 0, chunk_size: int | None = None,
                    local: bool = True, end_to_end: bool = True,
                    progress: bool | Callable[[int, int], None] = False,
                    keep_samples: int = VALUE_SAMPLE_SIZE) -> ExactnessReport:
    """Check, for every node and every element, that PyTorch agrees with GraphIR within the
    certified floating-point bound.

    Node-local: each IR node re-evaluated in float64 on PyTorch's own values of its inputs,
    held to that single op's rounding bound; a translation fault shows at its node.
    End to end: the float64 reference graph run from the inputs with error radii carried
    through the graph; |torch - reference| <= B(u_torch) + B(u_ref) at every node, and the
    model's own eager outputs are held to the same bound.

    The FX graph checked is the model traced again; when `ir` is the GraphIR `convert`
    returned for this same model object, that trace is used if it is identical node by node
    to convert's (frontend/trace_cache.py), else (or when its outputs are not bit-identical
    to the eager model's) the model is traced again in full.

    Hooks are not part of the GraphIR: any forward hook or pre-hook that runs when the model
    is called (its own, a called submodule's, a global one) leaves the report NOT CERTIFIED
    there, with a note naming it (exactness/hooks.py).

    Args:
        model: The model the IR was converted from; it is run (hooks and all), never
            modified.
        ir: Its GraphIR; converted from `model` when None (then `inputs` are required, or
            give the IR).
        *inputs: Batched inputs; generated when omitted (several scales and signs, seeded).
        samples_per_scale: Generated samples per scale.
        seed: Seed of the generated inputs.
        chunk_size: Samples held in memory at once; None: as many as keep every node's
            value under `CHUNK_ELEMENTS` elements (memory is bounded by the chunk, never by
            the number of samples).
        local: Run the node-local check.
        end_to_end: Run the end-to-end check.
        progress: True to print progress to stderr, or a callback(done, total): done of
            total node steps (the graph's nodes times the chunks), at most
            `PROGRESS_UPDATES` + 1 calls, never backwards (not even when the model is traced
            again and checked a second time), the last with done == total.
        keep_samples: Elements per node whose PyTorch and reference values are kept for
            `report.value_sample` (chosen from `seed`); 0 keeps none. The output error
            sample (`report.output_error_sample`, up to 4096 elements per output) is
            always kept.

    Returns:
        An ExactnessReport (`.ok`, `.first_violation`, `.to_pandas()`).

    Raises:
        ValueError: Neither an IR nor inputs were given, the IR does not match the model, the
            inputs do not match the IR's Input nodes (count, per-sample shape, dtype) or are
            empty, or the options would check nothing (no samples, no chunk, both checks
            off): a check of nothing certifies nothing.
        TypeError: `ir` is not a GraphIR, an input is not a tensor, or an option is not of
            its type (ints for counts and the seed, bools for the switches).

    Safe to call from several threads; calls of `check_exactness`, `convert` and `diagnose`
    run one at a time (docs/reliability.md).

    Example:
        >>> report = ncet.check_exactness(model, ir)
        >>> report.ok, report.first_violation
    """
    if isinstance(ir, torch.Tensor):
        ir, inputs = None, (ir, *inputs)
    samples_per_scale, seed, chunk_size, keep_samples = _checked_counts(
        samples_per_scale=samples_per_scale, seed=seed, chunk_size=chunk_size,
        keep_samples=keep_samples)
    for name, value in (("local", local), ("end_to_end", end_to_end)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, not {value!r:.60}")
    _check_options(samples_per_scale, chunk_size, local, end_to_end, bool(inputs))
    if ir is None:
        if not inputs:
            raise ValueError("give the GraphIR or example inputs, e.g. "
                             "check_exactness(model, ncet.convert(model, (4,)))")
        _check_tensors(inputs)
        ir = convert(model, *(tuple(x.shape[1:]) for x in inputs), dtype=inputs[0].dtype)
    if not isinstance(ir, GraphIR):
        raise TypeError(f"ir must be a GraphIR (from ncet.convert or ncet.load), not "
                        f"{type(ir).__name__}")
    if inputs:
        _check_inputs(ir, inputs)
        described = f"{inputs[0].shape[0]} given samples"
    else:
        inputs, described = generate_inputs(ir, samples_per_scale, seed)
    if chunk_size is None:
        widest = max((math.prod(n.shape) for n in ir.nodes if n.shape is not None), default=1)
        chunk_size = max(1, CHUNK_ELEMENTS // max(widest, 1))
    low_precision = tuple(getattr(torch, n.dtype) for n in ir.nodes
                          if n.op_type in MATMUL_OPS and n.dtype in ("bfloat16", "float16"))

    reporter = _Progress(progress)
    read = arithmetic = read_arithmetic_model(low_precision)  # before the model runs
    if arithmetic.flush and (subnormal := subnormal_constants(
            ir.nodes, ir.constants, arithmetic.flushing_kernels)):
        arithmetic = arithmetic.outside(
            f"subnormal constants ({', '.join(subnormal[:5])}) may be flushed to zero, "
            "which the underflow term does not cover")

    def check(traced: Traced) -> ExactnessReport:
        checker = Checker(model, traced, ir, arithmetic, local=local, end_to_end=end_to_end)
        flag_hooks(checker, traced)  # any hook leaves the check NOT CERTIFIED (hooks.py)
        total = inputs[0].shape[0]
        checker.sample(total, keep_samples, seed)
        starts = range(0, total, chunk_size)
        steps = len(starts) * checker.steps
        for i, start in enumerate(starts):
            done = i * checker.steps
            tick = None if not progress else \
                (lambda step, done=done: reporter(done + step, steps))  # throttled there
            checker.run([x[start:start + chunk_size] for x in inputs], start, tick)
            if i in (0, len(starts) - 1) and checker.arithmetic.certified and (
                    changed := changed_since(read, low_precision)):
                # forward() changed the arithmetic (flushing, a precision flag) after it was
                # read: the bounds do not cover what ran; the user's state is left as is
                checker.arithmetic = checker.arithmetic.outside(changed)
        return checker.report(described, total)

    with untouched(model):  # the RNG, the grad mode and the model's buffers, as they were
        traced = recorded_trace(ir, model)
        if traced is not None:
            report = check(traced)
            if not report.traced_differs:
                reporter.finish()
                return report
            # forward() may behave differently since convert: check the model's current
            # trace, so that a difference is found at its node and not only at the outputs
        traced = trace_model(model, len(ir.inputs))
        # what convert(..., rewrite=True) did to its copy: nothing for a graph that converts
        # without it (such a graph has no in-place form and no size-dependent reshape)
        rewrite_graph(traced.graph, traced.call_modules())
        report = check(traced)
    reporter.finish()
    return report


MAX_COUNT = 10**6
"""The most generated samples per scale, and the most kept value samples per node."""

_COUNT_LIMITS = {"samples_per_scale": MAX_COUNT, "keep_samples": MAX_COUNT,
                 "seed": 2**63 - 1, "chunk_size": 2**62}


def _checked_counts(**options) -> list[int | None]:
    """The integer options as ints (anything `operator.index` takes: a NumPy integer too,
    not a bool or a float), each at most its limit, named when it is not."""
    values = []
    for name, value in options.items():
        if value is None and name == "chunk_size":
            values.append(None)
            continue
        if isinstance(value, bool):
            raise TypeError(f"{name} must be an int, not bool {value!r}")
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"{name} must be an int, not {type(value).__name__} "
                            f"{value!r:.60}") from None
        if not 0 <= value <= _COUNT_LIMITS[name]:
            raise ValueError(f"{name}={value:.6g}: give an int from 0 to "
                             f"{_COUNT_LIMITS[name]:,}" if value > 0 else
                             f"{name}={value}: give an int from 0 to {_COUNT_LIMITS[name]:,}")
        values.append(value)
    return values


def _check_options(samples_per_scale: int, chunk_size: int | None, local: bool,
                   end_to_end: bool, given: bool) -> None:
    """Refuse options under which nothing would be checked."""
    if not (local or end_to_end):
        raise ValueError("local=False and end_to_end=False check nothing: keep at least one")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size}: give at least 1 sample per chunk, or None")
    if not given and samples_per_scale < 1:
        raise ValueError(f"samples_per_scale={samples_per_scale}: generate at least 1 sample "
                         "per scale, or give inputs")


def _check_tensors(inputs: Sequence) -> None:
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"input {i} is a {type(x).__name__}, not a tensor")
        if x.device.type != "cpu" or x.layout != torch.strided:
            raise ValueError(f"input {i} is a {x.layout} tensor on {x.device}: "
                             "check_exactness runs on dense CPU tensors")
        if x.dim() == 0 or x.shape[0] == 0:
            raise ValueError(f"input {i} has no samples (shape {list(x.shape)}): give a batch "
                             "of at least one sample")


def _check_inputs(ir: GraphIR, inputs: Sequence) -> None:
    """The inputs are what the IR's Input nodes declare: count, per-sample shape, dtype,
    and one batch size, with at least one sample."""
    if len(inputs) != len(ir.inputs):
        raise ValueError(f"{len(inputs)} input(s) given, but the GraphIR has "
                         f"{len(ir.inputs)} Input node(s): "
                         f"{', '.join(repr(n.name) for n in ir.inputs)}")
    _check_tensors(inputs)
    for node, x in zip(ir.inputs, inputs):
        if tuple(x.shape[1:]) != tuple(node.shape):
            raise ValueError(f"input {node.name!r} has per-sample shape {list(x.shape[1:])}, "
                             f"but the GraphIR was converted for {list(node.shape)}: pass a "
                             "batch of those, with the batch axis first")
        if str(x.dtype).removeprefix("torch.") != node.dtype:
            raise ValueError(f"input {node.name!r} is {x.dtype} but the GraphIR was "
                             f"converted for {node.dtype}: the bounds assume that "
                             "precision; pass inputs of that dtype")
    sizes = {x.shape[0] for x in inputs}
    if len(sizes) > 1:
        raise ValueError(f"the inputs have different batch sizes {sorted(sizes)}")


class _Progress:
    """check_exactness's progress reports: one each time another 1/PROGRESS_UPDATES of the
    steps is done, never backwards (a second pass over a retraced model reports only once
    it passes the first), and (total, total) once, when the check is done."""

    def __init__(self, progress: bool | Callable[[int, int], None]):
        self.progress = progress
        self.reached = 0  # hundredths (for PROGRESS_UPDATES = 100) reported so far
        self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.total = total
        reached = done * PROGRESS_UPDATES // max(total, 1)
        if self.progress and done < total and reached > self.reached:
            self.reached = reached
            _report_progress(self.progress, done, total)

    def finish(self) -> None:
        if self.progress and self.total:
            _report_progress(self.progress, self.total, self.total)


def _report_progress(progress, done: int, total: int) -> None:
    if callable(progress):
        progress(done, total)
    elif progress:
        print(f"\rcheck_exactness: {100 * done // max(total, 1)}%",
              end="\n" if done == total else "", file=sys.stderr, flush=True)
