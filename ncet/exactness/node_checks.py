"""What every check of a runtime against GraphIR shares: per IR node, the node-local check on
the runtime's own inputs, the end-to-end check against the float64 reference with carried
error radii, and the report. `checker.Checker` walks PyTorch's traced graph with it,
`runtime_check.RuntimeChecker` a runtime's values by IR node name (onnxruntime, an ONNX
importer)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import torch

from ..evaluate import EVALUATORS
from ..ir import GraphIR, IRNode
from .arithmetic import UNIT_ROUNDOFF, ArithmeticModel
from .bounds import NodeBound, NodeInputs
from .fast_paths import bounds_for
from .report import OUTPUT_ERROR_SAMPLE_SIZE, ExactnessEntry, ExactnessReport, OutputEntry
from .rules import BOUND_RULES
from .scratch import AbsoluteConstants, Scratch
from .stats import ElementSampler, NodeStats, choose_indices, median_ratios

_F64 = torch.float64


@dataclass(frozen=True, slots=True)
class _Visit:
    """One operator node in one chunk: its inputs as bounded, its stats, PyTorch's value
    (float64)."""

    at: NodeInputs
    stats: NodeStats
    value: torch.Tensor

    @property
    def node(self) -> IRNode:
        return self.at.node


class NodeChecks:
    """What every check of a runtime's values against GraphIR shares: per IR node, its
    stats, the node-local check on the runtime's own inputs, the end-to-end check against
    the float64 reference with carried radii, and the report.

    A subclass walks its runtime (PyTorch's traced graph, `Checker`; a runtime's values by
    IR node name, `runtime_check.RuntimeChecker`) and calls `_check_node` at each node.
    """

    def __init__(self, ir: GraphIR, arithmetic: ArithmeticModel, *, local: bool,
                 end_to_end: bool, runtime: str = "PyTorch"):
        self.ir, self.arithmetic = ir, arithmetic
        self.local, self.end_to_end = local, end_to_end
        self.consts = {k: v.to(_F64) for k, v in ir.constants.items()}
        self.abs_consts = AbsoluteConstants(self.consts)
        self.ir_nodes = {n.name: n for n in ir.nodes if n.op_type not in ("Input", "Output")}
        self.stats = {name: NodeStats() for name in self.ir_nodes}
        self.outputs = [NodeStats() for _ in ir.outputs]
        self.traced_differs = False
        self.cut_reasons: dict[str, str] = {}  # the model's nodes a GraphIR cut short leaves out
        self.samplers: dict[str, ElementSampler] = {}
        self.output_samplers: dict[str, ElementSampler] = {}
        self.scratch = Scratch()
        self.bounds = bounds_for(ir.constants, self.abs_consts, arithmetic, self.scratch)
        self.as_f64: dict[str, torch.Tensor] = {}  # the runtime's values, converted once
        self.runtime = runtime

    def flag(self, name: str, fault: str) -> None:
        """A structural fault at IR node `name`: a node the numbers cannot vouch for."""
        self.stats[name].note(fault)
        self.stats[name].local.violate()
        self.stats[name].structural = True

    def sample(self, total: int, keep: int, seed: int) -> None:
        """Choose the elements kept for the report's value and output error samples."""
        generator = torch.Generator().manual_seed(seed)
        kept = [n for n in self.ir.nodes if n.op_type != "Output"] if keep > 0 else []
        sizes = [math.prod(n.shape) for n in kept]
        chosen = choose_indices([total * size for size in sizes], keep, generator)
        block = torch.full((len(kept), 2, keep), math.nan, dtype=_F64)  # one allocation
        for node, size, indices, buffers in zip(kept, sizes, chosen, block):
            self.samplers[node.name] = ElementSampler(indices, size, total * size,
                                                      buffers[:, :indices.shape[0]])
        sizes = [math.prod(self.ir.node(name).shape) for name in self.ir.outputs]
        for name, size, indices in zip(self.ir.outputs, sizes, choose_indices(
                [total * size for size in sizes], OUTPUT_ERROR_SAMPLE_SIZE, generator)):
            self.output_samplers[name] = ElementSampler(indices, size, total * size)

    def _check_node(self, node: IRNode, torch_value, raw: list[torch.Tensor], ref,
                    radius) -> None:
        """Hold the runtime's value at `node` (computed from `raw`, its values of the node's
        inputs) to the node-local and end-to-end bounds."""
        stats = self.stats[node.name]
        if not isinstance(torch_value, torch.Tensor):
            stats.note(f"{self.runtime}'s value is not a tensor: not checked")
            stats.unchecked = True
            ref[node.name] = radius[node.name] = None
            return
        if any(name not in self.as_f64 for name in node.inputs):
            stats.note(f"an input has no value in {self.runtime}'s run: not checked")
            stats.unchecked = True
            ref[node.name] = radius[node.name] = None
            return
        ins = [self.as_f64[name] for name in node.inputs]
        t = self.as_f64[node.name] = torch_value.to(_F64)
        computed = str(torch_value.dtype).removeprefix("torch.")
        if computed != node.dtype:  # bound the rounding the runtime did, and flag the record
            stats.note(f"dtype: the IR records {node.dtype}, {self.runtime} computes "
                       f"{computed}")
            stats.local.violate()
        if tuple(torch_value.shape[1:]) != tuple(node.shape):  # the record's own claim
            self.flag(node.name, f"structure: the IR declares per-sample shape "
                                 f"{list(node.shape)}, {self.runtime} computes "
                                 f"{list(torch_value.shape[1:])}")
        visit = _Visit(NodeInputs(node, raw, ins, torch_value.dtype, t.shape), stats, t)
        try:
            bound = self.bounds.local(visit.at)
        except Exception as exc:  # a faulty IR node (constants of the wrong shape, say)
            stats.note(f"the IR node's bound fails on {self.runtime}'s inputs: "
                       f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160]}")
            stats.local.violate()
            ref[node.name] = radius[node.name] = None
            return
        expected = self._local(visit, bound) if self.local else None
        if self.end_to_end:
            self._end_to_end(visit, ref, radius, expected, bound)

    def _local(self, visit: _Visit, bound: NodeBound | None) -> torch.Tensor | None:
        """Hold PyTorch's value to the node-local bound; returns the float64 value of the IR
        node on PyTorch's inputs (None when it fails or has another shape)."""
        node, stats, t = visit.node, visit.stats, visit.value
        try:
            expected = EVALUATORS[node.op_type](node, visit.at.values, self.consts)
        except Exception as exc:  # a faulty IR may not even evaluate on these shapes
            stats.note(f"node-local: the IR node fails on {self.runtime}'s inputs: {exc}")
            stats.local.violate()
            return None
        if expected.shape != t.shape:
            stats.note(f"node-local: shape {list(expected.shape[1:])} from the IR, "
                       f"{list(t.shape[1:])} from {self.runtime}")
            stats.local.violate()
            return None
        stats.local.update(t, expected, 0.0 if bound is None else bound.value, visit.at.dtype,
                           relative=True, scratch=self.scratch(t.shape))
        return expected

    def _end_to_end(self, visit: _Visit, ref, radius, expected: torch.Tensor | None,
                    bound: NodeBound | None) -> None:
        """Hold PyTorch's value to the reference and its radius, and record both for the
        node's users. `bound` is the node-local bound (any route's: `.value`, `.radius`)."""
        node, stats, t, ins = visit.node, visit.stats, visit.value, visit.at.values
        ins_ref = [ref.get(name) for name in node.inputs]
        ins_radius = [radius.get(name) for name in node.inputs]
        if any(v is None for v in ins_ref) or any(v is None for v in ins_radius):
            stats.note("end to end: an input has no reference value (upstream failed): "
                       "not checked")
            stats.unchecked = True
            ref[node.name] = radius[node.name] = None
            return
        try:
            if expected is not None and all(a is b for a, b in zip(ins_ref, ins)):
                value = expected  # the reference's inputs are PyTorch's (graph inputs)
            else:
                value = EVALUATORS[node.op_type](node, ins_ref, self.consts)
            if all(e.dim() == 0 and float(e) == 0 for e in ins_radius):
                # exact inputs carry no error: PyTorch and the reference round the same values
                total = torch.zeros((), dtype=_F64) if bound is None else bound.value.clone()
            else:
                radii = [e.expand_as(x) for e, x in zip(ins_radius, ins_ref)]
                total = BOUND_RULES[node.op_type].carry(node, radii, self.abs_consts) \
                    if bound is None else bound.radius(radii)  # exact ops: exactly
        except Exception as exc:
            stats.note(f"end to end: the IR node fails on the reference inputs: {exc}")
            stats.end_to_end.violate()
            ref[node.name] = radius[node.name] = None
            return
        if value.shape != t.shape:
            stats.end_to_end.violate()
            ref[node.name] = radius[node.name] = None
            return
        stats.end_to_end.update(t, value, total, visit.at.dtype, scratch=self.scratch(t.shape))
        ref[node.name], radius[node.name] = value, total

    def _source_text(self, node: IRNode) -> str:
        """The text of the node's source line (none by default: an IR keeps file:line)."""
        return ""

    def _tier_two(self, node: IRNode) -> float:
        """Certified over probabilistic rounding factor of a node, at least 1: Higham and
        Mary's lambda sqrt(k) u against gamma_k, for the node's k roundings (for a
        bfloat16/float16 Linear or Conv2d, of its float32 accumulation)."""
        rule = BOUND_RULES[node.op_type]
        if rule.magnitude is None:
            return 1.0
        try:
            shapes = [tuple(self.ir.node(name).shape) for name in node.inputs]
            k = rule.roundings(node, shapes, self.ir.constants)
        except Exception:  # noqa: BLE001 - a malformed node (already flagged) has no tier two
            return 1.0
        dtype = getattr(torch, node.dtype, None)
        if dtype not in UNIT_ROUNDOFF:
            return 1.0
        certified = self.arithmetic.gamma(dtype, node.op_type, k)
        likely = self.arithmetic.gamma(dtype, node.op_type, k, probable=True)
        return max(1.0, certified / likely) if math.isfinite(certified) and likely > 0 else 1.0

    def report(self, described: str, samples: int) -> ExactnessReport:
        nodes = [n for n in self.ir.nodes if n.name in self.stats]
        checks = [c for n in nodes for c in (self.stats[n.name].local,
                                             self.stats[n.name].end_to_end)]
        medians = median_ratios([c.ratios for c in checks])
        entries = tuple(ExactnessEntry.from_stats(n, self.stats[n.name], *medians[2 * i:2 * i + 2],
                                                  self._source_text(n),
                                                  BOUND_RULES[n.op_type].magnitude is None,
                                                  self._tier_two(n))
                        for i, n in enumerate(nodes))
        outputs = tuple(OutputEntry.from_stats(name, stats)
                        for name, stats in zip(self.ir.outputs, self.outputs))
        return ExactnessReport(
            entries, outputs, self.arithmetic, described, samples, self.local, self.end_to_end,
            self.traced_differs,
            MappingProxyType({k: s.freeze() for k, s in self.samplers.items()}),
            MappingProxyType({k: s.freeze() for k, s in self.output_samplers.items()}),
            self.runtime, MappingProxyType(dict(self.cut_reasons)))
