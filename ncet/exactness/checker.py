"""The walk of `check_exactness`: the traced graph run chunk by chunk, every node's PyTorch
value held to its certified bound node-locally and end to end, every value freed after its
last use."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx
from torch import nn

from ..frontend.cut import cut_nodes
from ..frontend.trace import Traced
from ..frontend.walker import Walker, call_node
from ..ir import GraphIR, IRNode, declared_cut
from .arithmetic import ArithmeticModel
from .flush_bounds import input_radius
from .node_checks import NodeChecks
from .structure import check_inputs_and_outputs, replanned_cut, structural_faults

_F64 = torch.float64

EAGER_SEED = 0x6E636574  # "ncet"
"""The global RNG seed of the eager runs (plus the chunk's first sample), inside a fork of the
caller's RNG state, which stays as it was."""


class Checker(NodeChecks):
    """Walks the traced graph chunk by chunk, freeing every value after its last use."""

    def __init__(self, model: nn.Module, traced: Traced, ir: GraphIR,
                 arithmetic: ArithmeticModel, *, local: bool, end_to_end: bool):
        super().__init__(ir, arithmetic, local=local, end_to_end=end_to_end)
        self.model, self.traced, self.root = model, traced, traced.root
        self.walker = Walker(traced.graph)  # node order and last uses, once per check
        self.nodes = self.walker.nodes
        self.steps = len(self.nodes)  # per chunk, in progress reports
        self.modules = {n: traced.module(n) for n in self.nodes
                        if n.op == "call_module"}
        self.fx_by_name = {n.name: n for n in self.nodes}
        # a GraphIR cut short (convert's stop_at / cut_trailing) declares the nodes it leaves
        # out; they are run, so that the traced outputs are still held to the eager model's,
        # but not checked. Any other node the GraphIR lacks is a mismatch.
        self.cut_reasons = declared_cut(ir)
        self.cut = frozenset(self.cut_reasons)
        missing = [n.name for n in self.nodes if n.op.startswith("call_")
                   and n.name not in self.ir_nodes and n.name not in self.cut]
        if missing:
            raise ValueError(f"the GraphIR does not match the model: no IR node for FX node(s) "
                             f"{', '.join(missing[:5])}" + (
                                 "" if self.cut else " (a GraphIR converted with stop_at= or "
                                 "cut_trailing= declares the nodes it leaves out in its "
                                 "Output node's cut attribute; this one declares none)"))
        inferred = set(cut_nodes(traced.graph, set(self.ir_nodes), ir.outputs))
        wrong = [name for name in self.cut_reasons if name not in inferred]
        if wrong:
            raise ValueError(f"the GraphIR does not match the model: its Output node declares "
                             f"that it leaves out {', '.join(map(repr, wrong[:5]))}, but the "
                             "model's traced graph has no such operation, or the GraphIR has "
                             "a node for it, or its outputs need it")
        # the cut planned again from the arguments that made it: its nodes and outputs must
        # be the GraphIR's, and its reasons are the ones reported (the file's are not read)
        planned = replanned_cut(ir, traced.graph, traced.call_modules())
        # cut short: a plan is declared (its cut may leave nothing out, e.g. stop_at= the
        # last operation of a model that returns more); its outputs are the plan's
        self.cut_short = planned is not None
        self.cut_reasons = planned or {}
        returned = list(ir.outputs) if self.cut_short else None
        check_inputs_and_outputs(ir, traced.graph, returned)
        for name, fault in structural_faults(ir, traced.graph, returned).items():
            self.flag(name, fault)
        self.kept: dict[str, tuple] = {}  # the cut outputs' values, kept to the output node
        for name in ir.outputs if self.cut_short else ():
            if name in self.stats:
                self.stats[name].note(
                    "output at a cut: " + ("the model goes on with " + ", ".join(
                        sorted(self.cut)) + ", which the GraphIR leaves out" if self.cut
                        else "the cut leaves out no operation of the model, but the GraphIR "
                        "returns this node's value alone")
                    + "; compared with the model's own value here (its traced graph, whose "
                    "outputs are the eager model's bit for bit)")

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
                    radius[node.name] = input_radius(x, self.arithmetic)  # §2.2
                    if node.name in self.samplers:
                        self.samplers[node.name].take(start, count, x, x)
                    if self.cut_short and node.name in self.ir.outputs:  # cut to an input
                        self.kept[node.name] = (x, ref[node.name], radius[node.name])
                elif node.op == "get_attr":
                    fx_env[node] = self.traced.attribute(str(node.target))
                elif node.op == "output":
                    self._check_outputs(chunk, fx_env, ref, radius, start)
                elif node.name in self.cut:  # run for the outputs' sake, not checked
                    fx_env[node] = self._call(node, fx_env)
                else:
                    fx_env[node] = self._call(node, fx_env)
                    ir_node = self.ir_nodes[node.name]
                    self._check_node(ir_node, fx_env[node],
                                     [fx_env.get(self.fx_by_name.get(n)) for n in ir_node.inputs],
                                     ref, radius)
                    if node.name in self.samplers:
                        self.samplers[node.name].take(start, count, fx_env[node],
                                                      ref.get(node.name))
                    if self.cut_short and node.name in self.ir.outputs:
                        self.kept[node.name] = (fx_env[node], ref.get(node.name),
                                                radius.get(node.name))
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
        if self.cut_short:
            self._check_cut_outputs(eager, fx_env, start, chunk[0].shape[0])
            return
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

    def _check_cut_outputs(self, eager: list, fx_env, start: int, count: int) -> None:
        """The outputs of a GraphIR cut short: the traced graph's own outputs must be the
        eager model's bit for bit (else its values at the cut are not the model's), and the
        GraphIR's outputs are held to their bound against the traced values at the cut."""
        (output,) = [n for n in self.nodes if n.op == "output"]
        returned: list[torch.fx.Node] = []
        torch.fx.node.map_arg(output.args[0], returned.append)
        same = len(eager) == len(returned) and all(
            isinstance(e, torch.Tensor) and fx_env[n].shape == e.shape
            and torch.equal(fx_env[n], e) for n, e in zip(returned, eager))
        for i, name in enumerate(self.ir.outputs):
            if not same:
                self.traced_differs = True
                self.outputs[i].note("the model's eager output is not bit-identical to its "
                                     "traced graph's on the same inputs, so the traced value "
                                     "at the cut is not vouched for")
            value, ref, radius = self.kept.get(name, (None, None, None))
            if value is None:
                self.outputs[i].unchecked = True
                continue
            self.output_samplers[name].take(start, count, value, ref)
            if ref is None or radius is None:
                if self.end_to_end:
                    self.outputs[i].note("no reference value (an upstream node failed): not "
                                         "checked end to end")
                    self.outputs[i].unchecked = True
                continue
            self.outputs[i].end_to_end.update(value.to(_F64), ref, radius, value.dtype,
                                              scratch=self.scratch(ref.shape))
        self.kept.clear()

    # --- result ---------------------------------------------------------------------
    def _source_text(self, node: IRNode) -> str:
        """The text of the node's source line, from this check's trace when it recorded the
        same file:line as the IR (an IR loaded from a file keeps only file:line)."""
        fx_node = self.fx_by_name.get(node.name)
        meta = fx_node.meta if fx_node is not None else {}
        same = node.source.location and meta.get("location") == node.source.location
        return meta.get("source_text", "") if same else ""

