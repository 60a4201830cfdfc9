"""The simplification passes as data: one record per pass with its name, what it rewrites,
when it refuses, what it costs the certificate, and its function (docs/simplification.md
is this table in prose)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .folds import fold_batchnorm, fold_input_normalisation, merge_affine_layers
from .records import Pass
from .tidying import collapse_reshapes, merge_elementwise, remove_identities

_EXACT = "none: no value changes, no constant is computed"
_FOLDED = ("each computed constant's radius |stored - exact| (its rounding to the dtype plus "
           "its float64 error), carried to the outputs")

PASSES: Mapping[str, Pass] = MappingProxyType({p.name: p for p in (
    Pass("remove_identities",
         "drops Identity and any Reshape, Flatten, Permute or Transpose that leaves its input "
         "as it is; readers read the input",
         "the node is returned and its input is a graph input or returned too",
         _EXACT, remove_identities),
    Pass("collapse_reshapes",
         "a Reshape or Flatten read only by another Reshape or Flatten: one Reshape to the "
         "last shape", "never", _EXACT, collapse_reshapes),
    Pass("merge_elementwise",
         "x + c1 + c2, x - c1 + c2: one x + c; x * c1 * c2, x / c1 / c2, x * c1 / c2: one "
         "x * c or x / c (c a tensor constant of the node's dtype)",
         "alpha != 1, c - x or c / x; constants that would widen the value; a merged "
         "divisor below the smallest normal", _FOLDED, merge_elementwise),
    Pass("fold_input_normalisation",
         "an input's elementwise affine chain (ElementwiseAffine by constants, BatchNorm, "
         "with Flatten/Reshape/Permute/Transpose between) into the Linear or Conv2d it reaches: "
         "W' = W a, b' = b + W s for y = a x + s",
         "a value of the chain read elsewhere; the chain does not reach a Linear/Conv2d; a "
         "scale or shift not constant along the axes the layer does not sum over per input; "
         "a shift before a Conv2d with zero padding (the padded border would need the "
         "shifted value)", _FOLDED, fold_input_normalisation),
    Pass("fold_batchnorm",
         "a BatchNorm after a Conv2d or Linear that only it reads: W' = W s, b' = (b - mean) "
         "s + beta with s = gamma / sqrt(var + eps), per output channel",
         "the layer's value is read elsewhere or returned; the BatchNorm's channel axis is not "
         "the layer's output axis; dtypes differ", _FOLDED, fold_batchnorm),
    Pass("merge_affine_layers",
         "Linear then Linear: W = W2 W1, b = W2 b1 + b2; a Linear or Conv2d then a scale or "
         "shift per output channel (ElementwiseAffine): folded into the layer",
         "the first value is read elsewhere or returned; the scale or shift varies within an "
         "output channel; dtypes differ", _FOLDED, merge_affine_layers),
)})
"""Every pass by name, in the order `simplify` runs them (repeated until none applies)."""
