"""Shape propagation for the conversion walk: every FX node run at the two temporary batch
sizes, so that per-sample shapes and batch preservation come from PyTorch itself."""

from __future__ import annotations

import copy
import math
import os
import time
from typing import Any

import torch
import torch.fx
from torch import nn

from ..errors import TraceError
from .trace import BATCH_SIZES, call_node, last_uses, make_example_inputs

SHAPE_ONLY_AFTER_SECONDS = 0.02
"""A node whose run at the first batch size took longer gets its shape at the second batch
size from fake tensors (about 3-15 ms per op here, whatever its size) instead of a second
real run; below this the real kernel is cheaper. The choice changes only the walk's speed:
the shapes are PyTorch's either way."""


EXAMPLE_MEMORY_SHARE = 0.5
"""Example inputs that would take more of the machine's physical memory are refused before
they are allocated (every node's values at both batch sizes come on top of them)."""

_SHAPES_HINT = ("give per-sample shapes without the batch axis: the model runs on batches of "
                "2 and 3 samples of them while it converts")


def _physical_memory() -> int | None:
    """This machine's physical memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


class ShapePropagation:
    """The values of every node at both batch sizes, each dropped after its last use.

    Values at the second batch size feed only shapes downstream, so a node whose first run
    was slow may get zeros of the shape fake tensors give (`SHAPE_ONLY_AFTER_SECONDS`).
    Training-mode modules, and modules of spellings outside the tables, run on a deep copy;
    modules run without their hooks (which are not part of the trace either).
    """

    def __init__(self, graph: torch.fx.Graph, input_shapes, dtype: torch.dtype):
        what = (f"the example inputs (per-sample shapes "
                f"{', '.join(str(list(s)) for s in input_shapes)} at batch sizes "
                f"{' and '.join(map(str, BATCH_SIZES))}, {dtype})")
        needed = sum(math.prod(s) for s in input_shapes) * sum(BATCH_SIZES) * dtype.itemsize
        memory = _physical_memory()
        if memory is not None and needed > memory * EXAMPLE_MEMORY_SHARE:
            raise TraceError("shape-propagation", f"{what} would take {needed / 2**30:.3g} GiB, "
                                                  f"more than {EXAMPLE_MEMORY_SHARE:.0%} of "
                                                  f"this machine's {memory / 2**30:.3g} GiB",
                             hint=_SHAPES_HINT)
        try:
            self.examples = [make_example_inputs(input_shapes, dtype, b, seed=b)
                             for b in BATCH_SIZES]
        except (RuntimeError, MemoryError) as exc:  # too large for PyTorch or the allocator
            message = str(exc).strip().splitlines() or [type(exc).__name__]
            raise TraceError("shape-propagation", f"{what} cannot be made: {message[0][:200]}",
                             hint=_SHAPES_HINT) from None
        self.envs: list[dict[torch.fx.Node, Any]] = [{} for _ in BATCH_SIZES]
        self._release = last_uses(graph)
        self._module_copies: dict[int, nn.Module] = {}
        self._fake_mode = None

    def set_input(self, node: torch.fx.Node, index: int) -> None:
        for env, example in zip(self.envs, self.examples):
            env[node] = example[index]

    def set_constant(self, node: torch.fx.Node, value: Any) -> None:
        for env in self.envs:
            env[node] = value

    def release(self, node: torch.fx.Node) -> None:
        """Drop the values whose last use is `node`."""
        for used in self._release.get(node, ()):
            for env in self.envs:
                env.pop(used, None)

    def run(self, node: torch.fx.Node, module: nn.Module | None, trusted: bool) -> list:
        """The node's outputs at both batch sizes (also kept for its users).

        Raises:
            Exception: Whatever the user's code raises on the example inputs (nothing is
                kept for the node then).
        """
        if module is not None and (module.training or not trusted):
            if id(module) not in self._module_copies:
                self._module_copies[id(module)] = copy.deepcopy(module)
            module = self._module_copies[id(module)]
        results = []
        try:
            started = time.perf_counter()
            for env in self.envs:
                result = None
                if results and time.perf_counter() - started > SHAPE_ONLY_AFTER_SECONDS:
                    result = self._shape_only(node, env, module)
                if result is None:
                    result = call_node(node, env, module, hooks=False)
                env[node] = result
                results.append(result)
        except Exception:
            for env in self.envs:
                env.pop(node, None)
            raise
        return results

    def _shape_only(self, node: torch.fx.Node, env: dict, module: nn.Module | None):
        """The node's output at this batch size from fake tensors: its shape and dtype,
        without the arithmetic, as zeros. None when that fails or the output is not one
        tensor: then it runs for real."""
        try:
            if self._fake_mode is None:
                from torch._subclasses.fake_tensor import FakeTensorMode
                self._fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
            mode = self._fake_mode
            inputs = {n: mode.from_tensor(env[n]) if isinstance(env[n], torch.Tensor)
                      else env[n] for n in node.all_input_nodes}
            with mode:
                out = call_node(node, inputs, module, hooks=False)
        except Exception:  # an op without a fake kernel, or anything else: run it for real
            return None
        if not isinstance(out, torch.Tensor) or not all(isinstance(d, int) for d in out.shape):
            return None
        return torch.zeros(out.shape, dtype=out.dtype)


def follows_batch(shapes: list[tuple[int, ...] | None]) -> bool:
    """True when each shape leads with its batch size and all share one per-sample shape."""
    first = shapes[0]
    if first is None or not first:
        return False
    for shape, batch in zip(shapes, BATCH_SIZES):
        if shape is None or not shape or shape[0] != batch or shape[1:] != first[1:]:
            return False
    return True
