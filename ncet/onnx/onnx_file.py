"""Reading an ONNX file, once for every NCET tool that reads one (`check_onnx`, `lint_onnx`):
parsed as onnxruntime parses it (binary protobuf), its external data read into the model,
and refused when a name is defined twice (`ONNXFileError`, with a stable reason code). A
name defined twice is read one way by one program and another way by the next: onnxruntime
computes with one of two initializers of a name and a dict of them holds the other, so no
comparison with the export could certify what runs. And a tensor's meaning (`tensor_meaning`:
dtype, dims and decoded bytes), whether its values are raw bytes, typed fields or an
external file, which is what comparisons of tensors compare."""

from __future__ import annotations

import os
from collections.abc import Iterator

import onnx
from onnx import TensorProto, external_data_helper, numpy_helper

from ..errors import NCETError

READING_REASONS = {
    "onnx-unparsable": "the bytes do not parse as an ONNX model",
    "onnx-empty": "no IR version, no graph or no graph nodes (lint_onnx only)",
    "onnx-invalid": "onnx.checker rejects the model: attribute types, required attributes, "
                    "tensor sizes, ... (lint_onnx only)",
    "onnx-external-data": "a tensor's values are in an external file that was not or "
                          "cannot be read",
    "onnx-duplicate-initializer": "two initializers (dense or sparse) of one name",
    "onnx-duplicate-definition": "one name defined twice among the graph inputs, "
                                 "initializers and node outputs (a Constant node's included)",
    "onnx-input-shadows-initializer": "a graph input of an initializer's name: a runtime may "
                                      "read the initializer or a value fed in its place",
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
    """An ONNX model NCET will not read: it does not parse, its external data cannot be
    read, or it defines a name twice, so what a runtime computes is not what a reader of the
    file sees; or (check_onnx) onnxruntime cannot load or run it.

    Attributes:
        code: A stable reason code, one of `READING_REASONS`.
        name: The name defined twice; for `onnx-run-failed`, the IR node whose ONNX node
            failed, when known ("" otherwise).
        entries: The graph entries defining it, e.g. ("initializer 0", "initializer 4",
            "node 2 (Constant 'c') output 0").
    """

    def __init__(self, code: str, message: str, *, name: str = "",
                 entries: tuple[str, ...] = ()):
        assert code in READING_REASONS, f"unregistered reason code {code!r}"
        self.code, self.name, self.entries = code, name, tuple(entries)
        super().__init__(f"{message} [{code}]")


def read_model(source, caller: str, *, accept_bytes: bool = False,
               validate: bool = False, weights_as_inputs: bool = False) -> onnx.ModelProto:
    """The model in `source` (an onnx.ModelProto, a path, or with `accept_bytes` the
    file's bytes), its external data read, refused if it is ambiguous (`refuse_ambiguity`).
    A ModelProto given is returned itself (not copied), its external data, if any, must be
    loaded already: without the file's path there is nowhere to read it from. With
    `validate`, the model, given or parsed, must also have an IR version and graph nodes,
    and pass the ONNX checker (`onnx-empty`, `onnx-invalid`): the same checks whatever its
    form. With `weights_as_inputs` (an import), a graph input that is also an initializer
    is accepted: it is that initializer's value, as a runtime reads it when nothing is fed
    in its place (IR version 3 lists every weight among the graph inputs).

    Raises:
        ONNXFileError: Not an ONNX model, external data that cannot be read, a name
            defined twice.
        OSError: The path cannot be read.
        TypeError: `source` is none of the accepted kinds.
    """
    if isinstance(source, onnx.ModelProto):
        model, what, base = source, "the model given", None
    else:
        if accept_bytes and isinstance(source, (bytes, bytearray, memoryview)):
            data, what, base = bytes(source), "the bytes given", None
        elif isinstance(source, (str, os.PathLike)):
            what = repr(os.fspath(source))
            with open(source, "rb") as f:
                data = f.read()
            base = os.path.dirname(os.path.abspath(os.fspath(source)))
        else:
            kinds = "an onnx.ModelProto, a path or bytes" if accept_bytes else \
                "an onnx.ModelProto or a path"
            raise TypeError(f"{caller}() expects {kinds}, not {type(source).__name__}")
        model = onnx.ModelProto()
        try:
            model.ParseFromString(data)
        except Exception as exc:  # protobuf's DecodeError, or worse, on a hostile file
            raise ONNXFileError("onnx-unparsable", f"{what} is not an ONNX model: it does "
                                f"not parse as one ({type(exc).__name__})") from None
    external = [t for t in _tensors(model.graph) if external_data_helper.uses_external_data(t)]
    if external:
        names = ", ".join(repr(t.name) for t in external[:3])
        more = f" and {len(external) - 3} more" if len(external) > 3 else ""
        if base is None:
            raise ONNXFileError(
                "onnx-external-data", f"{what}: the values of {names}{more} are in an external "
                "file that was not loaded; give the file's path, or load it with "
                "onnx.load(path), which reads them")
        try:
            for tensor in external:
                external_data_helper.load_external_data_for_tensor(tensor, base)
        except Exception as exc:  # a missing file, a path outside the model's folder, ...
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            raise ONNXFileError(
                "onnx-external-data", f"{what}: the external data of {names}{more} cannot be "
                f"read ({type(exc).__name__}: {first})") from None
    refuse_ambiguity(model.graph, what, weights_as_inputs)
    if validate:  # a ModelProto given too: the same checks whatever the form
        _validate(model, what)
    return model


def _validate(model: onnx.ModelProto, what: str) -> None:
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node:
        raise ONNXFileError("onnx-empty", f"{what} is not an ONNX model: no IR version or "
                            "no graph nodes")
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx.checker.ValidationError and its C++ relatives
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ONNXFileError("onnx-invalid", f"{what} is not a valid ONNX model: {first}"
                            ) from None


def _tensors(graph: onnx.GraphProto) -> Iterator[TensorProto]:
    """Every tensor of the graph and its subgraphs: initializers, sparse initializers' values
    and indices, and tensor attributes."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("sparse_tensor"):
                yield a.sparse_tensor.values
                yield a.sparse_tensor.indices
            for s in a.sparse_tensors:
                yield s.values
                yield s.indices
            if a.HasField("g"):
                yield from _tensors(a.g)
            for g in a.graphs:
                yield from _tensors(g)


def definitions(graph: onnx.GraphProto) -> dict[str, list[tuple[str, str]]]:
    """Each name the graph defines -> its definitions in file order, as (kind, entry):
    kind "input", "initializer" (dense or sparse) or "node"; entry as an error names it."""
    found: dict[str, list[tuple[str, str]]] = {}
    for i, value in enumerate(graph.input):
        found.setdefault(value.name, []).append(("input", f"graph input {i}"))
    for i, tensor in enumerate(graph.initializer):
        found.setdefault(tensor.name, []).append(("initializer", f"initializer {i}"))
    for i, sparse in enumerate(graph.sparse_initializer):
        found.setdefault(sparse.values.name, []).append(("initializer",
                                                         f"sparse initializer {i}"))
    for i, node in enumerate(graph.node):
        label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
        for j, name in enumerate(node.output):
            if name:  # an omitted optional output
                found.setdefault(name, []).append(("node", f"node {i} ({label}) output {j}"))
    return found


def refuse_ambiguity(graph: onnx.GraphProto, what: str = "the model",
                     weights_as_inputs: bool = False) -> None:
    """Raise ONNXFileError at the first name (in file order) the graph defines twice: two
    initializers (`onnx-duplicate-initializer`), a graph input that is also an initializer
    (`onnx-input-shadows-initializer`), or any other pair of graph inputs, initializers and
    node outputs (`onnx-duplicate-definition`). onnxruntime warns and computes with one of two
    initializers, and lets a graph input override an initializer; a reader of the file may
    take the other. Only the top-level graph: NCET's export writes no subgraph, and the
    comparison with the export refuses one. With `weights_as_inputs`, one graph input and
    one initializer of a name are that initializer."""
    for name, defs in definitions(graph).items():
        if len(defs) < 2:
            continue
        kinds = [kind for kind, _ in defs]
        if weights_as_inputs and sorted(kinds) == ["initializer", "input"]:
            continue
        entries = tuple(entry for _, entry in defs)
        if kinds.count("initializer") >= 2 and "node" not in kinds and "input" not in kinds:
            code, why = "onnx-duplicate-initializer", "onnxruntime computes with one of them"
        elif sorted(kinds) == ["initializer", "input"]:
            code, why = ("onnx-input-shadows-initializer", "a runtime may read the "
                         "initializer or a value fed in its place")
        else:
            code, why = "onnx-duplicate-definition", "a graph defines each value once"
        raise ONNXFileError(
            code, f"{what} defines the name {name!r} {len(defs)} times ({', '.join(entries)})"
            f": {why}, and a reader of the file may take another, so no comparison can "
            "certify what runs; give each value one definition (re-export it with "
            "ncet.to_onnx)", name=name, entries=entries)


def tensor_meaning(tensor: TensorProto) -> tuple:
    """What a tensor means, whatever encodes it: its name, element type, dims and values
    (little-endian bytes, bit for bit: -0.0 is not 0.0, NaN payloads kept), whether they
    are raw_data or typed fields (float_data, ...); external data must be loaded
    (`read_model`). A tensor that does not decode is its serialisation (equal to no
    decodable tensor)."""
    try:
        array = numpy_helper.to_array(tensor)
        if array.dtype == object:  # strings
            data = tuple(array.reshape(-1).tolist())
        else:
            data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    except Exception:  # noqa: BLE001 - a malformed tensor: compared as written
        return ("undecodable", tensor.SerializeToString(deterministic=True))
    return (tensor.name, tensor.data_type, tuple(tensor.dims), data)


def meaning_of(proto) -> bytes:
    """A node, graph or value info as bytes that hold its meaning only: without doc strings
    and node names, each tensor attribute (in subgraphs too) as its `tensor_meaning`."""
    copy = type(proto)()
    copy.CopyFrom(proto)
    _strip(copy)
    return copy.SerializeToString(deterministic=True)


def _strip(proto) -> None:
    proto.ClearField("doc_string")
    if isinstance(proto, onnx.NodeProto):
        proto.ClearField("name")
        for a in proto.attribute:
            tensors = ([a.t] if a.HasField("t") else []) + list(a.tensors)
            for t in tensors:
                meaning = tensor_meaning(t)
                t.Clear()
                t.name, t.raw_data = meaning[0], repr(meaning[1:]).encode()
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _strip(g)
    elif isinstance(proto, onnx.GraphProto):
        for node in proto.node:
            _strip(node)
        for t in proto.initializer:
            meaning = tensor_meaning(t)
            t.Clear()
            t.name, t.raw_data = meaning[0], repr(meaning[1:]).encode()
