"""Tracing: torch.fx symbolic tracing with source locations (frontend/locations.py), forward()'s
defaulted arguments bound, and the batched example inputs."""

from __future__ import annotations

import inspect
import linecache
import operator
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
import torch.fx
from torch import nn

from ..errors import TraceError
from .locations import failure_location, located, source_text, user_file
from .rewrites import PRIVATE_MODULE
from .trace_patches import ForeignTrace, confined_patches

BATCH_SIZES = (2, 3)
"""The two temporary batch sizes: a node whose leading size does not follow them is rejected."""

_ROOT_ATTR = "root"


_TRACE_CODE = torch.fx.Tracer.trace.__code__


class _LocatingTracer(torch.fx.Tracer):
    """A Tracer that records where the user's code created each node in
    `node.meta["location"]` (`file.py:line`, or `In [n], line k` in a notebook cell),
    and the text of that line, when Python's linecache has it, in `node.meta["source_text"]`.

    Walking a few frames is much cheaper than FX's full `record_stack_traces`. Buffers are
    proxied like parameters, so code such as `self.buf.add_(1)` is recorded (and rejected),
    not run on the model's own buffer while tracing.

    Hooks are not part of the trace: a module FX traces through runs its forward() without
    its forward hooks and pre-hooks (a leaf module's call is recorded without them anyway),
    so a hook that logs or stores activations never sees a Proxy, and one that changes a
    module's output shows in `check_exactness`, which calls the model itself.
    """

    proxy_buffer_attributes = True

    def call_module(self, m, forward, args, kwargs):
        """FX's `call_module`, with a traced-through module's forward() run without its
        hooks, and the module's path recorded in `called`."""
        self.called.add(self.path_of_module(m))
        return super().call_module(m, m.forward, args, kwargs)

    def __init__(self):
        super().__init__()
        # code object -> its place in the user's code (see `locations.user_file`), or None for torch
        # and NCET machinery; per tracer, so that no code object outlives the trace
        self._user_files: dict[types.CodeType, str | None] = {}
        self.stowed: dict[str, torch.Tensor] = {}
        self.called: set[str] = set()  # the paths of the modules forward() called

    def create_arg(self, a):
        """A tensor made inside forward() (e.g. `torch.ones(4)`) becomes a get_attr of a
        name in `self.stowed`; FX itself would `setattr` it onto the user's model."""
        if isinstance(a, torch.Tensor) and not isinstance(a, nn.Parameter) \
                and a not in self.tensor_attrs \
                and not any(a is b for b in self.root.buffers()):
            i = len(self.stowed)
            while hasattr(self.root, f"_tensor_constant{i}"):
                i += 1
            name = self.tensor_attrs[a] = f"_tensor_constant{i}"
            self.stowed[name] = a
            return self.create_node("get_attr", name, (), {})
        return super().create_arg(a)

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        files = self._user_files
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not _TRACE_CODE:
            code = frame.f_code
            if code in files:
                name = files[code]
            else:
                name = files[code] = user_file(code.co_filename)
                if name is not None:  # a file edited since linecache read it is read again
                    linecache.checkcache(code.co_filename)
            if name is not None:
                node.meta["location"] = located(name, frame.f_lineno)
                node.meta["source_text"] = source_text(code.co_filename, frame.f_lineno)
                break
            frame = frame.f_back
        return node  # no user frame below Tracer.trace (e.g. nn.Sequential): no location


class _LeafRoot(nn.Module):
    """Holds a leaf module passed as the root, so it is traced as one call, not its internals.

    FX needs forward()'s arguments by name (it cannot trace `*args`), so the subclass for
    each arity comes from `_LEAF_FORWARDS`.
    """

    def __init__(self, module: nn.Module):
        super().__init__()
        self.add_module(_ROOT_ATTR, module)


def _nesting_depth(model: nn.Module) -> int:
    """How many modules deep the model's submodules nest (the model alone is 0), counted
    without recursion, since it is asked when recursion has run out."""
    depth, level, seen = 0, [model], {id(model)}
    while level := [c for m in level for c in m.children() if id(c) not in seen]:
        seen.update(id(c) for c in level)
        depth += 1
    return depth


_LEAF_FORWARDS = {
    1: lambda self, x: self.root(x),
    2: lambda self, x, y: self.root(x, y),
    3: lambda self, x, y, z: self.root(x, y, z),
    4: lambda self, x, y, z, w: self.root(x, y, z, w),
}


@dataclass(frozen=True)
class Traced:
    """A traced model: its FX graph, the module it was traced from, and how module paths map
    back to the user's model.

    Attributes:
        graph: The FX graph; its targets are attribute paths of `root`.
        root: The traced module: the user's model, or a wrapper around a leaf module.
        wrapped_leaf: `root` wraps the user's model (a leaf module given as the model).
        stowed: Tensors made inside forward() that the graph reads by get_attr, by name
            (kept here, not set on the model as FX would).
        called: The paths (in `root`) of the modules forward() called while it was traced,
            leaves and modules FX traced through alike (the root itself, "", is not in it).
    """

    graph: torch.fx.Graph
    root: nn.Module
    wrapped_leaf: bool
    stowed: Mapping[str, torch.Tensor] = field(default_factory=dict)
    called: frozenset[str] = frozenset()

    def attribute(self, target: str):
        """The value a get_attr node reads: a stowed tensor, or an attribute path of `root`."""
        if target in self.stowed:
            return self.stowed[target]
        value = self.root
        for part in target.split("."):
            value = getattr(value, part)
        return value

    def module(self, node: torch.fx.Node) -> nn.Module:
        """The module a call_module node calls: NCET's private out-of-place copy when a
        rewrite made one (rewrites.PRIVATE_MODULE), else the submodule of `root`."""
        private = node.meta.get(PRIVATE_MODULE)
        return private if private is not None else submodule(self.root, node.target)

    def call_modules(self) -> Mapping[str, nn.Module]:
        """The submodules of `root` by target, looked up when first asked for (a rewrite
        pass asks only for the modules of the nodes it looks at closely)."""
        return _Submodules(self.root)

    def user_path(self, target: str) -> str:
        """The qualified name in the user's model of a GraphModule attribute path."""
        if not self.wrapped_leaf:
            return target
        return target.removeprefix(_ROOT_ATTR).removeprefix(".")


def submodule(root: nn.Module, target: str) -> nn.Module:
    """`root.get_submodule(target)`, through the `_modules` dicts (about 20 times faster
    than nn.Module's own lookup, which a conversion makes once per call_module node)."""
    module = root
    try:
        for part in target.split("."):
            module = module._modules[part]
    except (KeyError, AttributeError, TypeError):
        return root.get_submodule(target)  # its error message, or an unusual container
    if module is None:
        return root.get_submodule(target)
    return module


class _Submodules(dict):
    """target -> `root.get_submodule(target)`, each looked up once, when first asked for."""

    def __init__(self, root: nn.Module):
        super().__init__()
        self._root = root

    def __missing__(self, target: str) -> nn.Module:
        module = self[target] = submodule(self._root, target)
        return module

    def get(self, target: str, default=None):
        try:
            return self[target]
        except AttributeError:
            return default


_CONTROL_FLOW_HINT = ("remove data-dependent control flow and Python-side use of tensor values "
                      "from forward(), or wrap that code in a leaf module")
_FAILED_CALL_HINT = ("run the model eagerly on an example input: if it fails the same way, fix "
                     "forward(); if it runs, forward() uses a tensor's value where tracing has "
                     "only a placeholder: remove that use, or wrap the code in a leaf module")


def trace_model(model: nn.Module, n_inputs: int) -> Traced:
    """Symbolically trace `model`, checking that forward() takes `n_inputs` tensors.

    Args:
        model: The user's model; it is not modified.
        n_inputs: How many per-sample input shapes the caller gave.

    Returns:
        The traced graph and its root module.

    Raises:
        TraceError: FX cannot trace the model ("trace-failed"), or the number of
            forward() arguments differs from `n_inputs` ("input-count").
    """
    if not isinstance(model, nn.Module):
        raise TraceError("trace-failed", f"expected an nn.Module, got {type(model).__name__}",
                         hint="pass the model object itself")
    tracer = _LocatingTracer()
    wrapped = tracer.is_leaf_module(model, "")
    if wrapped:
        forward = _LEAF_FORWARDS.get(n_inputs)
        if forward is None:
            raise TraceError("input-count", f"a leaf module given as the model takes at most "
                                            f"{max(_LEAF_FORWARDS)} inputs here, not {n_inputs}",
                             hint="wrap it in a module whose forward() names its arguments")
        root = type(_LeafRoot.__name__, (_LeafRoot,), {"forward": forward})(model)
    else:
        root = model
    defaults = {} if wrapped else _defaulted_arguments(root, n_inputs)
    try:
        with confined_patches():  # FX patches nn.Module for this thread only
            graph = tracer.trace(root, concrete_args=defaults or None)
    except ForeignTrace as exc:
        raise TraceError(
            "trace-failed", f"{exc}: torch.fx patches nn.Module for the whole process while "
                            "it traces, so two traces at once disturb each other (the model "
                            "itself may be fine)",
            hint="run the other torch.fx trace and this conversion one after the other") \
            from exc
    except RecursionError as exc:  # not copy.py's line, where the limit happened to be hit
        location, text = failure_location(exc, own_only=True)
        depth = _nesting_depth(model)
        nesting = f" (its modules nest {depth} deep; tracing takes about two more Python " \
                  "frames per level than an eager call)" if depth > 1 else ""
        hint = "raise the limit before converting, e.g. sys.setrecursionlimit(10_000), or " \
               "nest the modules less deeply" if nesting else \
               "make the recursion in forward() end on something static (while tracing, a " \
               "condition on a tensor's value cannot stop it)"
        raise TraceError(
            "trace-failed", f"Python's recursion limit ({sys.getrecursionlimit()}) was reached "
                            f"while torch.fx traced the model{nesting}",
            hint=hint, location=location, source_text=text) from exc
    except Exception as exc:  # FX raises many types; the user needs one, with the cause
        location, text = failure_location(exc)
        raise TraceError(
            "trace-failed", f"torch.fx.symbolic_trace failed: {type(exc).__name__}: {exc}",
            hint=_CONTROL_FLOW_HINT if isinstance(exc, torch.fx.proxy.TraceError)
            else _FAILED_CALL_HINT, location=location, source_text=text,
        ) from exc
    _drop_specializations(graph, defaults)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != n_inputs:
        names = ", ".join(n.name for n in placeholders)
        raise TraceError(
            "input-count",
            f"forward() takes {len(placeholders)} tensor argument(s) ({names}) "
            f"but {n_inputs} input shape(s) were given",
            hint="give one per-sample shape per forward() argument, "
                 "e.g. convert(model, (3, 32, 32))",
        )
    return Traced(graph, tracer.root, wrapped, tracer.stowed, frozenset(tracer.called))


def _defaulted_arguments(root: nn.Module, n_inputs: int) -> dict[str, object]:
    """forward()'s parameters after the first `n_inputs` that have defaults, bound to them
    (FX's concrete_args), so that `forward(self, x, init_lambda=False)` traced with one shape
    is traced as the model runs when called with one argument. Empty unless every parameter
    after the inputs has an immutable default (then the input count is reported as it is)."""
    try:
        parameters = list(inspect.signature(root.forward).parameters.values())
    except (TypeError, ValueError):
        return {}
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind not in (*positional, inspect.Parameter.KEYWORD_ONLY) for p in parameters) \
            or sum(p.kind in positional for p in parameters) < n_inputs:
        return {}
    rest = parameters[n_inputs:]
    if not rest or any(p.default is inspect.Parameter.empty or not _immutable(p.default)
                       for p in rest):
        return {}
    return {p.name: p.default for p in rest}


def _immutable(value: object) -> bool:
    """None, a bool, a number or a string: a default that forward() cannot change while it is
    traced (a tensor or list default could be, and stay changed). Not a tuple: FX turns to its
    pytree code generator for one and flattens the graph's output, which would hide the
    output's structure from the walk."""
    return value is None or isinstance(value, (bool, int, float, complex, str, bytes))


def _drop_specializations(graph: torch.fx.Graph, defaults: dict[str, object]) -> None:
    """Erase what FX adds for each concrete argument: a placeholder holding the default and
    the assertion that it still has that value (neither computes anything of the model's)."""
    if not defaults:
        return
    for node in [n for n in graph.nodes if n.op == "placeholder"][::-1]:
        if re.sub(r"_\d+$", "", node.target) not in defaults or not node.args:
            continue  # FX names the placeholder of concrete argument `a` a_1 (or a_2, ...)
        chain, stack = [], [node]
        while stack:
            for user in stack.pop().users:
                if user not in chain:
                    chain.append(user)
                    stack.append(user)
        if all(u.op == "call_function" and (u.target is operator.eq or getattr(
                u.target, "__name__", "") in _SPECIALIZATION_CHECKS) for u in chain):
            for user in reversed([n for n in graph.nodes if n in chain]):  # users first
                graph.erase_node(user)
            graph.erase_node(node)


_SPECIALIZATION_CHECKS = ("_assert", "_assert_is_none")
"""The names of FX's checks that a concrete argument kept its value (by name: while a trace
runs, FX may patch these functions, so the node can hold a wrapper of them)."""


def make_example_inputs(shapes, dtype: torch.dtype, batch: int, seed: int) -> list[torch.Tensor]:
    """Seeded batched example inputs, drawn without touching the global RNG."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn((batch, *shape), generator=generator).to(dtype) for shape in shapes]
