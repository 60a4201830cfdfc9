"""The user's model and PyTorch's global state, as they were: `convert`, `diagnose` and
`check_exactness` run inside `untouched(model)`.

Tracing runs forward() on proxies and the checks run the model itself, so code in forward()
can draw from the global random number generator (`torch.randn`, `torch.manual_seed`),
switch the grad mode (`torch.set_grad_enabled`), or update buffers when it runs
(a training-mode BatchNorm's running statistics, `spectral_norm`'s power-iteration vectors
`weight_u`/`weight_v`, a parametrization's state). `untouched` forks the RNG, restores the grad
mode, and puts back every buffer, bit for bit, on every exit path (kernels such as
BatchNorm's update running statistics without moving the tensor's version counter, so every
buffer is copied back, not only those that look written).

PyTorch's default RNG is the whole process's (the grad mode is per thread), so these calls
run one at a time (`_CALL_LOCK`): concurrent calls from several threads wait for each other
and give the sequential results, and each restores the RNG state it found.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import nn

_CALL_LOCK = threading.RLock()
"""Held for the whole of each `untouched` body: the forked RNG is the whole process's."""


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
    buffers = [(b, b.detach().clone()) for b in model.buffers() if not b.is_meta]
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_grad_enabled(grad)
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)

