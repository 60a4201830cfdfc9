"""The conversion walk: every FX node executed at two batch sizes, projected onto its op_type."""

from __future__ import annotations

import contextlib
import gc
import warnings

import torch
import torch.fx
from torch import nn

from ..errors import ConversionError, Rejection, TraceError, UnsupportedOperatorError, make_error
from ..ir import OP_SCHEMAS, GraphIR, IRNode, Source
from .constants import ConstantLifter
from .context import Mapped, MissingShape, NodeContext, bind
from .cut import Cut, plan_cut, softmax_on_batch_axis
from .hooks import weight_hook_rejection
from .locations import is_library_function
from .report import ConversionReport, Row
from .resolution import resolve
from .rewrite_advice import advise_rewrite
from .rewrites import (
    RULE_CLAMP_RELU,
    RULE_INPLACE,
    RULE_STATIC_BATCH,
    Refusal,
    Rewritten,
    check_rewrite,
    rewrite_graph,
)
from .shape_propagation import NodeRecord, ShapePropagation
from .trace import Traced, submodule, trace_model
from .trace_cache import record_trace
from .walker import Walker

_RULE_CODES = {RULE_INPLACE: "inplace", RULE_STATIC_BATCH: "dynamic-argument",
               RULE_CLAMP_RELU: "unsupported-function"}
"""The code a node gets when its rule does not hold for it: that of the spelling as written
(a clamp method's is "unsupported-method", `_rule_code`)."""


def _rule_code(done: Rewritten) -> str:
    if done.rule == RULE_CLAMP_RELU and done.spelling.startswith("Tensor."):
        return "unsupported-method"
    return _RULE_CODES[done.rule]


def canonicalize(model: nn.Module, input_shapes: tuple[tuple[int, ...], ...],
                 dtype: torch.dtype, *, first_error_only: bool,
                 rewrite: bool = False, stop_at: str | None = None,
                 cut_trailing: bool = False) -> ConversionReport:
    """Trace `model` and map every node; stop at the first problem if `first_error_only`.
    With `rewrite`, the rules of rewrites.py first rewrite NCET's copy of the graph; with
    `stop_at` or `cut_trailing`, the nodes cut.py leaves out get rows of status "cut".

    Raises:
        TraceError: The model cannot be traced, or `stop_at` names no operation of it
            (always raised; `diagnose` catches it).
        ConversionError: With `first_error_only`, the first node outside the boundary.
    """
    with cyclic_gc_paused():
        traced = trace_model(model, len(input_shapes))
        rewritten, refused = rewrite_graph(traced.graph, traced.call_modules()) if rewrite \
            else ({}, {})
        cut = plan_cut(traced.graph, traced.call_modules(), stop_at=stop_at,
                       cut_trailing=cut_trailing) if stop_at is not None or cut_trailing \
            else None
        walk = _Walk(traced, input_shapes, dtype, rewritten, refused, rewrite, cut)
        rows = []
        with torch.random.fork_rng(devices=[]), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the model's own warnings, once per batch size
            for node in Walker(traced.graph).walk(walk.records):
                row = walk.step(node)
                rows.append(row)
                if first_error_only and row.error is not None:
                    raise row.error
        graph = None if any(r.error is not None for r in rows) else walk.graph()
        if graph is not None:
            record_trace(graph, model, traced)
    return ConversionReport(tuple(rows), graph)


@contextlib.contextmanager
def cyclic_gc_paused():
    """Pause Python's cyclic garbage collector (reference counting still frees everything
    that is not in a cycle). Tracing and the walk (and `to_onnx`'s build) allocate a few
    dozen objects per node and keep them alive, so the collector's passes find nothing to
    free yet cost ~15% of a large conversion. The previous state is restored, also on
    errors."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def trace_failure_report(error: TraceError) -> ConversionReport:
    """A report for a model that could not be traced at all."""
    source = Source(error.node, "trace", "", "", "", error.location)  # no FX node to name
    row = Row(source, None, "unsupported" if error.code != "input-count" else "boundary",
              error.code, str(error), error.hint, None, error, error.source_text)
    return ConversionReport((row,), None)


class _Walk:
    """State of one conversion: a record per live node, lifted constants, IR nodes."""

    def __init__(self, traced: Traced, input_shapes, dtype: torch.dtype,
                 rewritten: dict[str, Rewritten], refused: dict[str, Refusal], rewrite: bool,
                 cut: Cut | None = None):
        self.traced = traced
        self.cut = cut
        self._ranks: dict[str, int] = {}  # per-sample ranks the cut's softmax dims need
        self._kept: dict[torch.fx.Node, NodeRecord] = {}  # the records of the cut's outputs
        self._rank_of = {} if cut is None else {
            name: _kept_source(traced.graph, cut, name) for name in cut.softmax_dims}
        self.rewritten, self.refused, self.rewrite = rewritten, refused, rewrite
        self._positions: dict[torch.fx.Node, int] | None = None
        self.root = traced.root
        self.input_shapes = [tuple(int(d) for d in s) for s in input_shapes]
        self.shapes = ShapePropagation(self.input_shapes, dtype)
        self.records: dict[torch.fx.Node, NodeRecord] = {}  # the walker drops the dead ones
        self.lifter = ConstantLifter(self.records)
        self.ir_nodes: list[IRNode] = []
        self.placeholder_index = 0
        self._handlers = {op: getattr(self, f"_{op}") for op in (
            "placeholder", "get_attr", "call_module", "call_function", "call_method", "output")}

    # --- one node -------------------------------------------------------------------
    def step(self, node: torch.fx.Node) -> Row:
        """Record and map one node (in graph order); its report row."""
        if self.cut is not None and node.name in self.cut.nodes:
            return self._cut_row(node)
        row = self._handlers[node.op](node)
        if self.cut is not None and node in self.cut.outputs and node in self.records:
            self._kept[node] = self.records[node]  # the walker drops it at its last use
        if node.name in self._rank_of.values() and row.shape is not None:
            self._ranks[node.name] = len(row.shape)
        return row

    def _cut_row(self, node: torch.fx.Node) -> Row:
        """The row of a node the cut leaves out (not run, not mapped), or the error of a
        softmax whose dim is the batch axis (not per-sample, so not a trailing activation
        one may leave off)."""
        if node.op == "get_attr":
            path = self.traced.user_path(str(node.target))
            context = dict(spelling=path, module_path=path)
        else:
            resolved = resolve(node, self.traced)
            context = dict(spelling=resolved.display, module_path=resolved.module_path,
                           module_type=resolved.module_type)
        assert self.cut is not None
        if node.name in self.cut.softmax_dims:
            dim = self.cut.softmax_dims[node.name]
            rank = self._ranks.get(self._rank_of[node.name])
            if rank is not None and softmax_on_batch_axis(dim, rank):
                return self._row(node, "boundary", error=self._error(
                    node, context["spelling"], Rejection(
                        "batch-axis", f"{context['spelling']} with dim={dim!r} runs over the "
                                      "batch axis here, so it is not a per-sample activation "
                                      "cut_trailing may leave off",
                        hint="give it the class axis, e.g. dim=-1 or dim=1")), **context)
        location = "" if _location(node) or node.op != "call_module" else "model" \
            if self.traced.wrapped_leaf else module_expression(self.traced.root, str(node.target))
        return self._row(node, "cut", message=f"cut: {self.cut.nodes[node.name]}; not part "
                                              "of the GraphIR", location=location, **context)

    def _row(self, node, status, *, spelling="", module_path="", module_type="", op_type=None,
             error: ConversionError | None = None, message="", shape=None,
             location: str = "") -> Row:
        source = Source(node.name, node.op, spelling, module_path, module_type,
                        location or _location(node))
        done = self.rewritten.get(node.name)
        return Row(source, op_type, status, error.code if error else None,
                   str(error) if error else message, error.hint if error else "", shape, error,
                   _source_text(node), "" if done is None else
                   f"{done.rule}: {done.spelling}, safe because {done.why}")

    def _placeholder(self, node: torch.fx.Node) -> Row:
        index = self.placeholder_index
        self.placeholder_index += 1
        record = self.records[node] = self.shapes.input(index)
        self.ir_nodes.append(IRNode(node.name, "Input", (), {"index": index}, record.shape,
                                    _dtype_name(record.dtype),
                                    Source(node.name, node.op, node.name)))
        return self._row(node, "mapped", spelling=str(node.target), op_type="Input",
                         shape=record.shape)

    def _get_attr(self, node: torch.fx.Node) -> Row:
        value = self.traced.attribute(str(node.target))
        path = self.traced.user_path(str(node.target))
        if isinstance(value, torch.Tensor):
            name = self.lifter.copy(value, path)
            value = self.lifter.tensor(name)
            record = NodeRecord("const", (value, value), True, tuple(value.shape), value.dtype,
                                constant=name)
        else:
            record = NodeRecord("const", (value, value))
        self.records[node] = record
        owner, _, name = str(node.target).rpartition(".")
        module = self.traced.attribute(owner) if owner else self.root
        rejection = weight_hook_rejection(module, name) if isinstance(module, nn.Module) \
            else None
        if rejection is not None:  # read by a module FX traced through, e.g. F.linear(x, w)
            return self._row(node, "boundary", spelling=path, module_path=path,
                             error=self._error(node, path, rejection))
        return self._row(node, "lifted", spelling=path, module_path=path, shape=record.shape)

    def _output(self, node: torch.fx.Node) -> Row:
        result = node.args[0]
        outputs = list(result) if isinstance(result, (tuple, list)) else [result]
        # forward()'s own results must be flat under a cut too: the cut's outputs are
        # flattened, and check_exactness compares forward()'s results one by one
        bad = [o for o in outputs if not isinstance(o, torch.fx.Node)]
        if self.cut is not None:
            outputs = list(self.cut.outputs)
            result = tuple(outputs) if self.cut.as_tuple else outputs[0]
        records = {**self._kept, **self.records}
        bad += [o for o in outputs if isinstance(o, torch.fx.Node)
                and not (records[o].kind == "graph" and records[o].is_tensor)]
        if bad:
            what = ", ".join(o.name if isinstance(o, torch.fx.Node) else repr(o) for o in bad)
            error = self._error(node, "output", Rejection(
                "output-structure", f"forward() returns {what}, which is not a tensor computed "
                                    "from the inputs (or returns a nested structure)",
                hint="return a tensor or a flat tuple of tensors computed from the inputs"))
            return self._row(node, "boundary", spelling="output", error=error)
        attrs = {"tuple": isinstance(result, (tuple, list))}
        if self.cut is not None:  # declared, even when it leaves nothing out, for check_exactness
            attrs["cut"] = [[name, why] for name, why in self.cut.nodes.items()]
            # what made it: check_exactness plans the cut again from these on its trace
            if self.cut.stop_at is not None:
                attrs["stop_at"] = self.cut.stop_at
            attrs["cut_trailing"] = self.cut.cut_trailing
        self.ir_nodes.append(IRNode(node.name, "Output", tuple(o.name for o in outputs),
                                    attrs, None, "", Source(node.name, node.op, "output")))
        return self._row(node, "mapped", spelling="output", op_type="Output")

    def _call_module(self, node):
        return self._call(node)

    def _call_function(self, node):
        return self._call(node)

    def _call_method(self, node):
        return self._call(node)

    # --- call nodes -----------------------------------------------------------------
    def _call(self, node: torch.fx.Node) -> Row:
        resolved = resolve(node, self.traced)
        spelling, display, rejection = resolved.spelling, resolved.display, resolved.rejection
        value = self.records[node] = self.shapes.record(
            node, self.records, resolved.module,
            trusted=spelling is not None and rejection is None,
            run=rejection is None or node.op != "call_function"
            or is_library_function(node.target))
        context = dict(spelling=display, module_path=resolved.module_path,
                       module_type=resolved.module_type)
        mapped = None
        try:
            if rejection is not None:
                raise rejection
            if value.kind == "const" and not self._has_graph_input(node):
                raise Rejection("constant-computation",
                                "the operation computes on fixed tensors only; canonicalization "
                                "never does arithmetic on model constants",
                                hint="precompute the value and register it as a buffer")
            args = bind(spelling, node.args, dict(node.kwargs))
            mapped = spelling.handler(NodeContext(node, spelling, args, self.records,
                                                  self.lifter, resolved.module,
                                                  resolved.module_path))
        except Rejection as reason:  # the handler's own reason, also after a rewrite
            done = self.rewritten.get(node.name)
            if done is not None and rejection is None:
                reason = Rejection(reason.code, f"{reason.reason} (for {done.spelling}, which "
                                                f"rewrite=True made {display})", reason.hint)
            error = self._error(node, display, reason)
            status = "unsupported" if isinstance(error, UnsupportedOperatorError) else "boundary"
            return self._row(node, status, error=error, **context)
        except MissingShape:
            pass
        done = self.rewritten.get(node.name)
        problem = value.failure
        if done is not None and problem is None and not value.failed:
            why = check_rewrite(node, done.rule, self._values, None if node.op != "call_module"
                                else submodule(self.root, node.target))
            problem = Rejection(_rule_code(done), why) if why else None
        if done is not None and problem is not None:  # the rule does not hold for this node
            problem = _unapplied(done, problem)
        if problem is not None:
            error = self._error(node, display, problem)
            status = "unsupported" if isinstance(error, UnsupportedOperatorError) else "boundary"
            return self._row(node, status, error=error, **context)
        if value.failed:
            return self._row(node, "skipped", message="not checked: a node it depends on failed "
                                                      "or was not run",
                             **context)
        assert mapped is not None, f"handler for {display} needed a shape it did not get"
        if not value.is_tensor or not value.dtype.is_floating_point:
            what = f"dtype {value.dtype}" if value.is_tensor else "no tensor"
            return self._row(node, "boundary", error=self._error(node, display, Rejection(
                "dtype", f"the result has {what}, not a floating-point tensor")),
                **context)
        self.ir_nodes.append(self._ir_node(node, mapped, display, resolved.module_path,
                                           resolved.module_type))
        return self._row(node, "mapped", op_type=mapped.op_type, shape=value.shape, **context)

    def _values(self, node: torch.fx.Node) -> tuple:
        return self.records[node].values

    def _order(self) -> dict[torch.fx.Node, int]:
        if self._positions is None:
            self._positions = {n: i for i, n in enumerate(self.traced.graph.nodes)}
        return self._positions

    def _has_graph_input(self, node: torch.fx.Node) -> bool:
        return any(self.records[n].kind != "const" for n in node.all_input_nodes)

    # --- results --------------------------------------------------------------------
    def _error(self, node: torch.fx.Node, display: str, reason: Rejection) -> ConversionError:
        reason = advise_rewrite(node, reason, self.rewrite, self.refused,
                                self.traced.call_modules, self._order)
        location = _location(node)
        if not location and node.op == "call_module":  # a child of nn.Sequential, say
            location = "model" if self.traced.wrapped_leaf else \
                module_expression(self.traced.root, str(node.target))
        return make_error(reason.code, reason.reason, node=node.name, fx_op=node.op,
                          spelling=display, hint=reason.hint, location=location,
                          source_text=_source_text(node))

    def _ir_node(self, node, mapped: Mapped, display, module_path, module_type) -> IRNode:
        value = self.records[node]
        source = Source(node.name, node.op, display, module_path, module_type,
                        _location(node))
        # IRNode itself checks the attributes against OP_SCHEMAS
        return IRNode(node.name, mapped.op_type, tuple(n.name for n in mapped.inputs),
                      mapped.attrs, value.shape, _dtype_name(value.dtype), source)

    def graph(self) -> GraphIR:
        """The GraphIR of a walk in which every node mapped."""
        used: dict[str, torch.Tensor] = {}
        for ir_node in self.ir_nodes:
            _, schema = OP_SCHEMAS[ir_node.op_type]
            for attr, kind in schema.items():
                name = ir_node.attrs[attr]
                if kind.startswith("const") and name is not None and name not in used:
                    used[name] = self.lifter.tensor(name)
        return GraphIR(tuple(self.ir_nodes), used)


def _kept_source(graph: torch.fx.Graph, cut: Cut, name: str) -> str:
    """The node a cut activation's input comes from that the GraphIR keeps (the cut's
    activations may be chained): its per-sample rank is the activation's."""
    node = next(n for n in graph.nodes if n.name == name)
    while node.name in cut.nodes:
        node = node.args[0]
    return node.name


def _unapplied(done: Rewritten, reason: Rejection) -> Rejection:
    """The rejection of a rewritten node whose rule turned out not to hold for it, in terms
    of the spelling as written."""
    return Rejection(_rule_code(done), f"rewrite=True cannot apply {done.rule} to "
                     f"{done.spelling} here: {reason.reason}",
                     hint="write it as the hint for the spelling as written says "
                          "(rewrite=False)" if done.rule == RULE_CLAMP_RELU else
                     "write it out of place or with a static shape, as the hint for the "
                     "spelling as written says (rewrite=False)")


def module_expression(root: nn.Module, target: str) -> str:
    """The submodule at `target` as Python reaches it from the model, walking the module
    tree: `model.features[3]`, `model[1][0]` (nn.Sequential and nn.ModuleList children by
    position), `model.blocks["act-1"]` (a key that is not an identifier)."""
    text, module = "model", root
    for name in target.split(".") if target else ():
        children = getattr(module, "_modules", {})
        if isinstance(module, (nn.Sequential, nn.ModuleList)) and name in children:
            text += f"[{list(children).index(name)}]"
        elif name.isidentifier() and not isinstance(module, nn.ModuleDict):
            text += f".{name}"
        else:
            text += f"[{name!r}]"
        module = children.get(name)
        if module is None:
            break
    return text


def _location(node: torch.fx.Node) -> str:
    """file:line of the model code that created the node (placeholders and the output are
    created outside forward()'s body, so they have none)."""
    return "" if node.op in ("placeholder", "output") else node.meta.get("location", "")


def _source_text(node: torch.fx.Node) -> str:
    """The text of the line `_location` names, "" when there is none or Python cannot read it."""
    return "" if node.op in ("placeholder", "output") else node.meta.get("source_text", "")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
