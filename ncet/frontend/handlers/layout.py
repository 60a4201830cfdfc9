"""Handlers for operators that move, merge or reduce axes (Flatten, Reshape, Concat, ...)."""

from __future__ import annotations

from typing import Any

import torch

from ...errors import Rejection
from ..context import Mapped, NodeContext


def _dims(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list, torch.Size)) else [value]


def flatten(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    rank = len(ctx.shape(x))
    if ctx.module is not None:
        start, end = ctx.module.start_dim, ctx.module.end_dim
    else:
        start, end = ctx.static("start_dim"), ctx.static("end_dim")
    start, end = ctx.axis(start, rank), ctx.axis(end, rank)
    if end < start:
        raise Rejection("unsupported-argument", "flatten's start_dim comes after its end_dim")
    return Mapped("Flatten", (x,), {"start_dim": start, "end_dim": end})


def reshape(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    shape = ctx.static("shape")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in _dims(shape)):
        raise Rejection("unsupported-argument", f"shape {shape!r} must be static integers",
                        hint="x.view(dtype) is not supported; give a shape")
    return Mapped("Reshape", (x,), {"shape": list(ctx.out_shape)})


def squeeze(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    dim = ctx.static("dim")
    if dim is None or _dims(dim) == []:
        raise Rejection("squeeze-without-dim",
                        "squeeze without dim removes every size-1 axis, the batch axis too "
                        "when the batch has one sample",
                        hint="name the dimensions, e.g. x.squeeze(-1)")
    for d in _dims(dim):
        ctx.axis(d, len(ctx.shape(x)))
    return Mapped("Reshape", (x,), {"shape": list(ctx.out_shape)})


def unsqueeze(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    ctx.axis(ctx.static("dim"), len(ctx.shape(x)), insert=True)
    return Mapped("Reshape", (x,), {"shape": list(ctx.out_shape)})


def permute(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    rank = len(ctx.shape(x))
    dims = _dims(ctx.static("dims"))
    if len(dims) != rank + 1:
        raise Rejection("rank", f"permute got {len(dims)} dims for a tensor of rank {rank + 1}")
    if not (isinstance(dims[0], int) and dims[0] % (rank + 1) == 0):
        raise Rejection("batch-axis", f"permute{tuple(dims)} moves the batch axis",
                        hint="keep dimension 0 first, e.g. x.permute(0, 2, 1)")
    perm = [ctx.axis(d, rank) for d in dims[1:]]
    if sorted(perm) != list(range(rank)):
        raise Rejection("unsupported-argument", f"permute{tuple(dims)} is not a permutation")
    return Mapped("Permute", (x,), {"perm": perm})


def transpose(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    rank = len(ctx.shape(x))
    a, b = sorted((ctx.axis(ctx.static("dim0"), rank), ctx.axis(ctx.static("dim1"), rank)))
    return Mapped("Transpose", (x,), {"dim0": a, "dim1": b})


def concat(ctx: NodeContext) -> Mapped:
    if "out" in ctx.args:
        ctx.require_default("out", None, code="out-argument")
    tensors = ctx.args["tensors"]
    if not isinstance(tensors, (tuple, list)) or not tensors:
        raise Rejection("dynamic-argument", "the tensors to concatenate must be a static "
                                            "non-empty tuple or list")
    for t in tensors:
        if not ctx.is_graph_tensor(t):
            what = f"node {t.name!r}" if isinstance(t, torch.fx.Node) else repr(t)
            raise Rejection("concat-constant", f"{what} is not a tensor computed from the inputs",
                            hint="a fixed tensor has no batch axis; expand it inside a "
                                 "supported operation instead")
    ranks = {len(ctx.shape(t)) for t in tensors}
    if len(ranks) != 1:
        raise Rejection("rank", "concatenated tensors differ in rank")
    axis_name = "axis" if "axis" in ctx.args else "dim"
    axis = ctx.axis(ctx.static(axis_name), ranks.pop())
    return Mapped("Concat", tuple(tensors), {"axis": axis})


def mean(ctx: NodeContext) -> Mapped:
    if "out" in ctx.args:
        ctx.require_default("out", None, code="out-argument")
    if ctx.args.get("dtype") is not None:
        raise Rejection("mean-dtype", f"dtype={ctx.args['dtype']!r} conversion is not supported",
                        hint="convert the input's dtype in the model's parameters instead")
    x = ctx.graph_tensor("input")
    dim = ctx.static("dim")
    if dim is None or _dims(dim) == []:
        raise Rejection("mean-without-dim",
                        "mean without explicit dims averages over the batch axis too",
                        hint="name the dimensions, e.g. x.mean(dim=(2, 3))")
    axes = sorted({ctx.axis(d, len(ctx.shape(x))) for d in _dims(dim)})
    keepdim = ctx.static("keepdim")
    if not isinstance(keepdim, bool):
        raise Rejection("unsupported-argument", f"keepdim={keepdim!r} must be a bool")
    return Mapped("ReduceMean", (x,), {"axes": axes, "keepdim": keepdim})
