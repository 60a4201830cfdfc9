"""Overrides on the checked model: torch code the model runs that is not torch's own.

The GraphIR maps a leaf module (nn.Linear, nn.ReLU, ...) and a torch function or Tensor
method by what torch's own code computes. A model whose leaf module has an instance
`forward`, whose class overrides `__call__`, or that runs while a leaf class's methods, a
torch.nn.functional function, a torch function or a Tensor method is patched, computes
something else when it is called, and what that code does off the samples is unknown (one
that zeroes a value above 1e8 agrees on every generated sample). So each such override
leaves the check NOT CERTIFIED, with a note naming the module and what is overridden, as a
hook does (exactness/hooks.py). The comparison is with the objects torch had when NCET was
imported (`SNAPSHOT`): a patch made before `import ncet` is not seen. The model is only read.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..frontend.spellings import METHOD_SPELLINGS, MODULE_SPELLINGS
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


SNAPSHOT = {
    "functions": tuple((f"torch.nn.functional.{n}", F, n, getattr(F, n))
                       for n in FUNCTIONAL_NAMES if hasattr(F, n))
    + tuple((f"torch.{n}", torch, n, getattr(torch, n)) for n in TORCH_NAMES if hasattr(torch, n))
    + tuple((f"torch.Tensor.{n}", torch.Tensor, n, getattr(torch.Tensor, n))
            for n in TENSOR_NAMES if hasattr(torch.Tensor, n)),
    "classes": {cls: _class_methods(cls) for cls in MODULE_SPELLINGS},
    "call": (nn.Module.__call__, nn.Module._call_impl),
}
"""torch's own objects, taken when NCET is imported."""


def patched_functions() -> list[str]:
    """The torch functions and Tensor methods that are no longer the objects in `SNAPSHOT`."""
    return [name for name, owner, attribute, value in SNAPSHOT["functions"]
            if getattr(owner, attribute, None) is not value]


def module_overrides(module: nn.Module) -> list[str]:
    """What in `module` runs instead of torch's own code when it is called."""
    cls = type(module)
    found = []
    if "forward" in vars(module):
        found.append("an instance attribute `forward` (replacing its class's forward())")
    call, call_impl = SNAPSHOT["call"]
    if cls.__call__ is not call or cls._call_impl is not call_impl:
        found.append(f"class {cls.__name__} overriding nn.Module.__call__")
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
        yield None, f"{', '.join(patched)} patched (not the object torch had when NCET " \
                    "was imported)"
    for path in ("", *sorted(traced.called)):
        try:
            module = submodule(traced.root, path) if path else traced.root
        except AttributeError:
            continue
        user = traced.user_path(path)
        where = f"module {user!r}" if user else "the model itself"
        for text in module_overrides(module):
            yield path, f"{where} has {text}"
