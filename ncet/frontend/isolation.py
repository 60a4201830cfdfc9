"""The user's model and PyTorch's global state, as they were: `convert`, `diagnose` and
`check_exactness` run inside `untouched(model)`.

Tracing runs forward() on proxies and the checks run the model itself, so code in forward()
can draw from the global random number generator (`torch.randn`, `torch.manual_seed`),
switch the grad mode (`torch.set_grad_enabled`), or update buffers when it runs
(a training-mode BatchNorm's running statistics, `spectral_norm`'s power-iteration vectors
`weight_u`/`weight_v`, a parametrization's state). `untouched` forks the RNG, restores the grad
mode, and puts back every buffer, bit for bit, on every exit path (kernels such as
BatchNorm's update running statistics without moving the tensor's version counter, so every
buffer is copied back, not only those that look written). Plain Python attributes that
forward() itself changes (a call counter) change as on any call of the model, and are not
put back: restoring them would hide from `check_exactness` the very state that makes a trace
differ from the model.

PyTorch's default RNG is the whole process's (the grad mode is per thread), so these calls
run one at a time (`_CALL_LOCK`): concurrent calls from several threads wait for each other
and give the sequential results, and each restores the RNG state it found.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import torch
from torch import nn

_CALL_LOCK = threading.RLock()
"""Held for the whole of each `untouched` body: the forked RNG is the whole process's."""


def _fresh_lock_in_child() -> None:  # a thread that held it does not exist after os.fork
    global _CALL_LOCK
    _CALL_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)


@contextlib.contextmanager
def untouched(model: nn.Module) -> Iterator[None]:
    """Run the body with the global RNG forked and, afterwards, the grad mode and every
    buffer of `model` that the body wrote restored (whatever the body raised); one body
    at a time in the process."""
    with _CALL_LOCK, _restored(model):
        yield


@contextlib.contextmanager
def _restored(model: nn.Module) -> Iterator[None]:
    grad = torch.is_grad_enabled()
    modules = _modules(model)
    buffers = list({id(b): (b, b.detach().clone()) for m in modules
                    for b in m._buffers.values() if b is not None and not b.is_meta}.values())
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_grad_enabled(grad)
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)


def _modules(model: nn.Module) -> list[nn.Module]:
    """Every module of `model` once, found without recursion (a model nested deeper than
    Python's recursion limit allows is still put back)."""
    found, stack, seen = [], [model], {id(model)}
    while stack:
        module = stack.pop()
        found.append(module)
        for child in module._modules.values():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    return found

