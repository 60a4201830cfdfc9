"""What `rewrite=True` would do about a rejected node, for its hint (`advise_rewrite`): with
the rewrite off, the rule that applies there; with it on, why an in-place op could not be
made out of place. The rules themselves are rewrites.py."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..errors import Rejection
from .rewrites import Refusal, Rewritten, inplace_rewrite, static_batch_rewrite, static_batch_user

_SIZE_CODES = ("unsupported-method", "unsupported-function", "getitem-non-tensor",
               "dynamic-argument")
"""The codes the nodes of `v.view(v.size(0), -1)` are rejected with without the rewrite."""

_CALLS = ("call_function", "call_method", "call_module")


def advise_rewrite(node: torch.fx.Node, reason: Rejection, rewrite: bool,
                   refused: dict[str, Refusal], modules: Callable[[], dict[str, nn.Module]],
                   order: Callable[[], dict[torch.fx.Node, int]]) -> Rejection:
    """The rejection of `node`, saying what `rewrite=True` would do about it: with the
    rewrite off, a hint naming it where a rule applies here; with it on, for an in-place op
    it could not rewrite, what would observe the overwrite. `modules()` gives the modules
    by target and `order()` node -> position (asked for only when needed: this runs for
    rejected nodes alone)."""
    if reason.code == "inplace":
        outcome = refused.get(node.name) if rewrite else \
            inplace_rewrite(node, modules(), order())
        if isinstance(outcome, Refusal):
            return Rejection(reason.code, f"{reason.reason}, and rewrite=True cannot make it "
                                          f"out of place: {outcome.reason}", reason.hint)
        if isinstance(outcome, Rewritten):
            return Rejection(reason.code, reason.reason,
                             f"{reason.hint}; or convert with rewrite=True, which makes it out "
                             f"of place here ({outcome.why})")
        return reason
    if rewrite or reason.code not in _SIZE_CODES or node.op not in _CALLS:
        return reason
    view = node if static_batch_rewrite(node) is not None else static_batch_user(node)
    if view is None:
        return reason
    return Rejection(reason.code, reason.reason,
                     f"{reason.hint}; or convert with rewrite=True, which makes "
                     f"{view.name!r} a static reshape")
