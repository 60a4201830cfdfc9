"""Hooks on the checked model: code the model runs that the GraphIR does not have.

`convert` leaves hooks out by design (frontend/hooks.py), and `check_exactness` calls the
model as its user does, hooks and all, so a hook that changes a value on the samples shows
as a violation. What a hook does off the samples is unknown (one that zeroes an output above
1e7 agrees on every generated sample), so any forward hook or pre-hook on the model or on a
module its forward() calls, or registered for every module, leaves the check NOT CERTIFIED,
with a note naming the module and the hook; code run instead of torch's own
(exactness/overrides.py) is flagged the same way. The model is only read: no hook is removed
or run here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from torch.nn.modules import module as module_globals

from ..frontend.trace import Traced
from .overrides import called_modules, model_overrides

HOOK_KINDS = (("_forward_pre_hooks", "forward pre-hook"), ("_forward_hooks", "forward hook"))
"""nn.Module's dicts of forward hooks and what a note calls them (keyword hooks are in the
same dicts; backward hooks leave forward values as they are)."""

GLOBAL_HOOK_KINDS = (
    ("_global_forward_pre_hooks", "forward pre-hook registered for every module "
                                  "(nn.modules.module.register_module_forward_pre_hook)"),
    ("_global_forward_hooks", "forward hook registered for every module "
                              "(nn.modules.module.register_module_forward_hook)"),
)
"""torch.nn.modules.module's global hook dicts, and what a note calls them."""


def hook_text(hook: object) -> str:
    """A hook as a note names it: its qualified name and, for a function, where it is
    defined (file:line)."""
    name = getattr(hook, "__qualname__", None) or type(hook).__name__
    code = getattr(hook, "__code__", None) or getattr(
        getattr(hook, "__func__", None), "__code__", None)
    where = f" ({os.path.basename(code.co_filename)}:{code.co_firstlineno})" if code else ""
    return f"{name}{where}"


def model_hooks(traced: Traced) -> Iterator[tuple[str | None, str]]:
    """(the module's path in the traced root, or None for a global hook; the note's
    description) for each forward hook and pre-hook that runs when the model is called:
    on the root, on each module its trace called, and for every module."""
    for attribute, kind in GLOBAL_HOOK_KINDS:
        for hook in getattr(module_globals, attribute, {}).values():
            yield None, f"a {kind}, {hook_text(hook)}"
    for path, module, where in called_modules(traced):
        for attribute, kind in HOOK_KINDS:
            for hook in (getattr(module, attribute, None) or {}).values():
                yield path, f"a {kind} on {where}, {hook_text(hook)}"


def flag_hooks(checker, traced: Traced) -> None:
    """Leave the check NOT CERTIFIED where a hook or an override (exactness/overrides.py)
    runs: at a leaf module's node when its module has one, else (the model's own, a module
    FX traced through, a global one) at the GraphIR's outputs."""
    leaves = {str(n.target): n.name for n in traced.graph.nodes if n.op == "call_module"}
    for path, text in model_hooks(traced):
        _flag(checker, leaves, path,
              f"{text}, runs when the model is called but is not part of the GraphIR: "
              "what it does off the samples is unknown, so nothing is certified here "
              "(remove the hook, e.g. handle.remove(), to certify the graph)")
    for path, text in model_overrides(traced):
        _flag(checker, leaves, path,
              f"{text}: the model runs it when called, the GraphIR has torch's own "
              "operation; what it does off the samples is unknown, so nothing is certified "
              "here (remove the override to certify the graph)")


def _flag(checker, leaves: dict[str, str], path: str | None, note: str) -> None:
    node = leaves.get(path) if path else None
    names = [node] if node in checker.stats else list(checker.ir.outputs)
    for i, name in enumerate(checker.ir.outputs if node not in checker.stats else ()):
        if name not in checker.stats:  # an output that is an Input node: no entry
            checker.outputs[i].unchecked = True
    for name in names:
        if name in checker.stats:
            checker.stats[name].note(note)
            checker.stats[name].unchecked = True
