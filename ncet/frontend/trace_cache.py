"""A fast path: `check_exactness(model, ir)` traces the model once and reuses convert's graph
when the two are identical node by node (else the check traces again, on its reference path).

Each GraphIR `convert` builds in this process remembers (weakly) the model and the FX graph
it came from. A check of that model object traces it again (torch.fx symbolic tracing and
the rewrites, without shape propagation: `trace_model` and `rewrite_graph`, a few ms) and
takes this fresh trace only when its graph is identical to the recorded one node by node:
op, name, target (callables by identity), the structure of args and kwargs with their
constants by type and value (floats by their bits) and NCET's private out-of-place modules.
Anything that changed since `convert` and changes the trace (a flag, a monkeypatched
function, a global a helper reads, a config object however deep) therefore shows, and the
check's reference path runs; what does not change the trace cannot change the graph the
check runs. `TRACE_CACHE` switches the path off, and the check's report is the same either
way (tests/test_frontend_fast_paths.py, tests/test_tracing_hazards.py).
"""

from __future__ import annotations

import struct
import weakref

import torch
import torch.fx
from torch import nn

from ..errors import TraceError
from .rewrites import PRIVATE_MODULE, rewrite_graph
from .trace import trace_model

TRACE_CACHE = True
"""The switch: False makes `recorded_trace` find nothing (every check traces the model in
check.py), and `record_trace` record nothing."""

_RECORDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""GraphIR -> (weak reference to the model, its FX graph) for each GraphIR `convert` built
in this process. Neither keeps the other alive: the graph holds no reference to the model."""


_BY_TEXT = (torch.device, torch.dtype, torch.memory_format, torch.layout)
"""Constants FX leaves in args that compare by their text (a device may be a new object on
each trace)."""


def record_trace(ir: object, model: nn.Module, traced) -> None:
    """Remember that `ir` was converted from `model` through `traced` (a `trace.Traced`; a
    leaf module given as the model is not recorded: its wrapper would keep the model alive)."""
    if TRACE_CACHE and not traced.wrapped_leaf:
        _RECORDED[ir] = (weakref.ref(model), traced.graph)


def recorded_trace(ir: object, model: nn.Module):
    """A fresh `trace.Traced` of `model` (traced and rewritten as the check's reference path
    does), when `ir` came from this very `model` in this process and the fresh graph is
    identical node by node to the one `convert` traced (else None: the check traces the
    model itself). Its stowed tensors and called modules are the fresh trace's."""
    recorded = _RECORDED.get(ir) if TRACE_CACHE else None
    if recorded is None or recorded[0]() is not model:
        return None
    try:
        fresh = trace_model(model, len(ir.inputs))
    except TraceError:
        return None  # the reference path raises it
    rewrite_graph(fresh.graph, fresh.call_modules())
    return fresh if same_graph(fresh.graph, recorded[1]) else None


def same_graph(a: torch.fx.Graph, b: torch.fx.Graph) -> bool:
    """Whether two FX graphs are identical node by node (see the module docstring)."""
    nodes_a, nodes_b = list(a.nodes), list(b.nodes)
    return len(nodes_a) == len(nodes_b) and all(
        _node_key(x) == _node_key(y) for x, y in zip(nodes_a, nodes_b))


def _node_key(node: torch.fx.Node) -> tuple:
    private = node.meta.get(PRIVATE_MODULE)
    return (node.op, node.name, _value(node.target), _value(node.args), _value(node.kwargs),
            None if private is None else (type(private), _value(vars(private))))


def _value(value: object):
    """`value` as a comparable key: nodes by name, containers item by item, plain constants
    by type and value (floats by their bits), anything else by identity."""
    if isinstance(value, torch.fx.Node):
        return (torch.fx.Node, value.name)
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_value(v) for v in value))
    if isinstance(value, dict):
        return (type(value), tuple((_value(k), _value(v)) for k, v in value.items()))
    if isinstance(value, slice):
        return (slice, _value(value.start), _value(value.stop), _value(value.step))
    if isinstance(value, float):
        return (float, struct.pack("<d", value))  # -0.0 and NaN compare by their bits
    if value is None or isinstance(value, (bool, int, str, bytes, complex)):
        return (type(value), value)
    if isinstance(value, _BY_TEXT):
        return (type(value), str(value))
    return (type(value), id(value))  # a function, a dtype, a module, a tensor: by identity
