"""A fast path: `check_exactness(model, ir)` reuses the trace `convert` made of that model.

Tracing is about a third of a conversion, and more than the check's floor on a small model,
so each GraphIR `convert` builds in this process remembers (weakly) the model, the FX graph
it came from and a fingerprint of the Python state the trace depended on (`fingerprint`).
The reference path traces the model again; `TRACE_CACHE` switches the cache off, and the
check's report is the same either way (tests/test_frontend_fast_paths.py): the recorded
graph's modules and attributes are looked up on the live model, a model whose fingerprint
changed since `convert` (a flag, a submodule, a forward(), a global forward() reads) is
traced again, and so is one whose recorded graph disagrees with the eager model at the
outputs.
"""

from __future__ import annotations

import struct
import weakref

from torch import Tensor, nn

TRACE_CACHE = True
"""The switch: False makes `recorded_trace` find nothing (every check traces the model), and
`record_trace` record nothing."""

_RECORDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""GraphIR -> (weak reference to the model, its FX graph, the stowed tensors, the modules
the trace called, the model's `fingerprint`) for each GraphIR `convert` built in this
process. Neither keeps the other alive: the graph and the fingerprint hold no reference to
the model."""

_MODULE_BOOKKEEPING = frozenset(vars(nn.Module())) - {"training"}
"""nn.Module's own attributes (parameters, buffers, submodules, hooks): the parameters and
buffers are read live, the submodules are fingerprinted one by one, the hooks are the
check's own business (exactness/hooks.py)."""

_MODULE_MRO = frozenset(nn.Module.__mro__)
"""nn.Module and its bases: their class attributes are torch's own."""

_DEPTH = 3
"""How deep `fingerprint` looks into containers and plain objects; deeper, by identity."""

_WIDTH = 256
"""The most items of one container or object `fingerprint` compares by value."""


def fingerprint(model: nn.Module) -> tuple:
    """What a trace of `model` may depend on besides tensor values, as a comparable value:
    per module (in `named_modules` order) its path, identity, class and `forward`, its
    class's own attributes (class-level flags; methods by identity), its `training` flag and
    other attributes (numbers, strings, flags, dtypes and containers or
    plain objects of those by value, floats by their bits; anything else by identity), and
    the module-level globals its forward() names (by value, the same way)."""
    key = []
    classes: dict[type, tuple] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        cls = type(module)
        if cls not in classes:
            forward = getattr(cls, "forward", None)
            names = getattr(getattr(forward, "__code__", None), "co_names", ())
            found = getattr(forward, "__globals__", {})
            own = tuple((k, _value(v, _DEPTH)) for klass in cls.__mro__
                        if klass not in _MODULE_MRO for k, v in vars(klass).items()
                        if not k.startswith("__"))  # class flags, methods by identity
            classes[cls] = (id(cls), id(forward), own, tuple(
                (n, _value(found[n], _DEPTH)) for n in names if n in found))
        attributes = tuple((k, _value(v, _DEPTH)) for k, v in vars(module).items()
                           if k not in _MODULE_BOOKKEEPING)
        key.append((path, id(module), classes[cls], attributes))
    return tuple(key)


def _value(value: object, depth: int):
    """`value` as a comparable key: by value where it is plain data, else by identity."""
    try:
        return _plain_value(value, depth)
    except Exception:  # a user's __repr__, __hash__ or property that fails
        return (type(value), id(value))


def _plain_value(value: object, depth: int):
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return (type(value), value)
    if isinstance(value, float):
        return (float, struct.pack("<d", value))  # -0.0 and NaN compare by their bits
    if isinstance(value, (Tensor, nn.Module)) or depth == 0:
        return (type(value), id(value))  # tensors are read live; submodules keyed apart
    if isinstance(value, (tuple, list, set, frozenset)) and len(value) <= _WIDTH:
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return (type(value), tuple(_value(v, depth - 1) for v in items))
    if isinstance(value, dict) and len(value) <= _WIDTH:
        return (type(value), tuple((_value(k, depth - 1), _value(v, depth - 1))
                                   for k, v in value.items()))
    attributes = getattr(value, "__dict__", None)
    if type(value).__module__ != "builtins" and isinstance(attributes, dict) \
            and not callable(value) and len(attributes) <= _WIDTH:  # a config object, say
        return (type(value), id(value), tuple((k, _value(v, depth - 1))
                                              for k, v in attributes.items()))
    try:
        return (type(value), hash(value), id(value))  # an enum, a dtype, a function
    except TypeError:
        return (type(value), id(value))


def record_trace(ir: object, model: nn.Module, traced) -> None:
    """Remember that `ir` was converted from `model` through `traced` (a `trace.Traced`; a
    leaf module given as the model is not recorded: its wrapper would keep the model alive)."""
    if TRACE_CACHE and not traced.wrapped_leaf:
        _RECORDED[ir] = (weakref.ref(model), traced.graph, traced.stowed, traced.called,
                         fingerprint(model))


def recorded_trace(ir: object, model: nn.Module):
    """The `trace.Traced` `ir` was converted through, when it came from this very `model` in
    this process and the model's `fingerprint` is still the one it had then (else None).

    Its modules and attributes are looked up on the live model, so changed weights show;
    a forward() whose Python behaves differently since `convert` for a reason the
    fingerprint does not see (a global read by a helper function, say) shows at the
    outputs, where the eager model is compared too."""
    recorded = _RECORDED.get(ir) if TRACE_CACHE else None
    if recorded is not None and recorded[0]() is model and recorded[4] == fingerprint(model):
        from .trace import Traced  # trace.py imports this module
        return Traced(recorded[1], model, False, recorded[2], recorded[3])
    return None
