"""Static indexing: `x[index]` classified into GetItem or Slice in per-sample terms."""

from __future__ import annotations

from typing import Any

import torch

from ...errors import Rejection
from ..context import Mapped, NodeContext

_HINT = "keep the batch axis whole: index as x[:, ...]"


def getitem(ctx: NodeContext) -> Mapped:
    """Classify `x[index]`: GetItem when only integer selection remains per sample, else Slice."""
    x = ctx.args["input"]
    if not ctx.is_graph_tensor(x):
        what = f"node {x.name!r}" if isinstance(x, torch.fx.Node) else repr(x)
        raise Rejection("getitem-non-tensor", f"{what} is not a tensor computed from the inputs",
                        hint="index graph tensors only")
    index = ctx.args["index"]
    items = list(index) if isinstance(index, tuple) else [index]
    for item in items:
        _check_item(item)
    first = items[0] if items else Ellipsis
    if first is None or isinstance(first, int) or (isinstance(first, slice)
                                                    and not _is_full(first)):
        raise Rejection("batch-axis", f"index {_show(index)} selects from the batch axis",
                        hint=_HINT)
    shape = ctx.shape(x)
    entries = _expand(items, len(shape) + 1)
    batch = entries.pop(0) if entries else slice(None)
    if batch is None or not isinstance(batch, slice) or not _is_full(batch):
        raise Rejection("batch-axis", f"index {_show(index)} selects from the batch axis",
                        hint=_HINT)
    normalized = _normalize(entries, shape)
    op_type = "GetItem" if normalized and all(isinstance(e, int) for e in normalized) else "Slice"
    return Mapped(op_type, (x,), {"index": normalized})


def _check_item(item: Any) -> None:
    if item is None or item is Ellipsis:
        return
    if isinstance(item, int) and not isinstance(item, bool):
        return
    if isinstance(item, slice):
        for part in (item.start, item.stop, item.step):
            if isinstance(part, torch.fx.Node):
                raise Rejection("dynamic-argument", f"slice bound computed by node {part.name!r}",
                                hint="use static slice bounds")
            if part is not None and (isinstance(part, bool) or not isinstance(part, int)):
                raise Rejection("advanced-indexing", f"slice bound {part!r} is not an int")
        return
    raise Rejection("advanced-indexing", f"index {_show(item)} is advanced indexing "
                                         "(a tensor, list or bool)",
                    hint="use integers, slices, ... and None only")


def _expand(items: list[Any], rank: int) -> list[Any]:
    """Replace the Ellipsis (or the implicit trailing one) by full slices: one entry per axis,
    plus None for every inserted axis."""
    consuming = sum(1 for i in items if i is not None and i is not Ellipsis)
    if consuming > rank:
        raise Rejection("rank", f"{consuming} indices for a batched tensor of rank {rank}")
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise Rejection("unsupported-argument", "an index can have only one ellipsis")
    fill = [slice(None)] * (rank - consuming)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        return items[:at] + fill + items[at + 1:]
    return items + fill


def _is_full(item: slice) -> bool:
    return item.start in (None, 0) and item.stop is None and item.step in (None, 1)


def _normalize(entries: list[Any], shape: tuple[int, ...]) -> list[Any]:
    """Per-sample index: ints in range, slices as [start, stop, step], None for new axes;
    trailing whole-axis slices dropped."""
    out: list[Any] = []
    axis = 0
    for entry in entries:
        if entry is None:
            out.append(None)
            continue
        size = shape[axis]
        axis += 1
        if isinstance(entry, int):
            if not -size <= entry < size:
                raise Rejection("unsupported-argument",
                                f"index {entry} is out of range for an axis of size {size}")
            out.append(entry % size)
        else:
            if entry.step is not None and entry.step <= 0:
                raise Rejection("unsupported-argument", "slice step must be positive")
            start, stop, step = entry.indices(size)
            out.append([start, max(stop, start), step])
    while out and isinstance(out[-1], list) and out[-1][0] == 0 and out[-1][2] == 1 \
            and out[-1][1] == shape[_axis_of(out, len(out) - 1)]:
        out.pop()
    return out


def _axis_of(entries: list[Any], position: int) -> int:
    return sum(1 for e in entries[:position] if e is not None)


def _show(index: Any) -> str:
    if isinstance(index, tuple):
        return "[" + ", ".join(_show_item(i) for i in index) + "]"
    return "[" + _show_item(index) + "]"


def _show_item(item: Any) -> str:
    if isinstance(item, slice):
        parts = ["" if p is None else str(p) for p in (item.start, item.stop, item.step)]
        return ":".join(parts[:2] if item.step is None else parts)
    if item is Ellipsis:
        return "..."
    if isinstance(item, torch.fx.Node):
        return item.name
    return repr(item)
