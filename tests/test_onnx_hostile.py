"""Hostile ONNX files (issue 32): the one reader (`read_model`, ncet/onnx/onnx_file.py) refuses
each with `ONNXFileError` and a stable code, before it opens anything outside the model's
folder, allocates what a declared size or a protobuf bomb asks for, or executes anything; and
the VNN-COMP corpus reads as onnx.load reads it."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
import time
import tracemalloc

import pytest

onnx = pytest.importorskip("onnx")

import numpy as np  # noqa: E402
from google.protobuf.internal.encoder import _VarintBytes  # noqa: E402
from google.protobuf.message import DecodeError  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ncet  # noqa: E402
from ncet.onnx import file_limits, onnx_file  # noqa: E402
from ncet.onnx.onnx_file import READING_REASONS, ONNXFileError, read_model  # noqa: E402
from tests.corpus import corpus_networks, corpus_root  # noqa: E402

W = np.arange(12, dtype=np.float32).reshape(4, 3)


def _model(nodes=None, initializers=None, outputs=("y",), inputs=(("x", [1, 4]),),
           functions=()) -> onnx.ModelProto:
    """x (1x4) -> MatMul W (4x3) -> Relu -> y, or the nodes given."""
    if nodes is None:
        nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                 helper.make_node("Relu", ["m"], ["y"], name="relu")]
    if initializers is None:
        initializers = [numpy_helper.from_array(W, "W")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             functions=list(functions))


def _write(folder, m, name="m.onnx"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(m.SerializeToString())
    return path


def _external(tensor, location, **entries):
    """Make `tensor` say its values are at `location` (and offset, length, ...)."""
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.external_data[:]
    for key, value in [("location", location), *entries.items()]:
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)
    return tensor


# --- External data: nothing outside the model's folder, nothing but the span it needs -----

def _secret(tmp_path):
    """A file outside the model's folder whose bytes would do as W's."""
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    return tmp_path / "secret.bin"


def _with_w_at(location, **entries):
    def build(tmp_path):
        m = _model()
        _external(m.graph.initializer[0], location, **entries)
        return _write(tmp_path / "model", m)
    return build


def _data_file(name="w.bin", data=None):
    data = W.tobytes() if data is None else data

    def put(tmp_path):
        (tmp_path / "model").mkdir(parents=True, exist_ok=True)
        (tmp_path / "model" / name).write_bytes(data)
    return put


def _symlink(link, target):
    def put(tmp_path):
        (tmp_path / "model").mkdir(parents=True, exist_ok=True)
        os.symlink(target(tmp_path), tmp_path / "model" / link)
    return put


def _fifo(tmp_path):
    (tmp_path / "model").mkdir(parents=True, exist_ok=True)
    os.mkfifo(tmp_path / "model" / "w.bin")


def _device(tmp_path):
    (tmp_path / "model").mkdir(parents=True, exist_ok=True)
    try:  # a character device like /dev/null (1, 3), inside the folder
        os.mknod(tmp_path / "model" / "w.bin", 0o600 | 0o020000, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a device node here ({exc})")


def _folder(tmp_path):
    (tmp_path / "model" / "sub").mkdir(parents=True, exist_ok=True)


def _outside_folder(tmp_path):
    (tmp_path / "outside").mkdir(exist_ok=True)
    (tmp_path / "outside" / "w.bin").write_bytes(W.tobytes())
    return tmp_path / "outside"


def _in_constant(location):
    def build(tmp_path):
        value = _external(numpy_helper.from_array(W, "k"), location)
        m = _model([helper.make_node("Constant", [], ["W"], value=value),
                    helper.make_node("MatMul", ["x", "W"], ["y"])], initializers=[])
        return _write(tmp_path / "model", m)
    return build


def _in_subgraph(location):
    def build(tmp_path):
        body = helper.make_graph(
            [helper.make_node("MatMul", ["x", "V"], ["t"])], "then", [],
            [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
            [_external(numpy_helper.from_array(W, "V"), location)])
        other = helper.make_graph(
            [helper.make_node("MatMul", ["x", "W"], ["e"])], "else", [],
            [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
        m = _model([helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
                        np.array(True), "c")),
                    helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=other)])
        return _write(tmp_path / "model", m)
    return build


def _in_sparse_initializer(location):
    def build(tmp_path):
        values = _external(numpy_helper.from_array(W.reshape(-1), "S"), location)
        indices = numpy_helper.from_array(np.arange(12, dtype=np.int64), "")
        m = _model()
        m.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [12]))
        return _write(tmp_path / "model", m)
    return build


def _in_function(location):
    def build(tmp_path):
        value = _external(numpy_helper.from_array(W, "k"), location)
        f = helper.make_function("local", "Times", ["a"], ["b"], [
            helper.make_node("Constant", [], ["k"], value=value),
            helper.make_node("MatMul", ["a", "k"], ["b"])],
            [helper.make_opsetid("", 17)])
        m = _model([helper.make_node("Times", ["x"], ["y"], domain="local")],
                   functions=[f])
        m.opset_import.append(helper.make_opsetid("local", 1))
        return _write(tmp_path / "model", m)
    return build


def _twice(tmp_path):
    m = _model()
    _external(m.graph.initializer[0], "w.bin")
    entry = m.graph.initializer[0].external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    return _write(tmp_path / "model", m)


PATH = "onnx-external-data-path"
DATA = "onnx-external-data"
EXTERNAL = {  # name: (prepare the folder, build the model, code, a fragment of the message)
    "dotdot": (None, _with_w_at("../secret.bin"), PATH, "'..'"),
    "etc-passwd": (None, _with_w_at("../../etc/passwd"), PATH, "'..'"),
    "dotdot-inside-a-path": (_data_file(), _with_w_at("sub/../w.bin"), PATH, "'..'"),
    "backslash-dotdot": (None, _with_w_at("..\\secret.bin"), PATH, "'..'"),
    "absolute": (None, lambda t: _with_w_at(str(t / "secret.bin"))(t), PATH, "absolute"),
    "absolute-etc-passwd": (None, _with_w_at("/etc/passwd"), PATH, "absolute"),
    "drive-letter": (None, _with_w_at("C:secret.bin"), PATH, "absolute"),
    "empty": (None, _with_w_at(""), PATH, "empty"),
    "linked-file": (_symlink("w.bin", lambda t: _secret(t)), _with_w_at("w.bin"), PATH,
                    "outside the model's folder"),
    "linked-folder": (_symlink("sub", _outside_folder), _with_w_at("sub/w.bin"), PATH,
                      "outside the model's folder"),
    "link-to-dev-zero": (_symlink("w.bin", lambda t: "/dev/zero"), _with_w_at("w.bin"), PATH,
                         "outside the model's folder"),
    "fifo": (_fifo, _with_w_at("w.bin"), PATH, "not a regular file"),
    "device": (_device, _with_w_at("w.bin"), PATH, "not a regular file"),
    "folder": (_folder, _with_w_at("sub"), PATH, "not a regular file"),
    "the-folder-itself": (None, _with_w_at("."), PATH, "not a regular file"),
    "location-twice": (_data_file(), _twice, DATA, "twice"),
    "in-a-constant-node": (None, _in_constant("../secret.bin"), PATH, "Constant"),
    "in-a-subgraph": (None, _in_subgraph("../secret.bin"), PATH, "then_branch"),
    "in-a-sparse-initializer": (None, _in_sparse_initializer("../secret.bin"), PATH,
                                "sparse initializer 0"),
    "in-a-function": (None, _in_function("../secret.bin"), PATH, "function 'Times'"),
    "missing": (None, _with_w_at("w.bin"), DATA, "cannot be read"),
    "negative-offset": (_data_file(), _with_w_at("w.bin", offset=-1), DATA, "non-negative"),
    "negative-length": (_data_file(), _with_w_at("w.bin", length=-48), DATA, "non-negative"),
    "fractional-offset": (_data_file(), _with_w_at("w.bin", offset="1.5"), DATA,
                          "non-negative integer"),
    "hex-length": (_data_file(), _with_w_at("w.bin", length="0x30"), DATA,
                   "non-negative integer"),
    "offset-past-the-end": (_data_file(), _with_w_at("w.bin", offset=49, length=0), DATA,
                            "past the end"),
    "length-past-the-end": (_data_file(), _with_w_at("w.bin", offset=8, length=48), DATA,
                            "past the end"),
    "huge-length": (_data_file(), _with_w_at("w.bin", length=2**62), DATA, "past the end"),
    "short-span": (_data_file(), _with_w_at("w.bin", length=44), DATA, "needs 48"),
    "file-longer-than-the-tensor": (_data_file(data=W.tobytes() * 2), _with_w_at("w.bin"),
                                    DATA, "needs 48"),
}


class _Opened:
    """Every path opened through Python (open, os.open) or onnx's own external-data opener."""

    def __init__(self, monkeypatch):
        self.paths = []
        real_open, real_os_open = builtins.open, os.open
        helper_module = onnx.external_data_helper

        def spy_open(file, *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)):
                self.paths.append(os.fsdecode(file))
            return real_open(file, *args, **kwargs)

        def spy_os_open(path, *args, **kwargs):
            self.paths.append(os.fsdecode(path))
            return real_os_open(path, *args, **kwargs)

        def never(*args, **kwargs):
            raise AssertionError("onnx's external data opener was called")

        monkeypatch.setattr(builtins, "open", spy_open)
        monkeypatch.setattr(os, "open", spy_os_open)
        monkeypatch.setattr(helper_module, "_open_external_data_fd", never)

    def outside(self, folder) -> list[str]:
        root = os.path.realpath(folder)
        return [p for p in self.paths
                if os.path.commonpath([os.path.realpath(p), root]) != root]


@pytest.mark.parametrize("case", list(EXTERNAL))
def test_external_data_outside_the_folder_or_the_file_is_refused(case, tmp_path, monkeypatch):
    prepare, build, code, fragment = EXTERNAL[case]
    _secret(tmp_path)
    if prepare is not None:
        prepare(tmp_path)
    path = build(tmp_path)
    opened = _Opened(monkeypatch)
    with pytest.raises(ONNXFileError) as info:
        read_model(path, "test")
    error = info.value
    assert error.code == code and code in READING_REASONS, str(error)
    assert fragment in str(error) and str(error).endswith(f"[{code}]")
    assert error.name and repr(error.name) in str(error)  # names the tensor
    assert opened.outside(tmp_path / "model") == []
    if code == PATH:  # refused before any external file is opened
        assert opened.paths == [str(path)]


def test_the_same_refusals_reach_check_onnx_and_lint_onnx(tmp_path):
    _secret(tmp_path)
    path = _with_w_at("../secret.bin")(tmp_path)
    with pytest.raises(ONNXFileError, match=r"onnx-external-data-path"):
        ncet.lint_onnx(path, "eran")
    ir = ncet.convert(__import__("torch").nn.Linear(4, 3), (4,))
    with pytest.raises(ONNXFileError, match=r"onnx-external-data-path"):
        ncet.check_onnx(ir, path, samples_per_scale=1)


def test_a_link_and_a_span_inside_the_folder_are_read(tmp_path):
    (tmp_path / "model" / "data").mkdir(parents=True)
    (tmp_path / "model" / "data" / "all.bin").write_bytes(b"\0" * 16 + W.tobytes() + b"\1")
    os.symlink("data", tmp_path / "model" / "linked")  # a link that stays inside
    m = _model()
    _external(m.graph.initializer[0], "linked/all.bin", offset=16, length=48)
    model = read_model(_write(tmp_path / "model", m), "test")
    tensor = model.graph.initializer[0]
    assert np.array_equal(numpy_helper.to_array(tensor), W)
    assert tensor.data_location == TensorProto.DEFAULT and not tensor.external_data


def test_a_model_given_never_reads_a_location_relative_to_the_working_folder(tmp_path,
                                                                              monkeypatch):
    (tmp_path / "w.bin").write_bytes(W.tobytes())
    monkeypatch.chdir(tmp_path)
    m = _model()
    _external(m.graph.initializer[0], "w.bin")
    opened = _Opened(monkeypatch)
    for source in (m, m.SerializeToString()):
        with pytest.raises(ONNXFileError) as info:
            read_model(source, "test", accept_bytes=True)
        assert info.value.code == DATA and "not loaded" in str(info.value)
    assert opened.paths == []


def test_onnx_itself_refuses_the_escapes_too_but_not_a_wrong_span(tmp_path):
    # what onnx's own loader (the venv's version) does with the same files: it refuses the
    # paths as NCET does, yet loads a span that is not the tensor's size, which NCET refuses
    _secret(tmp_path)
    for build in (_with_w_at("../secret.bin"), _with_w_at(str(tmp_path / "secret.bin"))):
        with pytest.raises(Exception):  # noqa: B017 - onnx's ValidationError, whatever it is
            onnx.load(str(build(tmp_path)))
    _data_file(data=W.tobytes() * 2)(tmp_path)
    loaded = onnx.load(str(_with_w_at("w.bin")(tmp_path)))
    assert len(loaded.graph.initializer[0].raw_data) == 96  # W is 4 x 3 float32: 48 bytes


# --- Limits: refused before allocating --------------------------------------------------

def _never_parsed(monkeypatch):
    def refuse(data, what):
        raise AssertionError("the file was parsed")
    monkeypatch.setattr(onnx_file, "_parse", refuse)


def _ld(field, payload):
    return _VarintBytes((field << 3) | 2) + _VarintBytes(len(payload)) + payload


def _empty_messages(field_path, count):
    """A ModelProto's bytes with `count` empty messages at the end of `field_path`."""
    data = _ld(field_path[-1], b"") * count
    for field in reversed(field_path[:-1]):
        data = _ld(field, data)
    return data


def _nested_if_bytes(depth):
    """A model of If nodes nested `depth` deep, written on the wire (onnx.helper cannot build
    it: it serializes each node, and protobuf refuses past its depth limit)."""
    graph = b""
    for _ in range(depth):
        attribute = _ld(1, b"then_branch") + _ld(6, graph) + b"\xa0\x01\x05"  # type: GRAPH
        node = _ld(1, b"c") + _ld(2, b"y") + _ld(4, b"If") + _ld(5, attribute)
        graph = _ld(1, node)
    return b"\x08\x08" + _ld(7, graph) + _ld(8, b"\x10\x11")  # ir_version 8, opset 17


def _nested_if_model(depth):
    """The same nesting built in memory, one level at a time (no serialization)."""
    m = _model([])
    graph = m.graph
    for _ in range(depth):
        node = graph.node.add(op_type="If", input=["x"], output=["y"])
        attribute = node.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH)
        graph = attribute.g
    graph.node.add(op_type="Identity", input=["x"], output=["z"])  # the innermost body
    return m


def test_nesting_past_protobufs_limit_is_our_clear_error(tmp_path):
    data = _nested_if_bytes(60)
    with pytest.raises(DecodeError):  # the limit is protobuf's: it does not parse
        onnx.ModelProto().ParseFromString(data)
    path = tmp_path / "deep.onnx"
    path.write_bytes(data)
    for source in (path, data):
        with pytest.raises(ONNXFileError) as info:
            read_model(source, "test", accept_bytes=True)
        assert info.value.code == "onnx-nesting" and "protobuf's limit" in str(info.value)


@pytest.mark.parametrize("depth", [file_limits.MAX_GRAPH_DEPTH + 1, 30, 500])
def test_nesting_past_the_limit_is_refused_without_recursion(depth):
    m = _nested_if_model(depth)
    with pytest.raises(ONNXFileError) as info:
        read_model(m, "test")
    assert info.value.code == "onnx-nesting" and "If" in str(info.value)
    if depth <= 30:  # parseable: the same error from the bytes
        with pytest.raises(ONNXFileError) as info:
            read_model(_nested_if_bytes(depth), "test", accept_bytes=True)
        assert info.value.code == "onnx-nesting"


def test_nesting_within_the_limit_is_read(monkeypatch):
    m = _nested_if_model(file_limits.MAX_GRAPH_DEPTH)
    assert read_model(m, "test") is m
    monkeypatch.setattr(file_limits, "MAX_PARSE_OVERHEAD", 2**16)  # walked on the wire too
    data = m.SerializeToString()
    assert len(data) * file_limits.WORST_EXPANSION > file_limits.MAX_PARSE_OVERHEAD
    assert read_model(data, "test", accept_bytes=True).SerializeToString() == data
    deeper = _nested_if_model(file_limits.MAX_GRAPH_DEPTH + 1).SerializeToString()
    with pytest.raises(ONNXFileError) as info:
        read_model(deeper, "test", accept_bytes=True)
    assert info.value.code == "onnx-nesting" and "17 deep" in str(info.value)


BOMBS = {  # name: (a ModelProto's bytes, the node limit, the code)
    "empty-nodes": (_empty_messages([7, 1], 20_000), None, "onnx-parse-memory"),
    "empty-attributes-of-one-node": (_empty_messages([7, 1, 5], 20_000), None,
                                     "onnx-parse-memory"),
    "empty-initializers": (_empty_messages([7, 5], 20_000), None, "onnx-parse-memory"),
    "empty-opset-imports": (_empty_messages([8], 20_000), None, "onnx-parse-memory"),
    "packed-dims": (_ld(7, _ld(5, _ld(1, b"\x01" * 100_000))), None, "onnx-parse-memory"),
    "nodes-over-the-count": (_empty_messages([7, 1], 5_000), 1_000, "onnx-too-many-nodes"),
}


@pytest.mark.parametrize("case", list(BOMBS))
def test_a_protobuf_bomb_is_refused_before_it_is_parsed(case, tmp_path, monkeypatch):
    data, nodes, code = BOMBS[case]
    monkeypatch.setattr(file_limits, "MAX_PARSE_OVERHEAD", 2**20)  # 1 MiB: files over 7 KiB
    if nodes is not None:                                          # are walked on the wire
        monkeypatch.setattr(file_limits, "MAX_NODES", nodes)
    _never_parsed(monkeypatch)
    path = tmp_path / "bomb.onnx"
    path.write_bytes(data)
    for source in (path, data):
        with pytest.raises(ONNXFileError) as info:
            read_model(source, "test", accept_bytes=True)
        assert info.value.code == code, str(info.value)


def test_a_large_file_the_wire_walk_cannot_follow_is_not_parsed(monkeypatch):
    # a group (wire type 3), which no ONNX writer emits and protobuf keeps as an unknown
    # field, ahead of a bomb: refused, not parsed past it
    monkeypatch.setattr(file_limits, "MAX_PARSE_OVERHEAD", 2**20)
    _never_parsed(monkeypatch)
    data = b"\xfb\x07\xfc\x07" + _empty_messages([7, 1], 20_000)  # field 127: start, end
    with pytest.raises(ONNXFileError) as info:
        read_model(data, "test", accept_bytes=True)
    assert info.value.code == "onnx-unparsable"


def test_too_many_nodes_in_a_small_file_are_counted_once_parsed(monkeypatch):
    # a file small enough to parse whatever it holds (at most its size x WORST_EXPANSION) is
    # parsed, then its nodes counted: 200,000 in 400 kB (30 MB parsed), over a limit of 100,000
    monkeypatch.setattr(file_limits, "MAX_NODES", 100_000)
    data = _empty_messages([7, 1], 200_000)
    assert len(data) * file_limits.WORST_EXPANSION <= file_limits.MAX_PARSE_OVERHEAD
    with pytest.raises(ONNXFileError) as info:
        read_model(data, "test", accept_bytes=True)
    assert info.value.code == "onnx-too-many-nodes"


@pytest.mark.parametrize(("path", "code"), [([7, 1], "onnx-too-many-nodes"),
                                            ([7, 1, 5], "onnx-parse-memory")],
                         ids=["nodes", "attributes-of-one-node"])
def test_a_large_bomb_is_refused_early_without_parsing(path, code, monkeypatch):
    # 10 million empty messages in 20 MB (the parse would hold 1.5-2 GB): the wire walk
    # stops once the verdict is known, and nothing is parsed
    data = _empty_messages(path, 10_000_000)
    _never_parsed(monkeypatch)
    started = time.process_time()
    with pytest.raises(ONNXFileError) as info:
        read_model(data, "test", accept_bytes=True)
    assert info.value.code == code
    assert time.process_time() - started < 30  # the walk stopped early (about 1 s)


_MEASURE = """
import os, sys, onnx
def resident():  # bytes, now (not the peak: importing onnx peaks higher than these parses)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
data = open(sys.argv[1], "rb").read()
before = resident()
model = onnx.ModelProto()
model.ParseFromString(data)
print(resident() - before)
"""

PROTOBUF_BOMBS = {  # 400,000 of each: tens of MB parsed, enough to measure
    "empty-nodes": _empty_messages([7, 1], 400_000),
    "empty-attributes-of-one-node": _empty_messages([7, 1, 5], 400_000),
    "empty-initializers": _empty_messages([7, 5], 400_000),
    "empty-opset-imports": _empty_messages([8], 400_000),
    "packed-dims": _ld(7, _ld(5, _ld(1, b"\x01" * 400_000))),
}


@pytest.mark.parametrize("case", list(PROTOBUF_BOMBS))
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc (Linux)")
def test_the_parse_cost_bounds_what_protobuf_holds(case, tmp_path):
    # the oracle is the parser's own peak memory, in a fresh process (onnx only)
    data = PROTOBUF_BOMBS[case]
    path = tmp_path / "bomb.onnx"
    path.write_bytes(data)
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True,
                         text=True, check=True)
    grown, bound = int(out.stdout), file_limits.parse_cost(data)[0]
    assert len(data) < grown <= bound, (grown, bound)  # more than the file, less than bound
    assert len(data) * file_limits.WORST_EXPANSION >= bound  # the no-walk shortcut is sound


def test_a_file_over_the_size_limit_is_not_read(tmp_path, monkeypatch):
    path = _write(tmp_path, _model())
    monkeypatch.setattr(file_limits, "MAX_FILE_BYTES", path.stat().st_size - 1)
    _never_parsed(monkeypatch)
    for source in (path, path.read_bytes()):
        with pytest.raises(ONNXFileError) as info:
            read_model(source, "test", accept_bytes=True)
        assert info.value.code == "onnx-file-too-large"


def test_external_data_over_the_size_limit_is_not_read(tmp_path, monkeypatch):
    _data_file()(tmp_path)
    path = _with_w_at("w.bin")(tmp_path)
    monkeypatch.setattr(file_limits, "MAX_FILE_BYTES", path.stat().st_size + 47)
    opened = _Opened(monkeypatch)
    with pytest.raises(ONNXFileError) as info:
        read_model(path, "test")
    assert info.value.code == "onnx-file-too-large" and info.value.name == "W"
    assert opened.paths == [str(path)]


def _initializer_dims(dims, data_type=TensorProto.FLOAT):
    def build():
        t = TensorProto(name="W", data_type=data_type, dims=dims)
        return _model(initializers=[t])
    return build


def _constant_dims(dims):
    def build():
        value = TensorProto(name="k", data_type=TensorProto.DOUBLE, dims=dims)
        return _model([helper.make_node("Constant", [], ["W"], value=value),
                       helper.make_node("MatMul", ["x", "W"], ["y"])], initializers=[])
    return build


def _sparse_dims(dims):
    def build():
        values = numpy_helper.from_array(np.ones(1, np.float32), "S")
        indices = numpy_helper.from_array(np.zeros(1, np.int64), "")
        m = _model()
        m.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, dims))
        return m
    return build


TENSORS = {  # name: (build the model, the code)
    "huge-initializer": (_initializer_dims([2**40, 2**40]), "onnx-tensor-too-large"),
    "just-over-the-limit": (_initializer_dims([file_limits.MAX_TENSOR_BYTES // 4 + 1]),
                            "onnx-tensor-too-large"),
    "huge-constant-node": (_constant_dims([2**31, 2**31]), "onnx-tensor-too-large"),
    "huge-sparse-dense-shape": (_sparse_dims([2**40, 2**40]), "onnx-tensor-too-large"),
    "a-million-dims": (_initializer_dims([2] * 1_000_000), "onnx-tensor-too-large"),
    "huge-int4": (_initializer_dims([2**33 + 2], TensorProto.INT4), "onnx-tensor-too-large"),
    "negative-dim": (_initializer_dims([-1, 3]), "onnx-tensor-dims"),
    "negative-dim-zero-size": (_initializer_dims([-1, 0]), "onnx-tensor-dims"),
    "negative-sparse-dense-shape": (_sparse_dims([-12]), "onnx-tensor-dims"),
}


@pytest.mark.parametrize("case", list(TENSORS))
def test_a_declared_tensor_size_over_the_limit_is_refused_before_allocating(case):
    build, code = TENSORS[case]
    m = build()
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ONNXFileError) as info:
            read_model(m.SerializeToString(), "test", accept_bytes=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.code == code, str(info.value)
    assert peak < 64 * 2**20 and time.perf_counter() - started < 10


def test_the_tensors_together_over_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(file_limits, "MAX_TENSOR_BYTES", 60)  # W alone is 48 bytes
    m = _model(initializers=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(W, "V")])
    with pytest.raises(ONNXFileError) as info:
        read_model(m, "test")
    assert info.value.code == "onnx-tensor-too-large" and info.value.name == "V"
    assert "with the tensors before it" in str(info.value)


def test_huge_dims_in_inputs_and_value_info_are_metadata_only():
    m = _model(inputs=(("x", [2**62, 4]),))
    m.graph.value_info.append(helper.make_tensor_value_info("m", TensorProto.DOUBLE,
                                                            [2**62, 2**62, 2**62]))
    m.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 2**62
    tracemalloc.start()
    try:
        read = read_model(m.SerializeToString(), "test", accept_bytes=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20 and read.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2**62


# --- Graph structure: every value defined before it is read ------------------------------

def _node(op, inputs, outputs, name=None):
    return helper.make_node(op, inputs, outputs, name=name or outputs[0])


GRAPHS = {  # name: (nodes, outputs, the code, the value named, entries' starts)
    "cycle": ([_node("Add", ["x", "b"], ["a"]), _node("Relu", ["a"], ["b"]),
               _node("Relu", ["b"], ["y"])], ("y",), "onnx-cycle", "b",
              ["node 0 (Add 'a')", "node 1 (Relu 'b')"]),
    "self-loop": ([_node("Add", ["x", "y"], ["y"])], ("y",), "onnx-cycle", "y",
                  ["node 0 (Add 'y')"]),
    "long-cycle": ([_node("Relu", ["x"], ["p"]), _node("Add", ["p", "d"], ["a"]),
                    _node("Relu", ["a"], ["b"]), _node("Relu", ["b"], ["c"]),
                    _node("Relu", ["c"], ["d"]), _node("Relu", ["d"], ["y"])], ("y",),
                   "onnx-cycle", "d", ["node 1 (Add 'a')", "node 2", "node 3", "node 4"]),
    "unsorted": ([_node("Relu", ["m"], ["y"]), _node("MatMul", ["x", "W"], ["m"])], ("y",),
                 "onnx-unsorted", "m", ["node 0 (Relu 'y')", "node 1 (MatMul 'm')"]),
    "undefined-input": ([_node("MatMul", ["x", "W"], ["m"]), _node("Add", ["m", "bias"], ["y"])],
                        ("y",), "onnx-undefined-input", "bias", ["node 1 (Add 'y')"]),
    "undefined-output": ([_node("MatMul", ["x", "W"], ["y"])], ("y", "z"),
                         "onnx-undefined-output", "z", ["the graph output 1"]),
    "duplicate-name": ([_node("MatMul", ["x", "W"], ["y"]), _node("Relu", ["x"], ["y"])],
                       ("y",), "onnx-duplicate-definition", "y", ["node 0", "node 1"]),
}


@pytest.mark.parametrize("case", list(GRAPHS))
def test_a_value_read_before_or_without_a_definition_is_refused(case, tmp_path):
    nodes, outputs, code, name, entries = GRAPHS[case]
    m = _model(nodes, outputs=outputs)
    path = _write(tmp_path, m)
    for source in (m, path, m.SerializeToString()):
        with pytest.raises(ONNXFileError) as info:
            read_model(source, "test", accept_bytes=True)
        error = info.value
        assert error.code == code and error.name == name, str(error)
        assert repr(name) in str(error)
        for entry in entries:
            assert any(e.startswith(entry) for e in error.entries), (entry, error.entries)
    with pytest.raises(ONNXFileError) as info:  # lint_onnx: the same code, not the checker's
        ncet.lint_onnx(path, "eran")
    assert info.value.code == code


def _if(then_nodes, then_output, before=(), after=()):
    body = helper.make_graph(then_nodes, "then", [],
                             [helper.make_tensor_value_info(then_output, TensorProto.FLOAT,
                                                            None)])
    other = helper.make_graph([_node("Relu", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    return _model([
        *before,
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True),
                                                                              "c")),
        helper.make_node("If", ["c"], ["y"], name="if", then_branch=body, else_branch=other),
        *after])


def test_a_subgraph_reads_the_values_defined_before_its_node():
    m = _if([_node("Add", ["m", "x"], ["t"])], "t",
            before=[_node("MatMul", ["x", "W"], ["m"])])
    assert read_model(m, "test") is m
    absent = _model([helper.make_node("Clip", ["x", "", "x"], ["y"])])
    assert read_model(absent, "test") is absent  # "": an absent optional input


@pytest.mark.parametrize(("nodes", "before", "after", "code", "name"), [
    ([_node("Relu", ["later"], ["t"])], [], [_node("Relu", ["x"], ["later"])],
     "onnx-undefined-input", "later"),
    ([_node("Relu", ["nowhere"], ["t"])], [], [], "onnx-undefined-input", "nowhere"),
    ([_node("Relu", ["u"], ["t"]), _node("Relu", ["x"], ["u"])], [], [], "onnx-unsorted", "u"),
], ids=["an-outer-value-defined-after-the-node", "undefined", "unsorted-body"])
def test_a_subgraph_reading_what_its_scope_does_not_define_is_refused(nodes, before, after,
                                                                       code, name):
    m = _if(nodes, "t", before=before, after=after)
    with pytest.raises(ONNXFileError) as info:
        read_model(m, "test")
    assert info.value.code == code and info.value.name == name
    assert "the body 'then_branch' of node" in str(info.value) and "(If 'if')" in str(info.value)


def test_a_subgraph_that_defines_a_name_again_is_refused():
    outer = _if([_node("Relu", ["x"], ["m"])], "m", before=[_node("MatMul", ["x", "W"], ["m"])])
    twice = _if([_node("Relu", ["x"], ["t"]), _node("Neg", ["x"], ["t"])], "t")
    body_input = _if([_node("Relu", ["x"], ["t"])], "t")
    then = next(a for a in body_input.graph.node[1].attribute if a.name == "then_branch")
    then.g.input.append(
        helper.make_tensor_value_info("W", TensorProto.FLOAT, None))
    for m, name in ((outer, "m"), (twice, "t"), (body_input, "W")):
        with pytest.raises(ONNXFileError) as info:
            read_model(m, "test")
        assert info.value.code == "onnx-duplicate-definition" and info.value.name == name
        assert "the body 'then_branch' of node" in str(info.value)


# --- Nothing executed -------------------------------------------------------------------

def test_reading_runs_no_onnxruntime_and_no_custom_op(monkeypatch):
    ort = pytest.importorskip("onnxruntime")

    def never(*args, **kwargs):
        raise AssertionError("an onnxruntime session was created")

    monkeypatch.setattr(ort, "InferenceSession", never)
    m = _model([helper.make_node("Exec", ["x"], ["y"], domain="com.evil",
                                 command="rm -rf /")])
    m.opset_import.append(helper.make_opsetid("com.evil", 1))
    assert read_model(m.SerializeToString(), "test", accept_bytes=True).graph.node[0].op_type \
        == "Exec"


# --- The corpus reads as onnx.load reads it -----------------------------------------------

def test_every_corpus_network_reads_as_onnx_loads_it():
    root = corpus_root()
    networks = corpus_networks()
    assert len(networks) == 55
    for network in networks:
        path = root / network
        expected = onnx.load(str(path))
        initializers = {t.name for t in expected.graph.initializer}
        shadowed = [v.name for v in expected.graph.input if v.name in initializers]
        if shadowed:  # the one refusal the reader had before the hostile-file checks
            with pytest.raises(ONNXFileError) as info:
                read_model(path, "test")
            assert info.value.code == "onnx-input-shadows-initializer", (network, info.value)
            assert info.value.name == shadowed[0]
        else:
            read = read_model(path, "test")
            assert read.SerializeToString(deterministic=True) == \
                expected.SerializeToString(deterministic=True), network
        imported = read_model(path, "from_onnx", weights_as_inputs=True)  # as from_onnx reads
        assert imported.SerializeToString(deterministic=True) == \
            expected.SerializeToString(deterministic=True), network


def test_every_reading_code_is_documented():
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    text = "".join(open(os.path.join(docs, name), encoding="utf-8").read()
                   for name in ("export.md", "exactness.md"))
    assert [code for code in READING_REASONS if f"`{code}`" not in text] == []
