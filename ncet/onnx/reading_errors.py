"""The one error of reading an ONNX file (`ONNXFileError`) and its stable reason codes
(`READING_REASONS`), shared by the reader (`onnx_file.py`) and its checks (`file_limits.py`,
`external_data.py`, `graph_order.py`), and by `check_onnx` and `lint_onnx`."""

from __future__ import annotations

from ..errors import NCETError

READING_REASONS = {
    "onnx-unparsable": "the bytes do not parse as an ONNX model",
    "onnx-file-too-large": "the file, or the file and the external data it names together, "
                           "is larger than `file_limits.MAX_FILE_BYTES`",
    "onnx-parse-memory": "parsing the file would hold more than "
                         "`file_limits.MAX_PARSE_OVERHEAD` bytes beyond the file's own (a "
                         "protobuf bomb: millions of tiny messages), so it is not parsed",
    "onnx-too-many-nodes": "more nodes, in all graphs, subgraphs and functions together, than "
                           "`file_limits.MAX_NODES`",
    "onnx-nesting": "subgraphs (If, Loop, Scan attributes) nested deeper than "
                    "`file_limits.MAX_GRAPH_DEPTH`, or messages deeper than the protobuf "
                    "parser's limit",
    "onnx-tensor-dims": "a tensor (an initializer, a sparse tensor's dense shape, a tensor "
                        "attribute) declares a negative dimension",
    "onnx-tensor-too-large": "a tensor's declared dims times its element size, or all the "
                             "tensors' together, exceed `file_limits.MAX_TENSOR_BYTES`",
    "onnx-empty": "no IR version, no graph or no graph nodes (lint_onnx only)",
    "onnx-invalid": "onnx.checker rejects the model: attribute types, required attributes, "
                    "tensor sizes, ... (lint_onnx only)",
    "onnx-external-data-path": "a tensor's external data `location` is empty, absolute, has "
                               "a `..` component, leaves the model's folder once links are "
                               "resolved, or names something other than a regular file: "
                               "refused before any external file is opened",
    "onnx-external-data": "a tensor's values are in an external file that was not or "
                          "cannot be read: not loaded (a ModelProto given), missing, an "
                          "offset or length that is not a non-negative integer or runs past "
                          "the file, or bytes that are not what the tensor's dtype and dims "
                          "need",
    "onnx-duplicate-initializer": "two initializers (dense or sparse) of one name",
    "onnx-duplicate-definition": "one name defined twice among the graph inputs, "
                                 "initializers and node outputs (a Constant node's included)",
    "onnx-input-shadows-initializer": "a graph input of an initializer's name: a runtime may "
                                      "read the initializer or a value fed in its place",
    "onnx-undefined-input": "a node reads a value that nothing defines: no graph input, "
                            "initializer, earlier node output or (in a subgraph) outer value",
    "onnx-undefined-output": "a graph output names a value that nothing defines",
    "onnx-unsorted": "a node reads a value that only a later node defines (ONNX requires "
                     "nodes in topological order), with no cycle",
    "onnx-cycle": "nodes that read each other's outputs in a cycle",
    "onnx-malformed-node": "a node's attributes or constants cannot be read as its op "
                           "defines them (lint_onnx only)",
    "onnx-unloadable": "onnxruntime refuses to create a session from the file as given "
                       "(check_onnx only)",
    "onnx-run-failed": "onnxruntime loads the file but fails to run it on the samples "
                       "(check_onnx only; `.name` is the IR node whose ONNX node failed, "
                       "when known)",
}
"""Every reason code of `ONNXFileError`, with what it means."""


class ONNXFileError(NCETError, ValueError):
    """An ONNX model NCET will not read: it does not parse, it is over a reading limit
    (bytes, nodes, nesting, tensor sizes), its external data cannot be read safely, it
    defines a name twice or reads one nothing defines, so what a runtime computes is not what
    a reader of the file sees; or (check_onnx) onnxruntime cannot load or run it.

    Attributes:
        code: A stable reason code, one of `READING_REASONS`.
        name: The value (or tensor) the error is about: the name defined twice, the value
            read before or without a definition, the tensor whose data is refused; for
            `onnx-run-failed`, the IR node whose ONNX node failed, when known ("" otherwise).
        entries: The graph entries involved, e.g. ("initializer 0", "initializer 4",
            "node 2 (Constant 'c') output 0"), or the nodes of a cycle.
    """

    def __init__(self, code: str, message: str, *, name: str = "",
                 entries: tuple[str, ...] = ()):
        assert code in READING_REASONS, f"unregistered reason code {code!r}"
        self.code, self.name, self.entries = code, name, tuple(entries)
        super().__init__(f"{message} [{code}]")
