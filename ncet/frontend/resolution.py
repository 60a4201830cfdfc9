"""Resolution: which row of the spelling tables an FX call node's target is, or why none is."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import torch.fx
from torch import nn

from ..errors import Rejection
from .aliasing import is_size
from .clamping import clamp_bounds, clamp_hint, relu_clamp_target
from .context import Spelling
from .hooks import weight_hook_rejection
from .rewrites import static_batch_user
from .spellings import (
    FUNCTION_SPELLINGS,
    INPLACE_FUNCTIONS,
    METHOD_SPELLINGS,
    MODULE_SPELLINGS,
    REJECTED_FUNCTIONS,
    UNSUPPORTED_HINTS,
)
from .trace import Traced

_UNLISTED_HINT = "see docs/support-boundary.md for the spellings NCET maps"
_NOT_A_TENSOR_HINT = ("an `isinstance(x, torch.Tensor)` test is False while torch.fx traces "
                      "(x is its Proxy), so such a branch takes its other side: decide it from "
                      "a Python setting instead, or call the tensor path unconditionally")
_SIZE_HINT = ("a size is not a value of a per-sample graph: use a Python constant for a "
              "per-sample size, and -1 or flatten(1) for the batch size")
_VIEWS = ("view", "reshape")


class Resolution(NamedTuple):
    """What a call node's target resolves to (immutable; a NamedTuple, as `NodeRecord` is,
    since one is made per call node of every conversion).

    Attributes:
        spelling: The spelling-table row, None when the target has none.
        display: The name reports show for the call (the row's, or the target's own).
        module: For call_module, the submodule called (on the traced root).
        module_path: The module's qualified name in the user's model (for calls made inside
            a module's forward(), the innermost such module), "" for none.
        module_type: That module's type name, "" for none.
        rejection: A reason to reject the node before it is mapped, if any.
    """

    spelling: Spelling | None
    display: str
    module: nn.Module | None = None
    module_path: str = ""
    module_type: str = ""
    rejection: Rejection | None = None


def resolve(node: torch.fx.Node, traced: Traced) -> Resolution:
    """The spelling of a call_module, call_method or call_function node."""
    target = node.target
    if node.op == "call_module":
        module = traced.module(node)
        path, kind = traced.user_path(target), _type_name_of(type(module))
        spelling = MODULE_SPELLINGS.get(type(module))
        if spelling is None:
            return Resolution(None, kind, module, path, kind, Rejection(
                "unsupported-module", f"module type {kind} is not in the spelling table",
                hint=_clamp_hint(node, module) or UNSUPPORTED_HINTS.get(type(module),
                                                                          _UNLISTED_HINT)))
        return Resolution(spelling, spelling.display, module, path, kind,
                          weight_hook_rejection(module))
    stack = node.meta.get("nn_module_stack")
    if stack:  # the innermost module whose forward() made the call
        innermost = next(reversed(stack))
        path, kind = traced.user_path(innermost), _type_name_of(stack[innermost][1])
    else:
        path = kind = ""
    if node.op == "call_method":
        display = f"Tensor.{target}"
        if target.endswith("_") and not target.startswith("__"):
            clamp = _clamp_hint(node)
            return Resolution(None, display, None, path, kind, Rejection(
                "inplace", f"in-place method {display}() is rejected",
                hint=f"use x.{target[:-1]}(...) instead" if not clamp else
                f"NCET maps no clamp, in place or not: {clamp}"))
        spelling = METHOD_SPELLINGS.get(target)
        receiver = node.args[0] if node.args else None
        on_a_size = isinstance(receiver, torch.fx.Node) and is_size(receiver)
        if spelling is None and not on_a_size and not hasattr(torch.Tensor, target):
            return Resolution(None, display, None, path, kind, Rejection(
                "not-a-tensor-method", f"tensors have no method {target}(): forward() calls "
                                       "it on a traced tensor as if it were something else",
                hint=_NOT_A_TENSOR_HINT))
        if spelling is None:
            hint = _clamp_hint(node) or UNSUPPORTED_HINTS.get(target, _UNLISTED_HINT)
            if target == "size" and static_batch_user(node) is None:
                hint = _SIZE_HINT  # not the flatten idiom (x.view(x.size(0), -1))
            elif on_a_size:
                hint = _SIZE_HINT
            return Resolution(None, display, None, path, kind, Rejection(
                "unsupported-method", f"method {display} is not in the spelling table",
                hint=hint))
        return Resolution(spelling, display, None, path, kind)
    display = _display(target)
    try:
        spelling = FUNCTION_SPELLINGS.get(target)
    except TypeError:  # an unhashable callable cannot be in the table
        spelling = None
    if spelling is not None:
        return Resolution(spelling, spelling.display, None, path, kind)
    if target in INPLACE_FUNCTIONS:
        rejection = Rejection("inplace", f"in-place function {display} is rejected",
                              hint=f"use {INPLACE_FUNCTIONS[target]} instead")
    elif target in REJECTED_FUNCTIONS:
        rejection = Rejection(*REJECTED_FUNCTIONS[target])
    else:
        rejection = Rejection("unsupported-function",
                              f"function {display} is not in the spelling table",
                              hint=_clamp_hint(node) or UNSUPPORTED_HINTS.get(target,
                                                                              _UNLISTED_HINT))
    return Resolution(None, display, None, path, kind, rejection)


def _clamp_hint(node: torch.fx.Node, module: nn.Module | None = None) -> str:
    """The hint for a clamp (clamp, clip, hardtanh, ReLU6) from its own bounds, "" for
    another node."""
    bounds = clamp_bounds(node, module)
    return "" if bounds is None else clamp_hint(bounds, rewritable=relu_clamp_target(node))


def _display(target: Any) -> str:
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    if name.startswith("_VariableFunctionsClass.") or module.startswith("torch._C"):
        module, name = "torch", name.rpartition(".")[2]
    module = {"torch.nn.functional": "F", "_operator": "operator"}.get(module, module)
    return f"{module}.{name}" if module else name


@functools.lru_cache(maxsize=1024)
def _type_name_of(cls: type) -> str:
    prefix = "nn" if cls.__module__.startswith("torch.nn.") else cls.__module__
    return f"{prefix}.{cls.__qualname__}"
