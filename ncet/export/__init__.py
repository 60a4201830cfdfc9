"""Export: GraphIR written as ONNX for the tools that read it (docs/export.md).

Its public face is `to_onnx`, `ExportError`, `PROFILES` and `DEFAULT_OPSET`; the modules
inside are internal. Importing it imports onnx (the `onnx` extra); `import ncet` does not.
"""

from .builder import ExportError
from .model import DEFAULT_OPSET, PROFILES, to_onnx

__all__ = ["DEFAULT_OPSET", "ExportError", "PROFILES", "to_onnx"]
