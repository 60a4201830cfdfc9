"""A fast path: `check_exactness(model, ir)` reuses the trace `convert` made of that model.

Tracing is about a third of a conversion, and more than the check's floor on a small model,
so each GraphIR `convert` builds in this process remembers (weakly) the model and the FX
graph it came from. The reference path traces the model again; `TRACE_CACHE` switches the
cache off, and the check's report is the same either way (tests/test_frontend_fast_paths.py):
the recorded graph's modules and attributes are looked up on the live model, and a check whose
recorded graph disagrees with the eager model at the outputs traces again.
"""

from __future__ import annotations

import weakref

from torch import nn

TRACE_CACHE = True
"""The switch: False makes `recorded_trace` find nothing (every check traces the model), and
`record_trace` record nothing."""

_RECORDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""GraphIR -> (weak reference to the model, its FX graph, the stowed tensors) for each
GraphIR `convert` built in this process. Neither keeps the other alive: the graph holds no
reference to the model."""


def record_trace(ir: object, model: nn.Module, traced) -> None:
    """Remember that `ir` was converted from `model` through `traced` (a `trace.Traced`; a
    leaf module given as the model is not recorded: its wrapper would keep the model alive)."""
    if TRACE_CACHE and not traced.wrapped_leaf:
        _RECORDED[ir] = (weakref.ref(model), traced.graph, traced.stowed)


def recorded_trace(ir: object, model: nn.Module):
    """The `trace.Traced` `ir` was converted through, when it came from this very `model` in
    this process (else None).

    Its modules and attributes are looked up on the live model, so changed weights show;
    a forward() whose Python behaves differently since `convert` shows at the outputs,
    where the eager model is compared too."""
    recorded = _RECORDED.get(ir) if TRACE_CACHE else None
    if recorded is not None and recorded[0]() is model:
        from .trace import Traced  # trace.py imports this module
        return Traced(recorded[1], model, False, recorded[2])
    return None
