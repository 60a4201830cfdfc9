"""The frontend: a PyTorch model traced with torch.fx, walked node by node and mapped onto
canonical GraphIR, or rejected with a reason (docs/architecture.md).

Its public face is `convert`, `diagnose` and their report; the modules inside are internal.
"""

from .conversion import convert, diagnose
from .report import ConversionReport, Row

__all__ = ["ConversionReport", "Row", "convert", "diagnose"]
