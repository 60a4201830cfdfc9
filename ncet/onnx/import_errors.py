"""What an ONNX import refuses, and why: `ONNXImportError` and its stable reason codes
(docs/onnx-import.md, "Outside the boundary"). Plain data: reading it needs no onnx."""

from __future__ import annotations

from ..errors import ConversionError, Reason

_IMPORT_REASON_ROWS = (
    ("onnx-unsupported-op", "unsupported",
     "the ONNX op type has no piecewise-linear canonical operator (Sigmoid, Softmax, Sign, "
     "Pow, Cos, ArgMax, ...)"),
    ("onnx-domain", "unsupported", "an op of another domain than ONNX's own (ai.onnx)"),
    ("onnx-attribute", "boundary",
     "an attribute value the canonical operator cannot express exactly (Gemm's alpha, a "
     "MaxPool's storage_order, an auto_pad, asymmetric pooling pads, ...)"),
    ("onnx-dynamic-operand", "boundary",
     "an operand that must be fixed (a weight, a shape, axes, indices) depends on the inputs"),
    ("onnx-batch-axis", "boundary",
     "the node reads, moves, merges or removes the batch axis (the graph inputs' first axis)"),
    ("onnx-input-shape", "boundary",
     "a graph input whose shape is not known apart from its batch axis, of rank 0, or whose "
     "batch axis disagrees with the other inputs'"),
    ("onnx-dtype", "boundary", "a graph tensor that is not float32 or float64, or a Cast of one"),
    ("onnx-tensor-tensor", "boundary",
     "a product or quotient of two graph tensors (Mul, Div, MatMul of two inputs-dependent "
     "values)"),
    ("onnx-constant-over-tensor", "boundary", "a constant divided by a graph tensor"),
    ("onnx-zero-divisor", "boundary", "division by a constant that is zero or subnormal somewhere"),
    ("onnx-broadcast", "boundary",
     "a constant or second tensor that would change the graph tensor's shape by broadcasting"),
    ("onnx-constant-not-finite", "boundary", "a weight or constant operand holds NaN or infinity"),
    ("onnx-training-mode", "boundary",
     "Dropout or BatchNormalization in training mode, or one whose extra outputs are used"),
    ("onnx-concat-constant", "boundary", "a fixed tensor concatenated with graph tensors"),
    ("onnx-indexing", "boundary",
     "Gather with indices that are not one index or an evenly spaced increasing run, or a "
     "Slice with a negative step"),
    ("onnx-pad", "boundary",
     "a Pad that is not zero padding of the spatial axes folded into the Conv or "
     "AveragePool it feeds"),
    ("onnx-static-computation", "boundary",
     "a computation on fixed values (shapes, constants) NCET does not fold"),
    ("onnx-output", "boundary", "a graph output that is fixed, or a graph without outputs"),
    ("onnx-malformed", "boundary",
     "a node that does not follow its op's schema (arity, attribute types, required "
     "attributes), or whose attributes or fixed operands cannot be read as its op defines "
     "them"),
)

IMPORT_REASONS: dict[str, Reason] = {
    code: Reason(code, "ONNXImportError", summary) for code, _, summary in _IMPORT_REASON_ROWS}
"""Every reason code an ONNX import reports, keyed by code."""

IMPORT_STATUS: dict[str, str] = {code: status for code, status, _ in _IMPORT_REASON_ROWS}
"""Per code, the row status it gives (`ConversionReport`): "unsupported" for an op type
outside the operator set, "boundary" for a supported op type used outside it."""


DEFAULT_HINTS: dict[str, str] = {
    "onnx-unsupported-op": "cut the network before it (the logits before a Softmax), or "
                           "replace the op in the model before export",
    "onnx-domain": "export without custom ops: only ONNX's own ops are imported",
    "onnx-attribute": "re-export the node with attribute values its canonical operator takes "
                      "(docs/onnx-import.md)",
    "onnx-dynamic-operand": "make the operand an initializer or a Constant (fold the file, "
                            "then certify the import with check_onnx)",
    "onnx-batch-axis": "keep the first axis the batch axis: compute on the other axes only",
    "onnx-input-shape": "give each graph input fixed sizes, apart from a symbolic (or 1) "
                        "first axis",
    "onnx-dtype": "export the network in float32 or float64 throughout",
    "onnx-tensor-tensor": "a product of two input-dependent values is not piecewise linear: "
                          "cut the network before it",
    "onnx-constant-over-tensor": "divide by constants only",
    "onnx-zero-divisor": "divide by constants that are normal numbers everywhere",
    "onnx-broadcast": "give the constant a shape that broadcasts into the graph tensor "
                      "without growing it",
    "onnx-constant-not-finite": "replace NaN and infinite constants by finite values",
    "onnx-training-mode": "export the network in evaluation mode",
    "onnx-concat-constant": "concatenate graph tensors only",
    "onnx-indexing": "index with one index, or an evenly spaced increasing run",
    "onnx-pad": "pad with zeros before a Conv or AveragePool, or set the Conv's own padding",
    "onnx-static-computation": "fold it into the file (onnxsim, say), then import again and "
                               "certify with check_onnx",
    "onnx-output": "return graph tensors",
    "onnx-malformed": "re-export the network: onnx.checker or onnxruntime refuses this node",
}
"""What to do, per code, for a refusal whose rule gives no more specific hint."""

assert set(DEFAULT_HINTS) == set(IMPORT_REASONS), "a reason code without a default hint"


class ONNXImportError(ConversionError):
    """An ONNX file could not be imported to GraphIR: `.node` is the ONNX node's name (or
    `#<index>` for a node without one), `.spelling` its op type, `.location` "<file> node
    <index>", `.code` one of `IMPORT_REASONS`, `.hint` what to do about it."""

    reasons = IMPORT_REASONS


class ImportRejection(Exception):
    """Internal: a rule's verdict on one ONNX node, made into an ONNXImportError with the
    node's provenance."""

    def __init__(self, code: str, reason: str, hint: str = ""):
        assert code in IMPORT_REASONS, f"unregistered reason code {code!r}"
        super().__init__(reason)
        self.code, self.reason, self.hint = code, reason, hint or DEFAULT_HINTS[code]
