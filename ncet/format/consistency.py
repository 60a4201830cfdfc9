"""Checking that a GraphIR means what it declares: its rules (`ncet.format.meaning_rules`),
its budget (`ncet.format.budget`), then the shapes its nodes compute at two batch sizes."""

from __future__ import annotations

import collections

import torch

from ..errors import GraphIRFormatError
from ..evaluate import EVALUATORS
from ..ir import GraphIR, IRNode
from .budget import COST_RULES, ELEMENT_BYTES, Budget, check_budget, touch_cost
from .meaning_rules import check_rules, constants_of

BATCH_SIZES = (1, 2)
"""The batch sizes of the check's two runs: a node whose result does not follow the batch
size (it moves the batch axis or mixes samples) gives another shape at one of them."""


def check_consistency(ir: GraphIR, budget: Budget | None = None) -> None:
    """Check every attribute and dtype, then run the graph and compare every node's result
    with what it declares.

    The attribute values are checked against `ncet.ir.ATTR_RULES`, `INPUT_RANKS` and the
    rules that relate attributes to each other and to shapes; each node's dtype against the
    dtype PyTorch gives its op from its inputs' and constants' dtypes (all of them in
    `ncet.format.meaning_rules.check_rules`). Then the graph runs
    twice, in float64 at batch sizes 1 and 2: each cheap node for real, each node with large
    temporary buffers or much work on meta tensors (`REAL_SCRATCH_BYTES`, `REAL_WORK`), so
    no kernel's scratch fragments the heap and no loop over groups or windows runs long.

    Args:
        ir: A GraphIR, typically one just read from a file.
        budget: When given, the runs' memory and work are bounded first (`ncet.format.budget`),
            and a graph over the budget is refused before anything is allocated.

    Raises:
        GraphIRFormatError: An attribute value, dtype or declared shape contradicts the
            graph, a node cannot be computed from its inputs, attributes and constants, or the
            graph is over the budget. The message names the node.
    """
    check_rules(ir)
    if budget is not None:
        check_budget(ir, budget, BATCH_SIZES)
    uses = collections.Counter(n for node in ir.nodes for n, _ in constants_of(ir, node))
    widened = {n: None for n, count in uses.items() if count > 1}  # shared: widened once
    with torch.no_grad():
        for batch in BATCH_SIZES:
            _run(ir, batch, widened)


# --- The runs ------------------------------------------------------------------------------


REAL_SCRATCH_BYTES = 8 * 2**10
REAL_WORK = 2**24
"""A node whose temporary buffers (`ncet.format.budget`'s estimate) or work would exceed these, or a
grouped convolution (PyTorch's CPU kernel loops over the groups), runs on meta tensors, and
its result is zeros of the shape PyTorch gives. Every other node runs for real, which is
much faster than PyTorch's meta kernels (10-500 us a node), and the buffers it frees are too
small to fragment the heap by more than a small multiple of the file."""


def _run(ir: GraphIR, batch: int, widened: dict[str, torch.Tensor | None]) -> None:
    """Run every node at `batch` and compare its result with the declared shape (`widened`:
    the constants several nodes share, in float64, made once for both runs; any other is
    widened for its node and dropped after it)."""
    env: dict[str, torch.Tensor] = {}
    shapes = {name: tuple(t.shape) for name, t in ir.constants.items()}
    for node in ir.nodes:
        if node.op_type == "Output":
            continue
        if node.op_type == "Input":
            value = _zeros((batch, *node.shape), node)
        else:
            inputs = [env[i] for i in node.inputs]
            cost = COST_RULES.get(node.op_type, touch_cost)(
                node, [tuple(x.shape) for x in inputs], shapes)
            meta = cost.scratch * ELEMENT_BYTES > REAL_SCRATCH_BYTES or cost.work > REAL_WORK \
                or (node.op_type == "Conv2d" and node.attrs["groups"] > 1)
            consts = {n: _widened(n, t, meta, widened) for n, t in constants_of(ir, node)}
            try:
                value = EVALUATORS[node.op_type](
                    node, [x.to("meta") for x in inputs] if meta else inputs, consts)
            except Exception as exc:  # any failure of the op on these shapes is the file's
                again = "" if batch == BATCH_SIZES[0] else (
                    f" at batch size {batch} (it can at batch size {BATCH_SIZES[0]}: it "
                    "mixes samples)")
                raise GraphIRFormatError(
                    f"node {node.name!r} ({node.op_type}) cannot be computed from its inputs, "
                    f"attributes and constants{again}: {exc}".split("\n")[0][:400]) from None
            if meta and isinstance(value, torch.Tensor) and tuple(value.shape) == (
                    batch, *node.shape):
                value = _zeros(tuple(value.shape), node)
        _compare(node, value, batch)
        env[node.name] = value


def _widened(name: str, tensor: torch.Tensor, meta: bool, shared: dict) -> torch.Tensor:
    """A constant in float64: on meta tensors (no copy) for a node that runs there, for real
    otherwise, made once if several nodes share it."""
    if meta:
        return tensor.to(device="meta", dtype=torch.float64)
    if name not in shared:
        return tensor.to(torch.float64)
    if shared[name] is None:
        shared[name] = tensor.to(torch.float64)
    return shared[name]


def _zeros(shape: tuple[int, ...], node: IRNode) -> torch.Tensor:
    """A real float64 tensor of zeros (its size bounded by the budget, unless the caller
    raised the limits beyond what this machine can allocate)."""
    try:
        return torch.zeros(shape, dtype=torch.float64)
    except (RuntimeError, MemoryError) as exc:
        raise GraphIRFormatError(
            f"node {node.name!r:.80} ({node.op_type}): a tensor of shape {_shape_text(shape)} "
            f"cannot be allocated here ({str(exc).splitlines()[0][:120]}); the limits given "
            "to load exceed this machine, or use verify=False") from None


def _compare(node: IRNode, value, batch: int) -> None:
    where = f"node {node.name!r} ({node.op_type})"
    if not isinstance(value, torch.Tensor):
        raise GraphIRFormatError(f"{where} computes a {type(value).__name__}, not a tensor")
    shape = tuple(value.shape)
    if shape == (batch, *node.shape):
        return
    if shape[:1] != (batch,):
        raise GraphIRFormatError(
            f"{where} declares per-sample shape {list(node.shape)}, so shape "
            f"{[batch, *node.shape]} at batch size {batch}, but computes a tensor of shape "
            f"{_shape_text(shape)}, whose leading size is not the batch size: it moves, merges or "
            "mixes the batch axis")
    later = "" if batch == BATCH_SIZES[0] else (
        f" at batch size {batch} (at batch size {BATCH_SIZES[0]} it computes the declared "
        "shape: its per-sample shape depends on the batch size)")
    ranks = "" if len(shape) - 1 == len(node.shape) else \
        f" (rank {len(node.shape)} declared, {len(shape) - 1} computed)"
    raise GraphIRFormatError(f"{where} declares per-sample shape {_shape_text(node.shape)} but "
                             f"computes {_shape_text(shape[1:])}{ranks}{later}")


def _shape_text(shape, most: int = 16) -> str:
    """A shape as a list, its middle elided past `most` entries."""
    if len(shape) <= most:
        return str(list(shape))
    return f"[{', '.join(map(str, shape[:most // 2]))}, ... ({len(shape)} entries), " \
           f"{', '.join(map(str, shape[-2:]))}]"


assert len(set(BATCH_SIZES)) == 2 and min(BATCH_SIZES) >= 1
