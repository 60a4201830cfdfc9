"""The certificate: PyTorch's value at every node held to a certified floating-point bound
against the float64 reference (docs/exactness.md, docs/architecture.md).

Its public face is `check_exactness` and its report; the modules inside are internal.
"""

from .check import check_exactness
from .report import ExactnessEntry, ExactnessReport

__all__ = ["ExactnessEntry", "ExactnessReport", "check_exactness"]
