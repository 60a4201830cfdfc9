"""Memory the checker reuses: scratch buffers for temporaries, and absolute constants
computed when first asked for (docs/exactness.md §4.5). Neither changes a number."""

from __future__ import annotations

import math

import torch

_F64 = torch.float64


class Scratch:
    """Named buffers, grown to the largest node value and reused by every node and chunk for
    temporaries (absolute values, local bounds, comparisons): no fresh chunk-sized
    allocations for them, so they are cache-warm and the heap does not fragment."""

    def __init__(self):
        self.flat: dict[tuple[str, torch.dtype], torch.Tensor] = {}
        self.views: dict[tuple[str, torch.dtype, tuple[int, ...]], torch.Tensor] = {}

    def get(self, slot: str, shape, dtype: torch.dtype = _F64) -> torch.Tensor:
        """A tensor of `shape` and `dtype` in the buffer `slot` (its contents undefined)."""
        key = (slot, dtype, tuple(shape))
        view = self.views.get(key)
        if view is None:
            n = math.prod(shape)
            buffer = self.flat.get((slot, dtype))
            if buffer is None or buffer.numel() < n:
                buffer = self.flat[slot, dtype] = torch.empty(n, dtype=dtype)
                self.views = {k: v for k, v in self.views.items() if k[:2] != (slot, dtype)}
            view = self.views[key] = buffer[:n].view(shape)
        return view

    def __call__(self, shape) -> tuple[torch.Tensor, torch.Tensor]:
        """The two buffers `CheckStats.update` works in."""
        return self.get("work", shape), self.get("spare", shape)


class AbsoluteConstants(dict):
    """|c| of each float64 constant, computed when a bound rule first asks for it (the
    float32 route of Linear/Conv2d never needs its weight's)."""

    def __init__(self, consts: dict[str, torch.Tensor]):
        super().__init__()
        self.consts = consts

    def __missing__(self, name: str) -> torch.Tensor:
        value = self[name] = self.consts[name].abs()
        return value
