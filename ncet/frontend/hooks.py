"""Module hooks: not part of the converted graph, and PyTorch's own weight-computing
pre-hooks refused.

A graph holds what forward() computes: `convert` and `diagnose` run no hooks (see
`trace.py`). Three tools of `torch.nn.utils` keep a module's weight *outside* its
parameters and recompute it in a forward pre-hook on every call: the old-style
`weight_norm` and `spectral_norm`, and `prune`. Their module's `weight` attribute is then
only the value cached by the last eager call (for a fresh `spectral_norm`, the unnormalised
weight), so lifting it would give a graph that is not the model: such a module is rejected
with the way to fix the weight first.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from torch import nn
from torch.nn.utils.prune import BasePruningMethod
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm

from ..errors import Rejection

WEIGHT_HOOKS: Mapping[type, tuple[str, str]] = MappingProxyType({
    WeightNorm: ("nn.utils.weight_norm", "nn.utils.remove_weight_norm(module, {name!r})"),
    SpectralNorm: ("nn.utils.spectral_norm", "nn.utils.remove_spectral_norm(module, {name!r})"),
    BasePruningMethod: ("torch.nn.utils.prune", "prune.remove(module, {name!r})"),
})
"""Hook class -> (the tool that registers it, the call that fixes the weight it computes)."""


def weight_hook_rejection(module: nn.Module, attribute: str | None = None) -> Rejection | None:
    """The rejection of a module one of `WEIGHT_HOOKS` recomputes a weight of (that
    `attribute`, when given), or None."""
    for hook in module._forward_pre_hooks.values():
        for kind, (tool, fix) in WEIGHT_HOOKS.items():
            if isinstance(hook, kind):
                name = getattr(hook, "name", None) or getattr(hook, "_tensor_name", "weight")
                if attribute is not None and name != attribute:
                    continue
                return Rejection(
                    "weight-hook",
                    f"{tool} recomputes this module's {name!r} in a forward pre-hook on every "
                    "call; NCET runs no hooks, and the attribute holds only the value the last "
                    "eager call cached",
                    hint=f"store the weight the hook computes, once, before converting: "
                         f"{fix.format(name=name)} (on the model in eval mode)")
    return None
