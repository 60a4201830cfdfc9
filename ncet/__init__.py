"""NCET: trace a PyTorch model into canonical GraphIR and prove the translation exact."""

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

__all__ = [
    "ConversionError", "ConversionReport", "ExactnessEntry", "ExactnessReport", "GraphIR",
    "GraphIRFormatError", "IRNode", "NCETError", "Row", "Source", "SupportBoundaryError",
    "TraceError", "UnsupportedOperatorError", "check_exactness", "convert", "diagnose",
    "evaluate", "load", "save",
]
