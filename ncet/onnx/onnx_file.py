"""Reading an ONNX file, once for every NCET tool that reads one (`check_onnx`, `lint_onnx`):
parsed as onnxruntime parses it (binary protobuf) within the limits of `file_limits`, its
external data read from the model's folder only (`external_data`), refused when a name is
defined twice or a value is read before or without a definition (`graph_order`), each with
`ONNXFileError` and a stable reason code (`READING_REASONS`, `reading_errors`). Nothing in
the file is executed. A
name defined twice is read one way by one program and another way by the next: onnxruntime
computes with one of two initializers of a name and a dict of them holds the other, so no
comparison with the export could certify what runs. And a tensor's meaning (`tensor_meaning`:
dtype, dims and decoded bytes), whether its values are raw bytes, typed fields or an
external file, which is what comparisons of tensors compare."""

from __future__ import annotations

import os
import stat

import onnx
from onnx import TensorProto, numpy_helper

from . import file_limits
from .external_data import plan_reads, read_planned
from .graph_order import check_order
from .reading_errors import READING_REASONS, ONNXFileError

__all__ = ["READING_REASONS", "ONNXFileError", "read_model", "refuse_ambiguity",
           "tensor_meaning", "meaning_of", "definitions"]

def read_model(source, caller: str, *, accept_bytes: bool = False,
               validate: bool = False, weights_as_inputs: bool = False) -> onnx.ModelProto:
    """The model in `source` (an onnx.ModelProto, a path, or with `accept_bytes` the
    file's bytes), read safely: within the limits of `file_limits` (file size, parse memory,
    nodes, subgraph nesting, declared tensor sizes), its external data read from the model's
    folder only (`external_data`), refused if it is ambiguous (`refuse_ambiguity`) or reads a
    value before or without a definition (`graph_order`). Nothing in the file is executed:
    no onnxruntime session, no custom op, no shape inference; only the protobuf parser and
    these checks read it. A ModelProto given is returned itself (not copied), its external
    data, if any, must be loaded already: without the file's path there is nowhere to read
    it from (a location is never taken relative to the working directory). With `validate`,
    the model, given or parsed, must also have an IR version and graph nodes, and pass the
    ONNX checker (`onnx-empty`, `onnx-invalid`): the same checks whatever its form.
    With `weights_as_inputs` (an import), a graph input that is also an initializer is
    accepted: it is that initializer's value, as a runtime reads it when nothing is fed in its
    place (IR version 3 lists every weight among the graph inputs).

    Raises:
        ONNXFileError: Not an ONNX model, over a limit, external data that cannot be read
            safely, a name defined twice, a value read before or without a definition
            (`.code`: one of `READING_REASONS`).
        OSError: The path cannot be read.
        TypeError: `source` is none of the accepted kinds.
    """
    size = 0
    if isinstance(source, onnx.ModelProto):
        model, what, base = source, "the model given", None
    else:
        if accept_bytes and isinstance(source, (bytes, bytearray, memoryview)):
            data, what, base = bytes(source), "the bytes given", None
            size = len(data)
        elif isinstance(source, (str, os.PathLike)):
            what = repr(os.fspath(source))
            data, size = _read_file(source)
            base = os.path.dirname(os.path.abspath(os.fspath(source)))
        else:
            kinds = "an onnx.ModelProto, a path or bytes" if accept_bytes else \
                "an onnx.ModelProto or a path"
            raise TypeError(f"{caller}() expects {kinds}, not {type(source).__name__}")
        if size > file_limits.MAX_FILE_BYTES:
            raise ONNXFileError("onnx-file-too-large", f"{what} is {size} bytes, larger than "
                                f"the limit of {file_limits.MAX_FILE_BYTES} "
                                "(ncet.onnx.file_limits.MAX_FILE_BYTES)")
        file_limits.check_parse_cost(data, what)
        model = _parse(data, what)
    tensors, subgraphs = file_limits.walk_model(model, what)
    external = file_limits.check_tensor_sizes(tensors, what)
    plans = []
    if external:
        names = ", ".join(repr(t.name) for t, _ in external[:3])
        more = f" and {len(external) - 3} more" if len(external) > 3 else ""
        if base is None:
            raise ONNXFileError(
                "onnx-external-data", f"{what}: the values of {names}{more} are in an external "
                "file that was not loaded; give the file's path, or load it with "
                "onnx.load(path), which reads them", name=external[0][0].name)
        plans = plan_reads(external, base, what, size)  # every location checked, none opened
    if validate:  # before the graph's order: a graph with no nodes has outputs undefined
        _refuse_empty(model, what)
    refuse_ambiguity(model.graph, what, weights_as_inputs)
    check_order(model, what, subgraphs)
    read_planned(plans)
    if validate:  # a ModelProto given too: the same checks whatever the form
        _validate(model, what)
    return model


def _read_file(path) -> tuple[bytes, int]:
    """The file's bytes and size; nothing read when it is over `MAX_FILE_BYTES`, and at most
    one byte over from what is not a regular file (a pipe)."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            data = f.read(file_limits.MAX_FILE_BYTES + 1)
            return data, len(data)
        if st.st_size > file_limits.MAX_FILE_BYTES:
            return b"", st.st_size
        data = f.read()
        return data, len(data)


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError, or worse, on a hostile file
        file_limits.diagnose_unparsable(data, what)  # nested too deep: say so
        raise ONNXFileError("onnx-unparsable", f"{what} is not an ONNX model: it does "
                            f"not parse as one ({type(exc).__name__})") from None
    return model


def _refuse_empty(model: onnx.ModelProto, what: str) -> None:
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node:
        raise ONNXFileError("onnx-empty", f"{what} is not an ONNX model: no IR version or "
                            "no graph nodes")


def _validate(model: onnx.ModelProto, what: str) -> None:
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx.checker.ValidationError and its C++ relatives
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ONNXFileError("onnx-invalid", f"{what} is not a valid ONNX model: {first}"
                            ) from None


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
    names = [v.name for v in graph.input]
    names += [t.name for t in graph.initializer]
    names += [s.values.name for s in graph.sparse_initializer]
    for node in graph.node:
        names += node.output
    if len(set(names) - {""}) == len(names) - names.count(""):
        return  # every name once: the entries need not be written out
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
