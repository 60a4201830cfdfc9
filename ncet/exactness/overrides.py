"""Overrides on the checked model: torch code the model runs that is not torch's own.

The GraphIR maps a leaf module (nn.Linear, nn.ReLU, ...) and a torch function or Tensor
method by what torch's own code computes. A model whose module has an instance `forward` or
call (`_call_impl`, `_wrapped_call_impl`, a compiled call), whose class overrides
`__call__`, or that runs while a leaf class's methods, a torch.nn.functional, torch._C._nn
or torch function, or a Tensor method is patched, or while a torch function or dispatch mode
is active, computes something else when it is called, and what that code does off the
samples is unknown (one that zeroes a value above 1e8 agrees on every generated sample). So
each such override leaves the check NOT CERTIFIED, with a note naming the module and what
is overridden, as a hook does (exactness/hooks.py). The comparison is with the objects torch
had when NCET was imported (`SNAPSHOT`): a patch made before `import ncet` is not seen, nor
a mode entered inside forward() and left before it returns. The model is only read.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..frontend.spellings import (
    FUNCTION_SPELLINGS,
    INPLACE_FUNCTIONS,
    METHOD_SPELLINGS,
    MODULE_SPELLINGS,
)
from ..frontend.trace import Traced, submodule

FUNCTIONAL_NAMES = ("linear", "conv2d", "batch_norm", "relu", "relu_", "leaky_relu",
                    "leaky_relu_", "max_pool2d", "max_pool2d_with_indices", "avg_pool2d",
                    "adaptive_avg_pool2d", "dropout", "dropout1d", "dropout2d", "dropout3d",
                    "hardtanh")
"""The torch.nn.functional functions the spelling tables and the leaf modules' forward()
call."""

TORCH_NAMES = ("relu", "relu_", "conv2d", "batch_norm", "max_pool2d", "avg_pool2d",
               "adaptive_avg_pool2d", "flatten", "mean", "reshape", "squeeze", "unsqueeze",
               "permute", "transpose", "cat", "concat", "concatenate", "add", "sub", "mul",
               "div", "where", "clamp", "dropout", "feature_dropout", "leaky_relu")
"""The torch functions the spelling tables and the leaf modules' forward() call."""

TENSOR_NAMES = tuple(sorted({*METHOD_SPELLINGS, "__add__", "__radd__", "__sub__", "__rsub__",
                             "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
                             "__getitem__", "clamp", "clamp_min", "relu_"}))
"""The Tensor methods the spelling tables name, and those Python's operators call."""


def _class_methods(cls: type) -> tuple:
    """(class, name, object) for each attribute a leaf class and its torch bases define
    below nn.Module."""
    return tuple((klass, name, value) for klass in cls.__mro__
                 if klass not in nn.Module.__mro__ for name, value in vars(klass).items())


def _raw(owner, name: str):
    """What `owner` holds under `name` itself, unbound (a class's classmethod, not a fresh
    bound method each time), from the dict a patch writes to; None if it holds nothing."""
    holder = owner if hasattr(owner, "__dict__") else type(owner)
    return vars(holder).get(name)


def _named_in(owner, names) -> tuple:
    return tuple((f"{_OWNER_NAMES[id(owner)]}.{n}", owner, n, _raw(owner, n))
                 for n in names if _raw(owner, n) is not None)


def _callables(owner) -> tuple:
    """Every callable attribute `owner` holds itself (a namespace's functions, a class's
    methods): what torch's Python wrappers look up at call time (F.leaky_relu calls
    torch._C._nn.leaky_relu, `y -= 1` calls Tensor.__isub__, ...)."""
    holder = owner if hasattr(owner, "__dict__") else type(owner)
    return _named_in(owner, sorted(n for n, v in vars(holder).items()
                                   if callable(v) or isinstance(v, (staticmethod, classmethod))))


_OWNER_NAMES = {id(F): "torch.nn.functional", id(torch): "torch",
                id(torch.Tensor): "torch.Tensor", id(torch._C.TensorBase): "torch._C.TensorBase",
                id(torch._C._nn): "torch._C._nn",
                id(torch._C._VariableFunctions): "torch._C._VariableFunctions"}

_SPELLED_TORCH = sorted(n for n, v in vars(torch).items()
                        if any(v is f for f in (*FUNCTION_SPELLINGS, *INPLACE_FUNCTIONS)))
"""The torch functions the spelling tables name (torch.subtract, torch.relu_, ...)."""

SNAPSHOT = {
    "functions": _named_in(F, FUNCTIONAL_NAMES)
    + _named_in(torch, sorted({*TORCH_NAMES, *_SPELLED_TORCH}))
    + _named_in(torch.Tensor, TENSOR_NAMES)
    + _callables(F) + _callables(torch._C._nn) + _callables(torch._C._VariableFunctions)
    + _callables(torch.Tensor) + _callables(torch._C.TensorBase),
    "vf": frozenset(vars(torch._VF)),
    "tensor": frozenset(vars(torch.Tensor)),
    "classes": {cls: _class_methods(cls) for cls in MODULE_SPELLINGS},
    "call": (nn.Module.__call__, nn.Module._call_impl, nn.Module._wrapped_call_impl),
}
"""torch's own objects, taken when NCET is imported."""


def patched_functions() -> list[str]:
    """The torch functions and Tensor methods that are no longer the objects in `SNAPSHOT`,
    the names set on torch._VF (which forwards to torch._C._VariableFunctions), and the
    methods set on torch.Tensor since (which shadow torch._C.TensorBase's: `y -= 1` calls
    Tensor.__isub__)."""
    patched = sorted({name for name, owner, attribute, value in SNAPSHOT["functions"]
                      if _raw(owner, attribute) is not value})
    added = [f"torch._VF.{n}" for n in sorted(set(vars(torch._VF)) - SNAPSHOT["vf"])]
    added += [f"torch.Tensor.{n}" for n, v in sorted(vars(torch.Tensor).items())
              if n not in SNAPSHOT["tensor"] and callable(v)]  # shadowing TensorBase's
    return patched + added


def modes() -> list[str]:
    """The torch function and dispatch modes active on this thread: each runs its own code
    in place of torch's for every op it sees."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    found = []
    if torch._C._len_torch_function_stack() > 0:
        found.append("a TorchFunctionMode is active")
    if _get_current_dispatch_mode_stack():
        found.append("a TorchDispatchMode is active")
    return found


def module_overrides(module: nn.Module) -> list[str]:
    """What in `module` runs instead of torch's own code when it is called."""
    cls = type(module)
    found = []
    if "forward" in vars(module):
        found.append("an instance attribute `forward` (replacing its class's forward())")
    call, call_impl, wrapped = SNAPSHOT["call"]
    if cls.__call__ is not call or cls._call_impl is not call_impl \
            or cls._wrapped_call_impl is not wrapped:
        found.append(f"class {cls.__name__} overriding nn.Module.__call__")
    instance = vars(module)
    found.extend(f"an instance attribute `{name}` (replacing nn.Module's call)"
                 for name in ("__call__", "_call_impl", "_wrapped_call_impl") if name in instance)
    if instance.get("_compiled_call_impl") is not None:
        found.append("a compiled call (model.compile(): torch.compile's code runs instead)")
    for klass, name, value in SNAPSHOT["classes"].get(cls, ()):
        if vars(klass).get(name) is not value:
            found.append(f"{klass.__name__}.{name} patched (not torch's own)")
    if cls in SNAPSHOT["classes"]:
        known = {(klass, name) for klass, name, _ in SNAPSHOT["classes"][cls]}
        found.extend(f"{klass.__name__}.{name} added to torch's class"
                     for klass in cls.__mro__ if klass not in nn.Module.__mro__
                     for name in vars(klass) if (klass, name) not in known)
    return found


def model_overrides(traced: Traced) -> Iterator[tuple[str | None, str]]:
    """(the module's path in the traced root, or None for a process-wide patch; the note's
    description) for each override that runs when the model is called."""
    patched = patched_functions()
    if patched:
        shown = ", ".join(patched[:8]) + (f" and {len(patched) - 8} more" if len(patched) > 8
                                          else "")
        yield None, f"{shown} patched (not the object torch had when NCET was imported)"
    for text in modes():
        yield None, f"{text} (its code runs in place of torch's)"
    for path, module, where in called_modules(traced):
        for text in module_overrides(module):
            yield path, f"{where} has {text}"


def called_modules(traced: Traced) -> Iterator[tuple[str, nn.Module, str]]:
    """(path in the traced root, the module, how a note names it) for the root and each
    module its trace called, in path order."""
    for path in ("", *sorted(traced.called)):
        try:
            module = submodule(traced.root, path) if path else traced.root
        except AttributeError:
            continue
        user = traced.user_path(path)
        yield path, module, f"module {user!r}" if user else "the model itself"
