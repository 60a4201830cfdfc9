"""ONNX, both ways: GraphIR written as ONNX for the tools that read it (`to_onnx`,
docs/export.md) and ONNX files read into GraphIR (`from_onnx`, docs/onnx-import.md).

Its public face is `to_onnx`, `ExportError`, `PROFILES` (name -> `Profile`), `Profile`,
`VERIFIER_OPS`, `DEFAULT_OPSET`, `from_onnx`, `diagnose_onnx` and `ONNXImportError`; the
modules inside are internal. Names that need onnx import it when first used (the `onnx`
extra); `import ncet` does not, and `ONNXImportError` never needs it.
"""

import importlib

from .import_errors import IMPORT_REASONS, ONNXImportError

_LAZY = {"ExportError": ".builder", "DEFAULT_OPSET": ".model", "to_onnx": ".model",
         "PROFILES": ".profiles", "VERIFIER_OPS": ".profiles", "Profile": ".profiles",
         "from_onnx": ".importer", "diagnose_onnx": ".importer"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DEFAULT_OPSET", "ExportError", "IMPORT_REASONS", "ONNXImportError", "PROFILES",
           "Profile", "VERIFIER_OPS", "diagnose_onnx", "from_onnx", "to_onnx"]
