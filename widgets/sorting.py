"""Sort orders of the mapping table's columns, computed once per column as dense ranks, so
sorting the rows that pass the filters is one vectorised, stable argsort."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

STATUS_ORDER = ("mapped", "lifted", "unsupported", "boundary", "skipped")
"""The statuses in the order the status filter lists them and the status column sorts."""

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple:
    """A key that sorts digit runs by value: "relu_2" before "relu_10"; case-insensitive."""
    # re.split with one group puts the digit runs at the odd positions; str.isdigit would
    # also take "²", which int() refuses
    return tuple(int(p) if i % 2 else p.lower() for i, p in enumerate(_DIGITS.split(text)))


def shape_key(text: str) -> tuple:
    """A shape's key: no shape first, then by number of elements, then by its sizes."""
    if not text:
        return (-1,)
    sizes = json.loads(text)
    return (int(np.prod(sizes, dtype=np.int64)), len(sizes), *sizes)


def status_key(text: str) -> tuple:
    """A status's key: the order of `STATUS_ORDER`, unknown statuses last by name."""
    return (STATUS_ORDER.index(text), "") if text in STATUS_ORDER else (len(STATUS_ORDER), text)


SORT_RULES: dict[str, Callable[[str], tuple]] = {
    "shape": shape_key,
    "status": status_key,
}
"""How a column's values sort, where not by `natural_key`."""


def dense_ranks(keys: Sequence) -> np.ndarray:
    """Ranks of `keys` (equal keys share a rank, ranks count up from 0 without gaps)."""
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ranks = np.empty(len(keys), dtype=np.int64)
    rank, previous = -1, object()
    for i in order:
        if keys[i] != previous:
            rank, previous = rank + 1, keys[i]
        ranks[i] = rank
    return ranks


def column_ranks(frame: pd.DataFrame, column: str) -> np.ndarray:
    """The dense ranks of one column of `widgets.frames.mapping_frame`, by its `SORT_RULES`
    (natural order by default). Each distinct value is keyed once."""
    rule = SORT_RULES.get(column, natural_key)
    codes, values = pd.factorize(frame[column], sort=False)
    return dense_ranks([rule(v) for v in values.tolist()])[codes]


def ordered(positions: np.ndarray, ranks: np.ndarray | None, ascending: bool) -> np.ndarray:
    """`positions` (ascending graph positions) sorted by `ranks`, ties in graph order; with
    `ranks` None, by graph position itself.

    Example:
        >>> ordered(np.array([0, 1, 2]), np.array([2, 0, 1]), ascending=False)
        array([0, 2, 1])
    """
    if ranks is None:
        return positions if ascending else positions[::-1]
    keys = ranks[positions]
    return positions[np.argsort(keys if ascending else -keys, kind="stable")]
