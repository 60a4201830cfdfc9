"""A fast path of shape propagation: a slow node's shape at the second batch size from fake
tensors instead of a second real run.

Values at the second batch size feed only shapes downstream, and a fake kernel (PyTorch's
`FakeTensorMode`) gives an op's output shape and dtype without its arithmetic, at 3-15 ms
per op whatever its size. A node whose first run took longer than `SHAPE_ONLY_AFTER_SECONDS`
gets its second value as zeros of the fake output's shape. The reference path runs every
node for real at both batch sizes; `FAKE_SHAPES` switches this path off, and the conversion
is the same either way (tests/test_frontend_fast_paths.py): the shapes are PyTorch's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.fx
from torch import nn

from .walker import call_node

FAKE_SHAPES = True
"""The switch: False runs every node for real at both batch sizes. Read once per conversion
(when its `FakeShapes` is made), so a conversion takes one path throughout."""

SHAPE_ONLY_AFTER_SECONDS = 0.02
"""A node whose run at the first batch size took longer gets its shape at the second batch
size from fake tensors; below this the real kernel is cheaper."""


class FakeShapes:
    """Fake-tensor outputs for one conversion (its `FakeTensorMode` is made on first use)."""

    __slots__ = ("_mode", "_on", "_after")

    def __init__(self):
        self._mode = None
        self._on, self._after = FAKE_SHAPES, SHAPE_ONLY_AFTER_SECONDS

    def takes(self, first_run_seconds: float) -> bool:
        """True when the path is on and a node's first run took this long."""
        return self._on and first_run_seconds > self._after

    def output(self, node: torch.fx.Node, env: Mapping[torch.fx.Node, Any],
               module: nn.Module | None) -> torch.Tensor | None:
        """Zeros of the shape and dtype of the node's output on the values in `env`, or None
        when fake tensors fail or the output is not one tensor: then the node runs for real."""
        try:
            if self._mode is None:
                from torch._subclasses.fake_tensor import FakeTensorMode
                self._mode = FakeTensorMode(allow_non_fake_inputs=True)
            mode = self._mode
            inputs = {n: mode.from_tensor(env[n]) if isinstance(env[n], torch.Tensor)
                      else env[n] for n in node.all_input_nodes}
            with mode:
                out = call_node(node, inputs, module, hooks=False)
        except Exception:  # an op without a fake kernel, or anything else: run it for real
            return None
        if not isinstance(out, torch.Tensor) or not all(isinstance(d, int) for d in out.shape):
            return None
        return torch.zeros(out.shape, dtype=out.dtype)
