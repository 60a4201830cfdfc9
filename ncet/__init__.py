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


def to_onnx(ir, path=None, *, profile="canonical", batch=None, opset=None):
    """Write `ir` as an ONNX model, one ONNX node (or a small documented pattern) per IR node.

    Needs the `onnx` extra (`pip install ncet[onnx]`); `import ncet` does not import onnx.
    Constants become initializers with the same bytes, static shapes become int64
    initializers, each node's doc_string carries its provenance, and the model's
    metadata_props carry the NCET and torch versions and the sha256 of the saved GraphIR.
    The same GraphIR gives the same bytes. See docs/export.md.

    Args:
        ir: The graph, e.g. from `convert`.
        path: If given, the model is also written there (atomically).
        profile: "canonical" (the natural ONNX spelling of each op_type).
        batch: None for a symbolic batch axis "N", or a fixed positive batch size.
        opset: The ONNX opset of the default domain (18 or later); None for the tested one,
            `ncet.export.DEFAULT_OPSET` (21).

    Returns:
        The onnx.ModelProto.

    Raises:
        ncet.export.ExportError: A node the profile cannot express exactly (the message names
            the node and the reason).
        ValueError: An unknown profile, a batch that is not a positive int, or an opset out
            of range.
        TypeError: `ir` is not a GraphIR.
        ImportError: onnx is not installed.

    Example:
        >>> model = ncet.to_onnx(ncet.convert(net, (3, 32, 32)), "net.onnx")
    """
    from .export import to_onnx as export

    options = {} if opset is None else {"opset": opset}
    return export(ir, path, profile=profile, batch=batch, **options)


__all__ = [
    "ConversionError", "ConversionReport", "ExactnessEntry", "ExactnessReport", "GraphIR",
    "GraphIRFormatError", "IRNode", "NCETError", "Row", "Source", "SupportBoundaryError",
    "TraceError", "UnsupportedOperatorError", "check_exactness", "convert", "diagnose",
    "evaluate", "load", "save", "to_onnx",
]
