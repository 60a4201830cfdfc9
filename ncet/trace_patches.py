"""FX's process-wide patches, confined to the thread that traces.

While `torch.fx.Tracer.trace` runs, FX replaces `nn.Module.__call__` and `__getattr__` (and
every `torch.fx.wrap`-ed function, and `math` functions in the model's module globals) for
the whole process, so that calls on the model being traced record nodes. Another thread that
calls any model meanwhile would be recorded into the trace, or fail on a Proxy; two traces
that overlap restore each other's patches in the wrong order and can leave PyTorch patched
for good.

`confined_patches()` makes every patch FX installs a *gate*: in the tracing thread, while
the trace runs, it calls FX's replacement; in any other thread, or once the trace has ended
(even if a revert was lost), it calls what was there before. NCET's traces run one at a
time (a lock), so their patches nest.

This relies on two private names of `torch.fx._symbolic_trace` (`_Patcher` and
`_new_patcher`, in torch 2.13 as pinned); `tests/test_threads.py` fails if they change
meaning.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from torch.fx import _symbolic_trace as _fx

_TRACE_LOCK = threading.RLock()
"""One NCET trace at a time: FX keeps its current patcher in a module global."""


class _ConfinedPatcher(_fx._Patcher):
    """A `_Patcher` whose replacements act only in the thread that created it, while live."""

    def __init__(self) -> None:
        super().__init__()
        self._owner = threading.get_ident()
        self.live = True

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
        owner, get_ident = self._owner, threading.get_ident

        @functools.wraps(new_fn)
        def gate(*args, **kwargs):
            if self.live and get_ident() == owner:
                return new_fn(*args, **kwargs)
            return before(*args, **kwargs)

        return gate


@contextlib.contextmanager
def _new_confined_patcher() -> Iterator[_ConfinedPatcher]:
    """`torch.fx._symbolic_trace._new_patcher`, with a `_ConfinedPatcher`."""
    prior = _fx.CURRENT_PATCHER
    patcher = _fx.CURRENT_PATCHER = _ConfinedPatcher()
    try:
        yield patcher
    finally:
        patcher.live = False  # from here every gate falls through, even one not reverted
        patcher.revert_all_patches()
        _fx.CURRENT_PATCHER = prior


@contextlib.contextmanager
def confined_patches() -> Iterator[None]:
    """Trace inside this: FX's patches act only in this thread, and only until it exits."""
    with _TRACE_LOCK:
        original = _fx._new_patcher
        _fx._new_patcher = _new_confined_patcher
        try:
            yield
        finally:
            _fx._new_patcher = original
