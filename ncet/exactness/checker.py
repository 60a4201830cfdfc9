"""The walk of `check_exactness`: the traced graph run chunk by chunk, every node's PyTorch
value held to its certified bound node-locally and end to end, every value freed after its
last use."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

import torch
import torch.fx
from torch import nn

from ..evaluate import EVALUATORS
from ..frontend.trace import Traced
from ..frontend.walker import Walker, call_node
from ..ir import GraphIR, IRNode
from .arithmetic import UNIT_ROUNDOFF, ArithmeticModel
from .bounds import NodeBound, NodeInputs
from .fast_paths import bounds_for
from .report import (
    OUTPUT_ERROR_SAMPLE_SIZE,
    ExactnessEntry,
    ExactnessReport,
    OutputEntry,
)
from .rules import BOUND_RULES
from .scratch import AbsoluteConstants, Scratch
from .stats import ElementSampler, NodeStats, choose_indices, median_ratios
from .structure import check_inputs_and_outputs, structural_faults

_F64 = torch.float64

EAGER_SEED = 0x6E636574  # "ncet"
"""The global RNG seed of the eager runs (plus the chunk's first sample), inside a fork of the
caller's RNG state, which stays as it was."""


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


class Checker:
    """Walks the traced graph chunk by chunk, freeing every value after its last use."""

    def __init__(self, model: nn.Module, traced: Traced, ir: GraphIR,
                 arithmetic: ArithmeticModel, *, local: bool, end_to_end: bool):
        self.model, self.traced, self.root = model, traced, traced.root
        self.ir, self.arithmetic = ir, arithmetic
        self.local, self.end_to_end = local, end_to_end
        self.consts = {k: v.to(_F64) for k, v in ir.constants.items()}
        self.abs_consts = AbsoluteConstants(self.consts)
        self.walker = Walker(traced.graph)  # node order and last uses, once per check
        self.nodes = self.walker.nodes
        self.steps = len(self.nodes)  # per chunk, in progress reports
        self.modules = {n: traced.module(n) for n in self.nodes
                        if n.op == "call_module"}
        self.fx_by_name = {n.name: n for n in self.nodes}
        self.ir_nodes = {n.name: n for n in ir.nodes if n.op_type not in ("Input", "Output")}
        missing = [n.name for n in self.nodes if n.op.startswith("call_")
                   and n.name not in self.ir_nodes]
        if missing:
            raise ValueError(f"the GraphIR does not match the model: no IR node for FX node(s) "
                             f"{', '.join(missing[:5])}")
        check_inputs_and_outputs(ir, traced.graph)
        self.stats = {name: NodeStats() for name in self.ir_nodes}
        for name, fault in structural_faults(ir, traced.graph).items():
            self.stats[name].note(fault)
            self.stats[name].local.violate()  # a node the numbers cannot vouch for
        self.outputs = [NodeStats() for _ in ir.outputs]
        self.traced_differs = False
        self.samplers: dict[str, ElementSampler] = {}
        self.output_samplers: dict[str, ElementSampler] = {}
        self.scratch = Scratch()
        self.bounds = bounds_for(ir.constants, self.abs_consts, arithmetic, self.scratch)

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

    # --- one chunk ------------------------------------------------------------------
    def run(self, chunk: list[torch.Tensor], start: int = 0,
            tick: Callable[[int], None] | None = None) -> None:
        """Check one chunk of samples (those from `start` on), calling `tick(nodes done)`
        after each node."""
        fx_env: dict[torch.fx.Node, torch.Tensor] = {}
        self.as_f64: dict[str, torch.Tensor] = {}  # PyTorch's values, converted once
        ref: dict[str, torch.Tensor | None] = {}
        radius: dict[str, torch.Tensor | None] = {}
        placeholder, count = 0, chunk[0].shape[0]
        with torch.no_grad():
            for step, node in enumerate(self.walker.walk(fx_env), 1):
                if node.op == "placeholder":
                    # a fresh copy, allocated as the eager run's own copy is (a kernel's path
                    # can depend on the alignment of its input), which no node writes back
                    x = chunk[placeholder].clone()
                    placeholder += 1
                    fx_env[node] = x
                    ref[node.name] = self.as_f64[node.name] = x.to(_F64)
                    radius[node.name] = torch.zeros((), dtype=_F64)
                    if node.name in self.samplers:
                        self.samplers[node.name].take(start, count, x, x)
                elif node.op == "get_attr":
                    fx_env[node] = self.traced.attribute(str(node.target))
                elif node.op == "output":
                    self._check_outputs(chunk, fx_env, ref, radius, start)
                else:
                    fx_env[node] = self._call(node, fx_env)
                    self._check_node(self.ir_nodes[node.name], fx_env, ref, radius)
                    if node.name in self.samplers:
                        self.samplers[node.name].take(start, count, fx_env[node],
                                                      ref.get(node.name))
                for used in self.walker.released(node):  # walk() drops fx_env's own
                    ref.pop(used.name, None)
                    radius.pop(used.name, None)
                    self.as_f64.pop(used.name, None)
                if tick is not None:
                    tick(step)

    def _call(self, node: torch.fx.Node, fx_env) -> torch.Tensor:
        """PyTorch's value at `node`, from the traced graph."""
        try:
            return call_node(node, fx_env, self.modules.get(node))
        except Exception as error:
            raise ValueError(
                f"the model's traced graph fails at node {node.name!r} on these inputs "
                f"({type(error).__name__}: {str(error).strip().splitlines()[0][:200]}): does "
                "the GraphIR belong to this model as it is now (converted before "
                "model.double() or another change of dtype or shape)?") from error

    def _check_node(self, node: IRNode, fx_env, ref, radius) -> None:
        torch_value = fx_env[self.fx_by_name[node.name]]
        stats = self.stats[node.name]
        if not isinstance(torch_value, torch.Tensor):
            stats.note("PyTorch's value is not a tensor: not checked")
            stats.unchecked = True
            ref[node.name] = radius[node.name] = None
            return
        if any(name not in self.as_f64 for name in node.inputs):
            stats.note("an input has no value in PyTorch's run: not checked")
            stats.unchecked = True
            ref[node.name] = radius[node.name] = None
            return
        raw = [fx_env[self.fx_by_name[name]] for name in node.inputs]
        ins = [self.as_f64[name] for name in node.inputs]
        t = self.as_f64[node.name] = torch_value.to(_F64)
        computed = str(torch_value.dtype).removeprefix("torch.")
        if computed != node.dtype:  # bound the rounding PyTorch did, and flag the record
            stats.note(f"dtype: the IR records {node.dtype}, PyTorch computes {computed}")
            stats.local.violate()
        visit = _Visit(NodeInputs(node, raw, ins, torch_value.dtype, t.shape), stats, t)
        try:
            bound = self.bounds.local(visit.at)
        except Exception as exc:  # a faulty IR node (constants of the wrong shape, say)
            stats.note(f"the IR node's bound fails on PyTorch's inputs: "
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
            stats.note(f"node-local: the IR node fails on PyTorch's inputs: {exc}")
            stats.local.violate()
            return None
        if expected.shape != t.shape:
            stats.note(f"node-local: shape {list(expected.shape[1:])} from the IR, "
                       f"{list(t.shape[1:])} from PyTorch")
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

    def _check_outputs(self, chunk, fx_env, ref, radius, start: int) -> None:
        grad = torch.is_grad_enabled()
        try:
            with torch.random.fork_rng(devices=[]):  # copies: a model may write into its input
                # a seed of its own, not the state the trace was taken in: a forward() that
                # draws random numbers (frozen into the trace) differs from its trace
                torch.manual_seed(EAGER_SEED + start)
                eager = self.model(*(x.clone() for x in chunk))
        except Exception as error:
            raise ValueError(f"the model's own forward() fails on these inputs, though its "
                             f"traced graph runs ({type(error).__name__}: "
                             f"{str(error).strip().splitlines()[0][:200]})") from error
        finally:
            torch.set_grad_enabled(grad)  # forward() may switch it (torch.set_grad_enabled)
        eager = list(eager) if isinstance(eager, (tuple, list)) else [eager]
        eager += [None] * (len(self.ir.outputs) - len(eager))  # fewer than the trace returns
        for i, name in enumerate(self.ir.outputs):
            if name not in self.fx_by_name:  # an IR node the trace lacks: flagged at the node
                self.outputs[i].unchecked = True
                continue
            traced = fx_env[self.fx_by_name[name]]
            if not (isinstance(eager[i], torch.Tensor) and traced.shape == eager[i].shape
                    and torch.equal(traced, eager[i])):
                # the same kernels on the same inputs: anything but bit-identical outputs
                # means the trace is not what the model runs
                self.traced_differs = True
                self.outputs[i].note("the model's eager output is not bit-identical to its "
                                     "traced graph's on the same inputs")
                if not (isinstance(eager[i], torch.Tensor) and traced.shape == eager[i].shape):
                    self.outputs[i].end_to_end.violate()  # nothing to compare elementwise
                    continue
            self.output_samplers[name].take(start, chunk[0].shape[0], eager[i], ref.get(name))
            if ref.get(name) is None or radius.get(name) is None:
                if self.end_to_end:  # without it, the bit-for-bit comparison is the check
                    self.outputs[i].note("no reference value (an upstream node failed): not "
                                         "checked end to end")
                    self.outputs[i].unchecked = True
                continue
            if ref[name].shape != eager[i].shape:
                self.outputs[i].end_to_end.violate()
                continue
            self.outputs[i].end_to_end.update(eager[i].to(_F64), ref[name], radius[name],
                                              eager[i].dtype, scratch=self.scratch(
                                                  ref[name].shape))

    # --- result ---------------------------------------------------------------------
    def _source_text(self, node: IRNode) -> str:
        """The text of the node's source line, from this check's trace when it recorded the
        same file:line as the IR (an IR loaded from a file keeps only file:line)."""
        fx_node = self.fx_by_name.get(node.name)
        meta = fx_node.meta if fx_node is not None else {}
        same = node.source.location and meta.get("location") == node.source.location
        return meta.get("source_text", "") if same else ""

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
            MappingProxyType({k: s.freeze() for k, s in self.output_samplers.items()}))
