"""FX's process-wide patches, confined to the thread that traces.

While `torch.fx.Tracer.trace` runs, FX replaces `nn.Module.__call__` and `__getattr__` (and
every `torch.fx.wrap`-ed function, and `math` functions in the model's module globals) for
the whole process, so that calls on the model being traced record nodes, and it sets a
process-wide "tracing" flag (which `torch.compile`d code refuses to run under). Another
thread that calls any model meanwhile would be recorded into the trace, or fail on a Proxy;
two traces that overlap restore each other's patches in the wrong order and can leave
PyTorch patched for good.

Inside `confined_patches()` every patch FX installs is a *gate*: in the tracing thread,
while the trace runs, it calls FX's replacement; in any other thread, or once the trace has
ended, it calls what was there before (and a closed gate holds no reference to the trace or
the model). The tracing flag reads true in the tracing thread only. NCET's traces run one
at a time (a lock), so their patches nest. A plain `torch.fx` trace running in another
thread at the same time cannot be made safe from here (FX itself is not thread-safe): NCET
refuses to start while one runs, and reports one that patched `nn.Module` during its own
trace (`ForeignTrace`) instead of returning a graph it may have disturbed. After `os.fork`,
the child starts with no trace running and fresh locks.

This relies on private names of `torch.fx._symbolic_trace` (`_Patcher`, `_PatchedFnSetAttr`,
`_new_patcher`, `CURRENT_PATCHER`, `_is_fx_tracing_flag`, in torch 2.13 as pinned);
`tests/test_threads.py` fails if they change meaning.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from torch import nn
from torch.fx import _symbolic_trace as _fx

_TRACE_LOCK = threading.RLock()
"""One NCET trace at a time: FX keeps its current patcher in a module global."""

_LOCAL = threading.local()  # .confined: this thread is inside confined_patches()
_ORIGINAL_NEW_PATCHER = _fx._new_patcher
_LIVE: weakref.WeakSet = weakref.WeakSet()  # patchers whose trace has not ended


class ForeignTrace(RuntimeError):
    """Another torch.fx trace, not NCET's, runs in this process at the same time."""


class _ConfinedPatcher(_fx._Patcher):
    """A `_Patcher` whose replacements act only in the thread that created it, while live."""

    def __init__(self) -> None:
        super().__init__()
        self.owner = threading.get_ident()
        self.live = True
        self.disturbed = False  # one of its patches was replaced by someone else's
        self._targets: list[list] = []  # each gate's [new_fn]; emptied when the trace ends

    def patch(self, frame_dict: dict[str, Any], name: str, new_fn: Callable[..., Any],
              deduplicate: bool = True) -> None:
        """Replace `frame_dict[name]` with a gate to `new_fn` (see `_Patcher.patch`)."""
        if name in frame_dict:
            before = frame_dict[name]
        elif hasattr(builtins, name):
            before = getattr(builtins, name)
        else:  # FX itself raises KeyError here; keep its behaviour
            before = None
        super().patch(frame_dict, name, self._gate(new_fn, before), deduplicate)

    def patch_method(self, cls: type, name: str, new_fn: Callable[..., Any],
                     deduplicate: bool = True) -> None:
        """Replace `cls.name` with a gate to `new_fn` (see `_Patcher.patch_method`)."""
        super().patch_method(cls, name, self._gate(new_fn, getattr(cls, name)), deduplicate)

    def _gate(self, new_fn: Callable[..., Any], before: Callable[..., Any] | None):
        owner, get_ident, target = self.owner, threading.get_ident, [new_fn]
        self._targets.append(target)

        @functools.wraps(new_fn)
        def gate(*args, **kwargs):
            if target and get_ident() == owner:
                return target[0](*args, **kwargs)
            return before(*args, **kwargs)

        gate.__dict__.pop("__wrapped__", None)  # no path from a closed gate to the trace
        gate._ncet_target, gate._ncet_before = target, before
        return gate

    def close(self) -> None:
        """End the trace: every gate falls through from now on, and each patch that is
        still this patcher's own is reverted (one that someone else replaced since is left
        to them, and noted in `disturbed`)."""
        self.live = False
        for target in self._targets:
            target.clear()
        for patch in reversed(self.patches_made):
            if isinstance(patch, _fx._PatchedFnSetAttr):
                current = patch.frame_dict.__dict__.get(patch.fn_name)
            else:
                current = patch.frame_dict.get(patch.fn_name)
            if current is patch.new_fn:
                patch.revert()
            else:
                self.disturbed = True
        self.patches_made.clear()
        _LIVE.discard(self)


class _TracingFlag:
    """FX's "tracing" flag while a confined trace runs: true in the tracing thread only."""

    __slots__ = ("patcher",)

    def __init__(self, patcher: _ConfinedPatcher):
        self.patcher = patcher

    def __bool__(self) -> bool:
        return self.patcher.live and threading.get_ident() == self.patcher.owner


@contextlib.contextmanager
def _new_patcher() -> Iterator[_fx._Patcher]:
    """FX's `_new_patcher`, giving a `_ConfinedPatcher` in a thread inside
    `confined_patches()` and FX's own patcher in any other."""
    if not getattr(_LOCAL, "confined", False):
        with _ORIGINAL_NEW_PATCHER() as patcher:
            yield patcher
        return
    if _fx.CURRENT_PATCHER is not None:  # FX's own patcher: a plain trace is running
        raise ForeignTrace("another torch.fx trace is running in this process")
    patcher = _ConfinedPatcher()  # not FX's CURRENT_PATCHER: a plain trace keeps that one
    _LIVE.add(patcher)
    _fx._is_fx_tracing_flag = _TracingFlag(patcher)  # FX restores its own value after
    try:
        yield patcher
    finally:
        patcher.close()
        _LOCAL.disturbed = getattr(_LOCAL, "disturbed", False) or patcher.disturbed


@contextlib.contextmanager
def confined_patches() -> Iterator[None]:
    """Trace inside this: FX's patches act only in this thread, and only until it exits.

    Raises:
        ForeignTrace: A torch.fx trace other than NCET's was running, or started meanwhile.
    """
    with _TRACE_LOCK:
        _install()
        outer = getattr(_LOCAL, "confined", False)
        _LOCAL.confined, _LOCAL.disturbed = True, False
        try:
            yield
        except Exception as exc:  # a trace another one disturbed fails in odd ways: say why
            if _LOCAL.disturbed:
                raise ForeignTrace(_DISTURBED) from exc
            raise
        finally:
            _LOCAL.confined = outer
        if _LOCAL.disturbed:
            raise ForeignTrace(_DISTURBED)


_DISTURBED = "another torch.fx trace patched nn.Module while this one ran"


def _install() -> None:
    """Put the dispatching `_new_patcher` into FX, once (other threads get FX's own), and
    take out closed gates that a plain trace overlapping an earlier one put back."""
    if _fx._new_patcher is not _new_patcher:
        _fx._new_patcher = _new_patcher
    if _fx.CURRENT_PATCHER is None:
        for name in ("__call__", "__getattr__"):
            value = original = nn.Module.__dict__[name]
            while getattr(value, "_ncet_target", None) == []:  # closed: falls through anyway
                value = value._ncet_before
            if value is not original:
                setattr(nn.Module, name, value)


def _after_fork_in_child() -> None:
    """The forked child has only the forking thread: no trace of another thread runs there,
    and the locks they held must be free."""
    global _TRACE_LOCK
    _TRACE_LOCK = threading.RLock()
    for patcher in list(_LIVE):
        patcher.close()
    if isinstance(_fx._is_fx_tracing_flag, _TracingFlag):
        _fx._is_fx_tracing_flag = False


os.register_at_fork(after_in_child=_after_fork_in_child)
