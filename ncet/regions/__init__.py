"""Regions: certified bounds over a whole input region. Bound propagation (CROWN-style linear
relaxations over NCET's operator set) and the float margin built on it: `float_margin`
bounds |float32 - exact| for every input of a region, `tighten` grows a property's unsafe
set by it (docs/margins.md)."""

from .margin import float_margin
from .margin_record import Margin
from .tightening import tighten

__all__ = ["Margin", "float_margin", "tighten"]
