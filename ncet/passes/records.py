"""The records a simplification pass returns: what it changed (nodes removed and added, the
constants it computed and how) or what it refused and why, and the pass itself as data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..ir import GraphIR


@dataclass(frozen=True, slots=True)
class ComputedConstant:
    """A constant a pass computed: in float64 with a carried error bound, rounded once to
    the network's dtype (to nearest), under a name no constant of the original graph has.

    Attributes:
        name: The new constant's name, or "<node>:scalar" for a node's scalar attribute.
        how: The formula, e.g. "conv1.weight * bn1.weight / sqrt(bn1.running_var + 1e-05)".
        dtype: The dtype it was rounded to.
        shape: Its shape.
        radius: float64, elementwise: |stored - exact real value of the formula| <= radius
            (the rounding to `dtype` plus the float64 computation's carried error).
    """

    name: str
    how: str
    dtype: str
    shape: tuple[int, ...]
    radius: torch.Tensor

    def to_dict(self) -> dict:
        return {"name": self.name, "how": self.how, "dtype": self.dtype,
                "shape": list(self.shape), "max_radius": float(self.radius.max())
                if self.radius.numel() else 0.0}


@dataclass(frozen=True, slots=True)
class Change:
    """One rewrite a pass made, or one it refused (`refused` says why; nothing changed).

    Attributes:
        pass_name: The pass.
        removed: The names of the nodes that went.
        added: The names of the nodes that came (a node that computes the value of a
            removed one keeps its name: `bn1` folded into `conv1` is the Conv2d `bn1`).
        constants: The constants computed, with how.
        note: One sentence on what was done, or why it was refused.
        refused: True when the pass left the nodes as they were.
    """

    pass_name: str
    removed: tuple[str, ...]
    added: tuple[str, ...]
    constants: tuple[ComputedConstant, ...] = ()
    note: str = ""
    refused: bool = False

    def __str__(self) -> str:
        if self.refused:
            return f"{self.pass_name}: refused at {', '.join(self.removed)}: {self.note}"
        text = (f"{self.pass_name}: removed {', '.join(self.removed) or 'nothing'}; "
                f"added {', '.join(self.added) or 'nothing'}")
        for c in self.constants:
            text += f"; computed {c.name} = {c.how} (float64, rounded once to {c.dtype})"
        return text + (f" ({self.note})" if self.note else "")

    def to_dict(self) -> dict:
        return {"pass": self.pass_name, "removed": list(self.removed),
                "added": list(self.added), "constants": [c.to_dict() for c in self.constants],
                "note": self.note, "refused": self.refused}


PassFunction = Callable[[GraphIR], tuple[GraphIR, list[Change]]]


@dataclass(frozen=True, slots=True)
class Pass:
    """A simplification pass as data: its name, what it rewrites, when it refuses, and the
    function that applies it everywhere it applies once.

    Attributes:
        name: Stable name, e.g. "fold_batchnorm".
        rewrite: What it does.
        refuses: When it leaves the graph as it is.
        bound: What it costs the certificate.
        run: GraphIR -> (GraphIR, changes).
    """

    name: str
    rewrite: str
    refuses: str
    bound: str
    run: PassFunction
