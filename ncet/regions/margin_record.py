"""The `Margin` record: what `float_margin` proved about a network over an input region."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True, eq=False)
class Margin:
    """A certified float margin: for every input x of the region and every output element j,
    |f_float(x)_j - f_exact(x)_j| <= eps[j], where f_exact is the GraphIR's real-valued
    meaning and f_float the network run in its own dtype (float32) by any kernel inside the
    certificate's arithmetic model (any summation order, FMA, flush-to-zero), PyTorch's and
    onnxruntime's alike (docs/margins.md).

    Outputs are numbered as VNN-LIB numbers them: every output node flattened row-major, in
    the GraphIR's output order (Y_0 .. Y_(m-1)).

    Attributes:
        eps: float64, shape (m,): the bound per output element (the largest over the boxes).
        lower: float64, shape (m,): a certified lower bound of the exact output over the
            region.
        upper: float64, shape (m,): likewise an upper bound.
        contributions: IR node name -> float64 (m,): the part of eps that node's own
            rounding contributes ("<input rounding>" for the input's rounding to its dtype);
            they add up to eps before the final rounding up.
        unstable: ReLU/LeakyReLU/MaxPool2d node name -> (elements whose float or exact
            input may change sign over the region, elements), the largest over the pieces.
        boxes: How many boxes the region had.
        pieces: How many sub-boxes were bounded after splitting.
        dtype: The precision the network computes in ("float32").
        input_rounding: Whether eps also covers the input's rounding to `dtype`.
        arithmetic: The arithmetic model the bound holds under, in words.
        seconds: Wall time of the computation.
    """

    eps: torch.Tensor
    lower: torch.Tensor
    upper: torch.Tensor
    contributions: dict[str, torch.Tensor] = field(default_factory=dict)
    unstable: dict[str, tuple[int, int]] = field(default_factory=dict)
    boxes: int = 1
    pieces: int = 1
    dtype: str = "float32"
    input_rounding: bool = False
    arithmetic: str = ""
    seconds: float = 0.0

    @property
    def num_outputs(self) -> int:
        """m, the number of output elements."""
        return int(self.eps.numel())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every tensor as a list of floats."""
        return {"eps": self.eps.tolist(), "lower": self.lower.tolist(),
                "upper": self.upper.tolist(),
                "contributions": {k: v.tolist() for k, v in self.contributions.items()},
                "unstable": {k: list(v) for k, v in self.unstable.items()},
                "boxes": self.boxes, "pieces": self.pieces, "dtype": self.dtype,
                "input_rounding": self.input_rounding, "arithmetic": self.arithmetic,
                "seconds": self.seconds}

    def summary(self, property=None, network=None) -> str:
        """A few lines: the largest eps, what the margin shows of `property` (given the
        Property it was computed for: does unsat certainly hold in float32, by a sufficient
        interval check?), the largest share of eps, the unstable neurons, the input rounding
        and the arithmetic model (`ncet.render.margin_summary`; `network`, the GraphIR,
        names the nodes' op_types)."""
        from ..render.margin_section import margin_summary

        return margin_summary(self, property, network)

    def _repr_html_(self) -> str:
        """The notebook display: the headline, eps per output, the shares of eps and the
        unstable neurons (`ncet.render.margin_repr_html`; `ncet.widgets.MarginView` adds
        the property's rows and the figure)."""
        from ..render.margin_section import margin_repr_html

        return margin_repr_html(self)

    def __repr__(self) -> str:
        worst = float(self.eps.max()) if self.eps.numel() else 0.0
        return (f"Margin({self.num_outputs} outputs, max eps {worst:.3g}, {self.boxes} "
                f"box{'es' * (self.boxes != 1)}, {self.pieces} piece"
                f"{'s' * (self.pieces != 1)}, {self.dtype})")
