"""check_runtime: another runtime's value at every IR node (onnxruntime running an exported
file, an ONNX importer's PyTorch module) held to the same certified bounds as
`check_exactness` holds PyTorch's, node-local and end to end."""

from __future__ import annotations

import linecache
import math
from collections.abc import Callable, Mapping, Sequence

import torch

from ..ir import GraphIR, IRNode
from .arithmetic import ArithmeticModel, read_arithmetic_model
from .check import CHUNK_ELEMENTS, _check_inputs, _checked_counts, _Progress, generate_inputs
from .flush_bounds import input_radius
from .node_checks import NodeChecks
from .report import VALUE_SAMPLE_SIZE, ExactnessReport

_F64 = torch.float64

RUNTIME_CHUNK_ELEMENTS = 16 * CHUNK_ELEMENTS
"""A runtime returns every node's value of a chunk at once, so the chunk holds at most this
many elements over all nodes together (64 MiB of float32), not per node as in
`check_exactness`. Each chunk repeats the per-node work, which dominates on small layers."""

RUNTIME_NODE_ELEMENTS = 4 * CHUNK_ELEMENTS
"""And at most this many elements at any one node, whose float64 copies, reference, radius
and scratch buffers the check holds at once (32 MiB each)."""

Values = Mapping[str, torch.Tensor]
Run = Callable[[list[torch.Tensor]], "Values | tuple[Values, Sequence[torch.Tensor]]"]
"""A runtime: batched inputs in, its value of every IR operator node out, keyed by the IR
node's name (batch axis first, in the node's dtype); optionally also its graph outputs, in
the IR's output order."""


class RuntimeChecker(NodeChecks):
    """Checks a runtime's values, given by IR node name, in the IR's topological order."""

    def __init__(self, ir: GraphIR, run: Run, arithmetic: ArithmeticModel, *, runtime: str,
                 local: bool, end_to_end: bool, faults: Mapping[str, str] = {}):
        super().__init__(ir, arithmetic, local=local, end_to_end=end_to_end, runtime=runtime)
        self.run_values = run
        self.inputs = sorted(ir.inputs, key=lambda n: n.attrs["index"])
        self.operators = [n for n in ir.nodes if n.op_type not in ("Input", "Output")]
        self.steps = len(self.operators)
        self.last_use = {name: i for i, n in enumerate(self.operators) for name in n.inputs}
        for name, fault in faults.items():
            self.flag(name, fault)

    def run(self, chunk: list[torch.Tensor], start: int = 0,
            tick: Callable[[int], None] | None = None) -> None:
        """Run the runtime on one chunk and check every node's value, then the outputs."""
        result = self.run_values([x.clone() for x in chunk])
        values, outputs = result if isinstance(result, tuple) else (result, None)
        self.as_f64 = {}
        ref: dict[str, torch.Tensor | None] = {}
        radius: dict[str, torch.Tensor | None] = {}
        raw: dict[str, torch.Tensor] = {}
        count = chunk[0].shape[0]
        for node, x in zip(self.inputs, chunk):
            raw[node.name] = x
            ref[node.name] = self.as_f64[node.name] = x.to(_F64)
            radius[node.name] = input_radius(x, self.arithmetic)  # §2.2
            if node.name in self.samplers:
                self.samplers[node.name].take(start, count, x, x)
        keep = set(self.ir.outputs)
        with torch.no_grad():
            for step, node in enumerate(self.operators, 1):
                value = values.get(node.name)
                if value is None:
                    self.stats[node.name].note(f"no value of this node in {self.runtime}'s "
                                               "run: not checked")
                    self.stats[node.name].unchecked = True
                    ref[node.name] = radius[node.name] = None
                else:
                    raw[node.name] = value
                    self._check_node(node, value, [raw.get(n) for n in node.inputs], ref,
                                     radius)
                    if node.name in self.samplers:
                        self.samplers[node.name].take(start, count, value, ref.get(node.name))
                for name in node.inputs:  # free what no later node reads
                    if self.last_use.get(name) == step - 1 and name not in keep:
                        for env in (ref, radius, raw, self.as_f64):
                            env.pop(name, None)
                if tick is not None:
                    tick(step)
        self._check_outputs(values, outputs, raw, ref, radius, start, count)

    def _check_outputs(self, values, outputs, raw, ref, radius, start: int,
                       count: int) -> None:
        for i, name in enumerate(self.ir.outputs):
            stats = self.outputs[i]
            value = values.get(name, raw.get(name)) if outputs is None else outputs[i]
            if value is None:
                stats.note(f"no value of this output in {self.runtime}'s run: not checked")
                stats.unchecked = True
                continue
            self.output_samplers[name].take(start, count, value, ref.get(name))
            if ref.get(name) is None or radius.get(name) is None:
                if self.end_to_end:
                    stats.note("no reference value (an upstream node failed): not checked "
                               "end to end")
                    stats.unchecked = True
                continue
            if ref[name].shape != value.shape:
                stats.note(f"shape {list(value.shape[1:])} from {self.runtime}, "
                           f"{list(ref[name].shape[1:])} from the IR")
                stats.end_to_end.violate()
                continue
            stats.end_to_end.update(value.to(_F64), ref[name], radius[name], value.dtype,
                                    scratch=self.scratch(value.shape))

    def _source_text(self, node: IRNode) -> str:
        """The source line's text, read from the file the IR node's location names."""
        path, _, line = node.source.location.rpartition(":")
        return linecache.getline(path, int(line)).strip() if line.isdigit() else ""


def check_runtime(ir: GraphIR, run: Run, *inputs: torch.Tensor, runtime: str,
                  arithmetic: ArithmeticModel | None = None, batch: int | None = None,
                  samples_per_scale: int = 32, seed: int = 0, local: bool = True,
                  end_to_end: bool = True, faults: Mapping[str, str] = {}, context: str = "",
                  progress: bool | Callable[[int, int], None] = False,
                  keep_samples: int = VALUE_SAMPLE_SIZE) -> ExactnessReport:
    """Hold `run`'s value at every IR node to the certified bounds of `check_exactness`.

    Args:
        ir: The GraphIR the runtime's graph was exported from.
        run: The runtime (`Run`): batched inputs in, its values by IR node name out.
        *inputs: Batched inputs; generated as `check_exactness` generates them when omitted.
        runtime: The runtime's name, as the report's notes name it.
        arithmetic: The arithmetic the runtime is declared to follow (probed by the caller);
            PyTorch's, read now, when None.
        batch: A runtime that takes a fixed batch size gets chunks of exactly this size.
        faults: Structural faults found by the caller, by IR node name: flagged violations.
        context: Appended to the report's description of the inputs (what was run).
        samples_per_scale, seed, local, end_to_end, progress, keep_samples: As in
            `check_exactness`.

    Returns:
        An ExactnessReport.
    """
    samples_per_scale, seed, keep_samples = _checked_counts(
        samples_per_scale=samples_per_scale, seed=seed, keep_samples=keep_samples)
    if not (local or end_to_end):
        raise ValueError("local=False and end_to_end=False check nothing: keep at least one")
    if inputs:
        _check_inputs(ir, inputs)
        described = f"{inputs[0].shape[0]} given samples"
    else:
        if samples_per_scale < 1:
            raise ValueError(f"samples_per_scale={samples_per_scale}: generate at least 1 "
                             "sample per scale, or give inputs")
        inputs, described = generate_inputs(ir, samples_per_scale, seed)
    total = inputs[0].shape[0]
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"the runtime's graph has a fixed batch size of {batch!r}; a "
                             "batch size is a positive int")
        if total % batch:
            raise ValueError(f"{total} samples do not split into batches of {batch}, the "
                             "fixed batch size of the runtime's graph")
        count = total // batch
    else:  # a runtime gives all of a chunk's values at once: bound their sum, and each's
        sizes = [math.prod(n.shape) for n in ir.nodes if n.shape is not None]
        most = max(1, min(RUNTIME_CHUNK_ELEMENTS // max(sum(sizes), 1),
                          RUNTIME_NODE_ELEMENTS // max(max(sizes, default=1), 1)))
        count = -(-total // most)  # as few chunks as fit
    # sizes within one sample of each other, the largest first (the buffers they size)
    edges = [-(-i * total // count) for i in range(count + 1)] if count else [0]
    checker = RuntimeChecker(ir, run, arithmetic or read_arithmetic_model(), runtime=runtime,
                             local=local, end_to_end=end_to_end, faults=faults)
    checker.sample(total, keep_samples, seed)
    reporter = _Progress(progress)
    steps = count * checker.steps
    for i, (start, end) in enumerate(zip(edges, edges[1:])):
        done = i * checker.steps
        tick = None if not progress else (lambda step, done=done: reporter(done + step, steps))
        checker.run([x[start:end] for x in inputs], start, tick)
    reporter.finish()
    return checker.report(f"{described}, run in {runtime}{context}", total)
