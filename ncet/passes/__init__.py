"""Certified simplification: passes that fold BatchNorm and input normalisation into the
layers beside them, merge affine layers and drop identities, each computed constant rounded
once from float64, and a graph-to-graph certificate that the simpler graph computes what
the original computes (docs/simplification.md)."""

from .pass_table import PASSES
from .records import Change, ComputedConstant, Pass
from .region_bound import simplification_bound, widen_margin
from .report import SimplificationReport, Violation
from .simplification import simplify

__all__ = ["PASSES", "Change", "ComputedConstant", "Pass", "SimplificationReport",
           "Violation", "simplify", "simplification_bound",
           "widen_margin"]
