"""Shape propagation for the conversion walk: every FX node run at the two temporary batch
sizes, so that per-sample shapes and batch preservation come from PyTorch itself; each node's
outcome is one `NodeRecord`."""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import torch
import torch.fx
from torch import nn

from ..errors import Rejection, TraceError
from .fake_shapes import FakeShapes
from .trace import BATCH_SIZES, make_example_inputs
from .walker import call_node


class NodeRecord(NamedTuple):
    """Everything the conversion walk knows of one FX node's value (immutable; a NamedTuple
    rather than a frozen dataclass because one is made per node of every conversion, and on
    Python 3.11 it costs a third as much).

    Attributes:
        kind: "graph" (depends on the model inputs) or "const" (fixed).
        values: The node's value at each of `BATCH_SIZES` (empty when it was not run).
        is_tensor: The value is a tensor (also assumed for a node that was not run).
        shape: Per-sample for graph tensors, whole for constants; None when unknown.
        dtype: The tensor's dtype, None when unknown.
        failed: It, or a node it depends on, could not be run: its shape is unknown.
        failure: Why this very node failed (None when it ran, or an input failed).
        constant: For a get_attr node's tensor, the name of its lifted constant.
    """

    kind: str
    values: tuple = ()
    is_tensor: bool = False
    shape: tuple[int, ...] | None = None
    dtype: torch.dtype | None = None
    failed: bool = False
    failure: Rejection | None = None
    constant: str | None = None


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
    """Runs the nodes of one conversion at both batch sizes and records what they give.

    The batch rule is here: a graph tensor's leading size must follow the batch size and its
    per-sample shape must not change with it (`follows_batch`). A slow node may get its
    second-batch value from fake tensors (ncet/frontend/fake_shapes.py). Training-mode
    modules, and modules of spellings outside the tables, run on a deep copy; modules run
    without their hooks (which are not part of the trace either).
    """

    def __init__(self, input_shapes, dtype: torch.dtype):
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
        self.input_shapes = input_shapes
        self.dtype = dtype
        self._module_copies: dict[int, nn.Module] = {}
        self._fake = FakeShapes()

    def input(self, index: int) -> NodeRecord:
        """The record of the model's input number `index`."""
        return NodeRecord("graph", tuple(example[index] for example in self.examples), True,
                          self.input_shapes[index], self.dtype)

    def record(self, node: torch.fx.Node, records: Mapping[torch.fx.Node, NodeRecord],
               module: nn.Module | None, trusted: bool, run: bool) -> NodeRecord:
        """Run a call_* node at both batch sizes on its inputs' `records` and record it. A
        node that must not `run`, or whose input failed, is recorded as failed (unrun), so
        its users are not run either."""
        kind, failed = "const", not run
        for n in node.all_input_nodes:
            value = records[n]
            failed = failed or value.failed
            if value.kind == "graph":
                kind = "graph"
        if failed:
            return NodeRecord(kind, (), True, failed=True)
        try:  # the model's own warnings are silenced for the whole walk (see canonicalize)
            results = self._run(node, records, module, trusted)
        except Exception as exc:  # any failure of the user's code on the example inputs
            return NodeRecord(kind, (), True, failed=True, failure=Rejection(
                "shape-propagation", f"running the traced graph on example inputs failed "
                                     f"here: {type(exc).__name__}: {_first_line(exc)}",
                hint="check the per-sample input shapes given to convert()"))
        first = results[0]
        if not isinstance(first, torch.Tensor):
            return NodeRecord(kind, results)
        if kind == "const":
            return NodeRecord(kind, results, True, tuple(first.shape), first.dtype)
        shapes = [tuple(r.shape) if isinstance(r, torch.Tensor) else None for r in results]
        if not follows_batch(shapes):
            return NodeRecord(kind, (), True, None, first.dtype, failed=True, failure=Rejection(
                "batch-not-preserved",
                f"the output shape {list(shapes[0])} at batch size {BATCH_SIZES[0]} and "
                f"{list(shapes[1])} at batch size {BATCH_SIZES[1]}: the leading size does not "
                "follow the batch size, or the per-sample shape changes with it",
                hint="keep the batch axis first and whole, e.g. x.flatten(1) instead of "
                     "x.view(-1)"))
        return NodeRecord(kind, results, True, shapes[0][1:], first.dtype)

    def _run(self, node: torch.fx.Node, records: Mapping[torch.fx.Node, NodeRecord],
             module: nn.Module | None, trusted: bool) -> tuple:
        """The node's outputs at both batch sizes.

        Raises:
            Exception: Whatever the user's code raises on the example inputs.
        """
        if module is not None and (module.training or not trusted):
            if id(module) not in self._module_copies:
                self._module_copies[id(module)] = copy.deepcopy(module)
            module = self._module_copies[id(module)]
        started = time.perf_counter()
        results = [call_node(node, _AtBatch(records, 0), module, hooks=False)]
        fake = self._fake.takes(time.perf_counter() - started)
        for index in range(1, len(BATCH_SIZES)):
            env = _AtBatch(records, index)
            result = self._fake.output(node, env, module) if fake else None
            results.append(call_node(node, env, module, hooks=False) if result is None
                           else result)
        return tuple(results)


class _AtBatch:
    """The values of the records at one batch size, as `call_node` reads an environment."""

    __slots__ = ("_records", "_index")

    def __init__(self, records: Mapping[torch.fx.Node, NodeRecord], index: int):
        self._records, self._index = records, index

    def __getitem__(self, node: torch.fx.Node) -> Any:
        return self._records[node].values[self._index]


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def follows_batch(shapes: list[tuple[int, ...] | None]) -> bool:
    """True when each shape leads with its batch size and all share one per-sample shape."""
    first = shapes[0]
    if first is None or not first:
        return False
    for shape, batch in zip(shapes, BATCH_SIZES):
        if shape is None or not shape or shape[0] != batch or shape[1:] != first[1:]:
            return False
    return True
