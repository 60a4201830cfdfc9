"""NCET: trace a PyTorch model into canonical GraphIR and prove the translation exact."""

from importlib import metadata as _metadata

from .conversion import convert, diagnose
from .errors import (
    ConversionError,
    GraphIRFormatError,
    NCETError,
    SupportBoundaryError,
    TraceError,
    UnsupportedOperatorError,
)
from .evaluate import evaluate
from .exactness import check_exactness
from .exactness_report import ExactnessEntry, ExactnessReport
from .io import load, save
from .ir import GraphIR, IRNode, Source
from .report import ConversionReport, Row

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
