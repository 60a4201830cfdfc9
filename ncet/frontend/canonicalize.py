"""The conversion walk: every FX node executed at two batch sizes, projected onto its op_type."""

from __future__ import annotations

import contextlib
import functools
import gc
import time
import warnings
from typing import Any

import torch
import torch.fx
from torch import nn

from ..errors import ConversionError, Rejection, TraceError, UnsupportedOperatorError, make_error
from ..ir import OP_SCHEMAS, GraphIR, IRNode, Source
from .constants import ConstantLifter
from .context import Mapped, MissingShape, NodeContext, Value, bind
from .hooks import weight_hook_rejection
from .report import ConversionReport, Row
from .shape_propagation import ShapePropagation, follows_batch
from .spellings import (
    FUNCTION_SPELLINGS,
    INPLACE_FUNCTIONS,
    KEYWORD_ALIASES,
    METHOD_SPELLINGS,
    MODULE_SPELLINGS,
    REJECTED_FUNCTIONS,
    UNSUPPORTED_HINTS,
)
from .trace import BATCH_SIZES, Traced, is_library_function, record_trace, trace_model

_UNLISTED_HINT = "see docs/support-boundary.md for the spellings NCET maps"

STAGES = ("trace", "shape propagation", "canonicalization", "boundary checks", "lifting")
"""The stages of a conversion whose seconds `canonicalize(..., stages=...)` reports."""


def canonicalize(model: nn.Module, input_shapes: tuple[tuple[int, ...], ...],
                 dtype: torch.dtype, *, first_error_only: bool,
                 stages: dict[str, float] | None = None) -> ConversionReport:
    """Trace `model` and map every node; stop at the first problem if `first_error_only`.

    Args:
        stages: When given, filled with the seconds spent in each of `STAGES` (for the
            benchmarks; the stages add up to the whole call).

    Raises:
        TraceError: The model cannot be traced (always raised; `diagnose` catches it).
        ConversionError: With `first_error_only`, the first node outside the boundary.
    """
    clock = StageClock()
    with _cyclic_gc_paused():
        traced = trace_model(model, len(input_shapes))
        clock.lap("trace")
        walk = _Walk(traced, input_shapes, dtype, clock)
        rows = []
        with torch.random.fork_rng(devices=[]), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the model's own warnings, once per batch size
            for node in traced.graph.nodes:
                row = walk.step(node)
                rows.append(row)
                if first_error_only and row.error is not None:
                    raise row.error
        problems = any(r.error is not None for r in rows)
        graph = None if problems else walk.graph()
        clock.lap("lifting")
        if graph is not None:
            record_trace(graph, model, traced)
    if stages is not None:
        stages.update(clock.seconds)
    return ConversionReport(tuple(rows), graph)


@contextlib.contextmanager
def _cyclic_gc_paused():
    """Pause Python's cyclic garbage collector (reference counting still frees everything
    that is not in a cycle). Tracing and the walk allocate a few dozen objects per FX node
    and keep them alive, so the collector's passes find nothing to free yet cost ~15% of a
    large conversion. The previous state is restored, also on errors."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class StageClock:
    """Charges the time since the previous lap to a stage (a lap costs well under 1 us)."""

    __slots__ = ("seconds", "_last")

    def __init__(self):
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        """Charge the time since the previous lap to `stage`."""
        now = time.perf_counter()
        self.seconds[stage] += now - self._last
        self._last = now


def trace_failure_report(error: TraceError) -> ConversionReport:
    """A report for a model that could not be traced at all."""
    row = Row(error.node, "trace", "", "", "", None, "unsupported" if error.code != "input-count"
              else "boundary", error.code, str(error), error.hint, None, error.location, error,
              error.source_text)
    return ConversionReport((row,), None)


def _display(target: Any) -> str:
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    if name.startswith("_VariableFunctionsClass.") or module.startswith("torch._C"):
        module, name = "torch", name.rpartition(".")[2]
    module = {"torch.nn.functional": "F", "_operator": "operator"}.get(module, module)
    return f"{module}.{name}" if module else name


class _Walk:
    """State of one conversion: values at both batch sizes, lifted constants, IR nodes."""

    def __init__(self, traced: Traced, input_shapes, dtype: torch.dtype, clock: StageClock):
        self.traced = traced
        self.clock = clock
        self.root = traced.root
        self.dtype = dtype
        self.input_shapes = [tuple(int(d) for d in s) for s in input_shapes]
        self.shapes = ShapePropagation(traced.graph, self.input_shapes, dtype)
        self.values: dict[torch.fx.Node, Value] = {}
        self.lifter = ConstantLifter()
        self.ir_nodes: list[IRNode] = []
        self.placeholder_index = 0
        self._handlers = {op: getattr(self, f"_{op}") for op in (
            "placeholder", "get_attr", "call_module", "call_function", "call_method", "output")}
        clock.lap("shape propagation")

    # --- one node -------------------------------------------------------------------
    def step(self, node: torch.fx.Node) -> Row:
        row = self._handlers[node.op](node)
        self.shapes.release(node)
        self.clock.lap("canonicalization")
        return row

    def _row(self, node, status, *, spelling="", module_path="", module_type="", op_type=None,
             error: ConversionError | None = None, message="", shape=None) -> Row:
        return Row(node.name, node.op, spelling, module_path, module_type, op_type, status,
                   error.code if error else None, str(error) if error else message,
                   error.hint if error else "", shape, _location(node), error,
                   _source_text(node))

    def _placeholder(self, node: torch.fx.Node) -> Row:
        index = self.placeholder_index
        self.placeholder_index += 1
        shape = self.input_shapes[index]
        self.shapes.set_input(node, index)
        self.clock.lap("shape propagation")
        self.values[node] = Value("graph", True, shape, self.dtype)
        self.ir_nodes.append(IRNode(node.name, "Input", (), {"index": index}, shape,
                                    _dtype_name(self.dtype), Source(node.name, node.op, node.name)))
        return self._row(node, "mapped", spelling=str(node.target), op_type="Input", shape=shape)

    def _get_attr(self, node: torch.fx.Node) -> Row:
        value = self.traced.attribute(str(node.target))
        path = self.traced.user_path(str(node.target))
        if isinstance(value, torch.Tensor):
            self.clock.lap("canonicalization")
            value = self.lifter.copy_attr(node, value, path)
            self.clock.lap("lifting")
            self.values[node] = Value("const", True, tuple(value.shape), value.dtype)
        else:
            self.values[node] = Value("const", False)
        self.shapes.set_constant(node, value)
        owner, _, name = str(node.target).rpartition(".")
        module = self.traced.attribute(owner) if owner else self.root
        rejection = weight_hook_rejection(module, name) if isinstance(module, nn.Module) \
            else None
        if rejection is not None:  # read by a module FX traced through, e.g. F.linear(x, w)
            return self._row(node, "boundary", spelling=path, module_path=path,
                             error=self._error(node, path, rejection))
        return self._row(node, "lifted", spelling=path, module_path=path,
                         shape=self.values[node].shape)

    def _output(self, node: torch.fx.Node) -> Row:
        result = node.args[0]
        outputs = list(result) if isinstance(result, (tuple, list)) else [result]
        bad = [o for o in outputs if not (isinstance(o, torch.fx.Node)
                                          and self.values[o].kind == "graph"
                                          and self.values[o].is_tensor)]
        if bad:
            what = ", ".join(o.name if isinstance(o, torch.fx.Node) else repr(o) for o in bad)
            error = self._error(node, "output", Rejection(
                "output-structure", f"forward() returns {what}, which is not a tensor computed "
                                    "from the inputs (or returns a nested structure)",
                hint="return a tensor or a flat tuple of tensors computed from the inputs"))
            return self._row(node, "boundary", spelling="output", error=error)
        self.ir_nodes.append(IRNode(node.name, "Output", tuple(o.name for o in outputs),
                                    {"tuple": isinstance(result, (tuple, list))}, None, "",
                                    Source(node.name, node.op, "output")))
        return self._row(node, "mapped", spelling="output", op_type="Output")

    def _call_module(self, node):
        return self._call(node)

    def _call_function(self, node):
        return self._call(node)

    def _call_method(self, node):
        return self._call(node)

    # --- call nodes -----------------------------------------------------------------
    def _call(self, node: torch.fx.Node) -> Row:
        spelling, display, module, module_path, module_type, rejection = self._resolve(node)
        self.clock.lap("canonicalization")
        failure = self._execute(node, module, trusted=spelling is not None and rejection is None,
                                run=rejection is None or node.op != "call_function"
                                or is_library_function(node.target))
        self.clock.lap("boundary checks")  # the batch-size comparison ends _execute
        context = dict(spelling=display, module_path=module_path, module_type=module_type)
        value = self.values[node]
        mapped = None
        try:
            if rejection is not None:
                raise rejection
            if value.kind == "const" and not self._has_graph_input(node):
                raise Rejection("constant-computation",
                                "the operation computes on fixed tensors only; canonicalization "
                                "never does arithmetic on model constants",
                                hint="precompute the value and register it as a buffer")
            args = bind(spelling, node.args, self._kwargs(node))
            ctx = NodeContext(node, spelling, args, self.values, self.lifter, module, module_path,
                              self.clock)
            mapped = spelling.handler(ctx)
            self.clock.lap("canonicalization")
        except Rejection as reason:
            error = self._error(node, display, reason)
            status = "unsupported" if isinstance(error, UnsupportedOperatorError) else "boundary"
            return self._row(node, status, error=error, **context)
        except MissingShape:
            pass
        if value.failed and failure is None:
            return self._row(node, "skipped", message="not checked: a node it depends on failed "
                                                      "or was not run",
                             **context)
        if failure is not None:
            return self._row(node, "boundary", error=self._error(node, display, failure), **context)
        assert mapped is not None, f"handler for {display} needed a shape it did not get"
        if not value.is_tensor or not value.dtype.is_floating_point:
            what = f"dtype {value.dtype}" if value.is_tensor else "no tensor"
            return self._row(node, "boundary", error=self._error(node, display, Rejection(
                "dtype", f"the result has {what}, not a floating-point tensor")),
                **context)
        self.clock.lap("boundary checks")
        self.ir_nodes.append(self._ir_node(node, mapped, display, module_path, module_type))
        return self._row(node, "mapped", op_type=mapped.op_type, shape=value.shape, **context)

    def _resolve(self, node: torch.fx.Node):
        """(spelling, display name, module, module path, module type, early rejection)."""
        target = node.target
        if node.op == "call_module":
            module = self.root.get_submodule(target)
            module_path, module_type = self.traced.user_path(target), _type_name_of(type(module))
            spelling = MODULE_SPELLINGS.get(type(module))
            if spelling is None:
                return None, module_type, module, module_path, module_type, Rejection(
                    "unsupported-module", f"module type {module_type} is not in the spelling "
                                          "table", hint=_UNLISTED_HINT)
            return spelling, spelling.display, module, module_path, module_type, \
                weight_hook_rejection(module)
        stack = node.meta.get("nn_module_stack")
        if stack:  # the innermost module whose forward() made the call
            innermost = next(reversed(stack))
            module_path = self.traced.user_path(innermost)
            module_type = _type_name_of(stack[innermost][1])
        else:
            module_path = module_type = ""
        if node.op == "call_method":
            display = f"Tensor.{target}"
            if target.endswith("_") and not target.startswith("__"):
                return None, display, None, module_path, module_type, Rejection(
                    "inplace", f"in-place method {display}() is rejected",
                    hint=f"use x.{target[:-1]}(...) instead")
            spelling = METHOD_SPELLINGS.get(target)
            if spelling is None:
                return None, display, None, module_path, module_type, Rejection(
                    "unsupported-method", f"method {display} is not in the spelling table",
                    hint=UNSUPPORTED_HINTS.get(target, _UNLISTED_HINT))
            return spelling, display, None, module_path, module_type, None
        display = _display(target)
        try:
            spelling = FUNCTION_SPELLINGS.get(target)
        except TypeError:  # an unhashable callable cannot be in the table
            spelling = None
        if spelling is not None:
            return spelling, spelling.display, None, module_path, module_type, None
        if target in INPLACE_FUNCTIONS:
            return None, display, None, module_path, module_type, Rejection(
                "inplace", f"in-place function {display} is rejected",
                hint=f"use {INPLACE_FUNCTIONS[target]} instead")
        if target in REJECTED_FUNCTIONS:
            code, reason, hint = REJECTED_FUNCTIONS[target]
            return None, display, None, module_path, module_type, Rejection(code, reason, hint)
        return None, display, None, module_path, module_type, Rejection(
            "unsupported-function", f"function {display} is not in the spelling table",
            hint=UNSUPPORTED_HINTS.get(target, _UNLISTED_HINT))

    def _kwargs(self, node: torch.fx.Node) -> dict[str, Any]:
        aliases = KEYWORD_ALIASES.get(node.target) if node.op == "call_function" else None
        if not aliases:
            return dict(node.kwargs)
        return {aliases.get(k, k): v for k, v in node.kwargs.items()}

    def _has_graph_input(self, node: torch.fx.Node) -> bool:
        return any(self.values[n].kind != "const" for n in node.all_input_nodes)

    # --- shape propagation ----------------------------------------------------------
    def _execute(self, node: torch.fx.Node, module: nn.Module | None,
                 trusted: bool, run: bool) -> Rejection | None:
        """Run the node at both batch sizes and record its Value; return a failure, if any.
        A node that must not `run` is recorded as failed, so its users are not checked."""
        kind, failed = "const", not run
        for n in node.all_input_nodes:
            value = self.values[n]
            failed = failed or value.failed
            if value.kind == "graph":
                kind = "graph"
        if failed:
            self.values[node] = Value(kind, True, failed=True)
            return None
        try:  # the model's own warnings are silenced for the whole walk (see canonicalize)
            results = self.shapes.run(node, module, trusted)
        except Exception as exc:  # any failure of the user's code on the example inputs
            self.values[node] = Value(kind, True, failed=True)
            return Rejection("shape-propagation",
                             f"running the traced graph on example inputs failed here: "
                             f"{type(exc).__name__}: {_first_line(exc)}",
                             hint="check the per-sample input shapes given to convert()")
        self.clock.lap("shape propagation")
        first = results[0]
        if not isinstance(first, torch.Tensor):
            self.values[node] = Value(kind, False)
            return None
        if kind == "const":
            self.values[node] = Value(kind, True, tuple(first.shape), first.dtype)
            return None
        shapes = [tuple(r.shape) if isinstance(r, torch.Tensor) else None for r in results]
        if not follows_batch(shapes):
            self.values[node] = Value(kind, True, None, first.dtype, failed=True)
            return Rejection("batch-not-preserved",
                             f"the output shape {list(shapes[0])} at batch size {BATCH_SIZES[0]} "
                             f"and {list(shapes[1])} at batch size {BATCH_SIZES[1]}: the leading "
                             "size does not follow the batch size, or the per-sample shape "
                             "changes with it",
                             hint="keep the batch axis first and whole, e.g. "
                                  "x.flatten(1) instead of x.view(-1)")
        self.values[node] = Value(kind, True, shapes[0][1:], first.dtype)
        return None

    # --- results --------------------------------------------------------------------
    def _error(self, node: torch.fx.Node, display: str, reason: Rejection) -> ConversionError:
        return make_error(reason.code, reason.reason, node=node.name, fx_op=node.op,
                          spelling=display, hint=reason.hint, location=_location(node),
                          source_text=_source_text(node))

    def _ir_node(self, node, mapped: Mapped, display, module_path, module_type) -> IRNode:
        value = self.values[node]
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


@functools.lru_cache(maxsize=1024)
def _type_name_of(cls: type) -> str:
    prefix = "nn" if cls.__module__.startswith("torch.nn.") else cls.__module__
    return f"{prefix}.{cls.__qualname__}"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _location(node: torch.fx.Node) -> str:
    """file:line of the model code that created the node (placeholders and the output are
    created outside forward()'s body, so they have none)."""
    return "" if node.op in ("placeholder", "output") else node.meta.get("location", "")


def _source_text(node: torch.fx.Node) -> str:
    """The text of the line `_location` names, "" when there is none or Python cannot read it."""
    return "" if node.op in ("placeholder", "output") else node.meta.get("source_text", "")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
