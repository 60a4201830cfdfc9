"""Export: GraphIR written as ONNX for the tools that read it (docs/export.md).

Its public face is `to_onnx`, `ExportError`, `PROFILES` (name -> `Profile`), `Profile`,
`VERIFIER_OPS` and `DEFAULT_OPSET`; the modules inside are internal. Importing it imports onnx
(the `onnx` extra); `import ncet` does not.
"""

from .builder import ExportError
from .model import DEFAULT_OPSET, to_onnx
from .profiles import PROFILES, VERIFIER_OPS, Profile

__all__ = ["DEFAULT_OPSET", "ExportError", "PROFILES", "Profile", "VERIFIER_OPS", "to_onnx"]
