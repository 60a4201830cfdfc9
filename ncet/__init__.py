"""NCET: trace a PyTorch model into canonical GraphIR and prove the translation exact."""

from importlib import metadata as _metadata

from .errors import (
    ConversionError,
    GraphIRFormatError,
    NCETError,
    SupportBoundaryError,
    TraceError,
    UnsupportedOperatorError,
)
from .evaluate import evaluate
from .exactness.check import check_exactness
from .exactness.report import ExactnessEntry, ExactnessReport
from .format.file import load, save
from .frontend.conversion import convert, diagnose
from .frontend.report import ConversionReport, Row
from .ir import GraphIR, IRNode, Source

try:
    __version__ = _metadata.version("ncet")
    """The installed distribution's version ("unknown" when run from a bare checkout)."""
except _metadata.PackageNotFoundError:
    __version__ = "unknown"

__all__ = [
    "ConversionError", "ConversionReport", "ExactnessEntry", "ExactnessReport", "GraphIR",
    "GraphIRFormatError", "IRNode", "NCETError", "Row", "Source", "SupportBoundaryError",
    "TraceError", "UnsupportedOperatorError", "check_exactness", "convert", "diagnose",
    "evaluate", "load", "save",
]
