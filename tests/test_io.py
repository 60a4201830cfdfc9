"""Tests for ncet.format.file: round trips, byte-identical saves, hostile files and fuzzing."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import pickle
import struct
import tracemalloc

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ncet
import ncet.format.file as nio
import ncet.format.header
from ncet.errors import GraphIRFormatError
from ncet.format.file import load, save
from ncet.ir import OP_SCHEMAS, GraphIR, IRNode, Source

# The layout as docs/file-format.md describes it, written out independently of ncet.format.file.
MAGIC = b"NCETIR\n\x00"
PREFIX = struct.Struct("<8sIQ")


def pad(n: int) -> bytes:
    return bytes(-n % 8)


def dumps(header) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def split(blob: bytes) -> tuple[dict, bytes]:
    """A saved file's header (parsed) and its data section."""
    _, _, n = PREFIX.unpack_from(blob)
    start = PREFIX.size + n + len(pad(PREFIX.size + n))
    return json.loads(blob[PREFIX.size:PREFIX.size + n]), blob[start:]


def pack(header=None, data=b"", *, text=None, magic=MAGIC, version=1, length=None) -> bytes:
    text = dumps(header) if text is None else text
    length = len(text) if length is None else length
    return PREFIX.pack(magic, version, length) + text + pad(PREFIX.size + len(text)) + data


# --- Hand-built GraphIRs --------------------------------------------------------------------


def src(name: str, op: str = "call_module", target: str = "", module: str = "") -> Source:
    return Source(name, op, target or name, module, f"torch.nn.{module}" if module else "",
                  f"model.py:{len(name)}")


def bits(*patterns: int, dtype: torch.dtype, via: torch.dtype) -> torch.Tensor:
    """A tensor of `dtype` holding exactly the given (unsigned) bit patterns."""
    width = 8 * via.itemsize
    signed = [p - (p >> (width - 1) << width) for p in patterns]
    return torch.tensor(signed, dtype=via).view(dtype)


def patterns(t: torch.Tensor, via: torch.dtype) -> list[int]:
    """The unsigned bit patterns of a tensor's elements."""
    return [v % 2 ** (8 * via.itemsize) for v in t.view(via).tolist()]


def special_constants() -> dict[str, torch.Tensor]:
    """One constant per allowed dtype, with the bit patterns most likely to be lost."""
    return {
        "f32": bits(0x80000000, 0x00000001, 0x7FC00001, 0x7F800001, 0xFFC00000, 0x7F800000,
                    dtype=torch.float32, via=torch.int32),  # -0, subnormal, NaN payloads, inf
        "f64": bits(2**63, 1, 0x7FF8000000000001, 0x7FF0000000000001,
                    dtype=torch.float64, via=torch.int64),
        "f16": bits(0x8000, 0x0001, 0x7E01, 0x7C01, dtype=torch.float16, via=torch.int16),
        "bf16": bits(0x8000, 0x0001, 0x7FC1, 0x7F81, dtype=torch.bfloat16, via=torch.int16),
        "i8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "i16": torch.tensor([-2**15, 2**15 - 1], dtype=torch.int16),
        "i32": torch.tensor([[-2**31], [2**31 - 1]], dtype=torch.int32),
        "i64": torch.tensor([-2**63, 2**63 - 1], dtype=torch.int64),
        "u8": torch.arange(256, dtype=torch.int64).to(torch.uint8).reshape(16, 16),
        "flags": torch.tensor([True, False, True]),
        "empty": torch.empty(0, 3),
        "scalar": torch.tensor(0.1, dtype=torch.float64),
        "transposed": torch.arange(12.0).reshape(3, 4).t(),  # not contiguous
    }


def linear_ir() -> GraphIR:
    """Input -> Linear(weight, bias) -> ReLU -> Output."""
    weight = torch.linspace(-1, 1, 12).reshape(3, 4)
    bias = bits(0x80000000, 0x00000001, 0x7FC00123, dtype=torch.float32, via=torch.int32)
    nodes = (
        IRNode("x", "Input", (), {"index": 0}, (4,), "float32", src("x", "placeholder")),
        IRNode("fc", "Linear", ("x",), {"weight": "fc.weight", "bias": "fc.bias"}, (3,),
               "float32", src("fc", module="Linear")),
        IRNode("relu", "ReLU", ("fc",), {}, (3,), "float32", src("relu", "call_function")),
        IRNode("output", "Output", ("relu",), {"tuple": False}, None, "", src("output", "output")),
    )
    return GraphIR(nodes, {"fc.weight": weight, "fc.bias": bias})


# One value per attribute kind of OP_SCHEMAS; floats chosen so that a lossy repr would show.
# Sequences are lists, as ncet.convert builds them (and as load returns them).
KIND_SAMPLES = {
    "int": -3, "int?": None, "float": 0.30000000000000004, "float?": -0.0, "bool": True,
    "str": "zeros", "ints": [1, 2], "ints?": [3, None], "index": [0, [1, 3, 1], None],
    "const": "f32", "const?": "f64",
}


def all_ops_ir() -> GraphIR:
    """Every op_type once, its attributes filled from KIND_SAMPLES, all applied to one input."""
    nodes = [IRNode("x", "Input", (), {"index": 0}, (4, 5), "float32", src("x", "placeholder"))]
    for op_type, (arity, schema) in OP_SCHEMAS.items():
        if op_type in ("Input", "Output"):
            continue
        attrs = {key: KIND_SAMPLES[kind] for key, kind in schema.items()}
        nodes.append(IRNode(op_type.lower(), op_type, ("x",) * (2 if arity is None else arity),
                            attrs, (4, 5), "float32", src(op_type.lower(), module=op_type)))
    nodes.append(IRNode("output", "Output", tuple(n.name for n in nodes[1:]), {"tuple": True},
                        None, "", src("output", "output")))
    return GraphIR(tuple(nodes), special_constants())


def raw(t: torch.Tensor) -> bytes:
    return bytes(t.detach().contiguous().reshape(-1).view(torch.uint8).tolist())


def assert_same(a: GraphIR, b: GraphIR) -> None:
    assert a.nodes == b.nodes
    assert [repr(n) for n in a.nodes] == [repr(n) for n in b.nodes]  # types, -0.0, float bits
    assert [n.source for n in a.nodes] == [n.source for n in b.nodes]
    assert list(a.constants) == list(b.constants)
    for name, t in a.constants.items():
        u = b.constants[name]
        assert (u.dtype, u.shape) == (t.dtype, t.shape), name
        assert raw(u) == raw(t), name


def saved(ir: GraphIR, tmp_path, name: str = "g.ncet", verify: bool = True) -> bytes:
    path = tmp_path / name
    save(ir, path, verify=verify)
    return path.read_bytes()


# --- Round trips and determinism -----------------------------------------------------------


@pytest.mark.parametrize("build", [linear_ir, all_ops_ir], ids=["linear", "all-ops"])
def test_round_trip_is_exact(build, tmp_path):
    ir = build()
    # all-ops is a format test: its attributes exercise every kind, not a computable graph.
    save(ir, tmp_path / "g.ncet", verify=build is linear_ir)
    back = load(str(tmp_path / "g.ncet"), verify=build is linear_ir)
    assert_same(ir, back)


def test_all_ops_ir_covers_every_op_type_and_kind():
    ir = all_ops_ir()
    assert {n.op_type for n in ir.nodes} == set(OP_SCHEMAS)
    kinds = {kind for _, schema in OP_SCHEMAS.values() for kind in schema.values()}
    assert kinds <= set(KIND_SAMPLES)


def test_special_float_bits_survive(tmp_path):
    save(all_ops_ir(), tmp_path / "g.ncet", verify=False)
    back = load(tmp_path / "g.ncet", verify=False)
    assert patterns(back.constants["f32"], torch.int32) == [
        0x80000000, 0x00000001, 0x7FC00001, 0x7F800001, 0xFFC00000, 0x7F800000]
    assert patterns(back.constants["f16"], torch.int16) == [0x8000, 0x0001, 0x7E01, 0x7C01]
    assert patterns(back.constants["bf16"], torch.int16) == [0x8000, 0x0001, 0x7FC1, 0x7F81]
    slope = back.node("elementwiseaffine").attrs["scalar"]
    assert slope == 0.0 and math.copysign(1.0, slope) == -1.0
    assert back.node("leakyrelu").attrs["negative_slope"] == 0.30000000000000004


def test_loaded_constants_own_their_memory(tmp_path):
    ir = linear_ir()
    save(ir, tmp_path / "g.ncet")
    back = load(tmp_path / "g.ncet")
    weight = back.constants["fc.weight"]
    assert weight.is_contiguous() and not weight.requires_grad and weight.device.type == "cpu"
    weight.add_(1)  # writable, and shares nothing with the original or another load
    assert raw(load(tmp_path / "g.ncet").constants["fc.weight"]) == raw(ir.constants["fc.weight"])


@pytest.mark.parametrize("build", [linear_ir, all_ops_ir], ids=["linear", "all-ops"])
def test_saving_twice_gives_identical_bytes(build, tmp_path):
    verify = build is linear_ir  # all-ops: the format alone
    first = saved(build(), tmp_path, "a.ncet", verify)
    assert saved(build(), tmp_path, "b.ncet", verify) == first  # separately built, equal graphs
    back = load(tmp_path / "a.ncet", verify=verify)
    assert saved(back, tmp_path, "c.ncet", verify) == first  # save . load = id


def test_tuples_in_attrs_are_stored_as_lists(tmp_path):
    ir = all_ops_ir()
    as_tuples = with_node(ir, "conv2d", attrs={**ir.node("conv2d").attrs, "stride": (1, 2)})
    as_lists = with_node(ir, "conv2d", attrs={**ir.node("conv2d").attrs, "stride": [1, 2]})
    assert saved(as_tuples, tmp_path, "t.ncet", verify=False) == \
        saved(as_lists, tmp_path, "l.ncet", verify=False)
    back = load(tmp_path / "t.ncet", verify=False)
    assert back.node("conv2d").attrs["stride"] == [1, 2]
    assert back.node("conv2d").shape == (4, 5)


def test_layout_matches_the_documented_format(tmp_path):
    blob = saved(linear_ir(), tmp_path)
    magic, version, length = PREFIX.unpack_from(blob)
    assert (magic, version) == (MAGIC, 1)
    header, data = split(blob)
    assert dumps(header) == blob[PREFIX.size:PREFIX.size + length]
    assert [c["name"] for c in header["constants"]] == ["fc.weight", "fc.bias"]
    assert all(c["offset"] % 8 == 0 for c in header["constants"])
    assert pack(header, data) == blob


@settings(derandomize=True, max_examples=100, deadline=None)
@given(dtype=st.sampled_from(sorted(nio.DTYPES)), payload=st.binary(max_size=64))
def test_any_bit_pattern_round_trips(dtype, payload, tmp_path_factory):
    torch_dtype = nio.DTYPES[dtype]
    size = torch_dtype.itemsize
    payload = payload[:len(payload) // size * size]
    if dtype == "bool":
        payload = bytes(b & 1 for b in payload)
    tensor = (torch.frombuffer(bytearray(payload), dtype=torch.uint8).view(torch_dtype).clone()
              if payload else torch.empty(0, dtype=torch_dtype))
    ir = GraphIR(linear_ir().nodes, {**linear_ir().constants, "extra": tensor})
    path = tmp_path_factory.getbasetemp() / "bits.ncet"
    save(ir, path)
    assert_same(ir, load(path))


# --- What save refuses ---------------------------------------------------------------------


def with_node(ir: GraphIR, name: str, **changes) -> GraphIR:
    nodes = tuple(dataclasses.replace(n, **changes) if n.name == name else n for n in ir.nodes)
    return GraphIR(nodes, ir.constants)


def with_slope(value) -> GraphIR:
    return with_node(all_ops_ir(), "leakyrelu", attrs={"negative_slope": value})


UNSAVEABLE = [
    pytest.param(with_slope(math.nan), id="nan-attr"),
    pytest.param(with_slope(-math.inf), id="inf-attr"),
    pytest.param(with_slope(torch.tensor(0.1)), id="tensor-attr"),
    pytest.param(with_node(linear_ir(), "relu", shape=(-1,)), id="negative-shape"),
    pytest.param(with_node(linear_ir(), "relu", shape=(0, 2**62, 2**62)), id="strides-overflow"),
    pytest.param(with_node(linear_ir(), "relu", dtype=torch.float32), id="dtype-not-a-name"),
    pytest.param(with_node(linear_ir(), "relu", source=None), id="no-provenance"),
    pytest.param(with_node(linear_ir(), "relu", source=dataclasses.replace(
        linear_ir().node("relu").source, location=3)), id="provenance-not-text"),
    pytest.param(GraphIR(linear_ir().nodes, {**linear_ir().constants,
                                             "fc.bias": torch.zeros(3, dtype=torch.complex64)}),
                 id="complex-constant"),
    pytest.param(GraphIR(linear_ir().nodes, {**linear_ir().constants,
                                             "fc.bias": torch.zeros(3).to_sparse()}),
                 id="sparse-constant"),
    pytest.param(GraphIR(linear_ir().nodes, {"fc.weight": linear_ir().constants["fc.weight"]}),
                 id="missing-constant"),
]
"""GraphIRs `save` refuses (tests/test_graphir_hash.py holds hash_graphir and to_onnx to
the same rows)."""


@pytest.mark.parametrize("ir", UNSAVEABLE)
def test_save_refuses_what_load_would_reject(ir, tmp_path):
    with pytest.raises(ValueError, match="cannot save"):
        save(ir, tmp_path / "g.ncet")


class _Reshaped(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x.reshape(-1, 2, 4)).reshape(-1, 8)


def test_save_refuses_a_graph_that_does_not_compute_what_it_declares(tmp_path):
    """`save` runs load's meaning check: a Reshape declaring per-sample shape (4, 2) while it
    computes (2, 4) is refused at save time, not written into a file load refuses; with
    verify=False it is written, and load(verify=False) reads it back."""
    ir = ncet.convert(_Reshaped(), (8,))
    bad = with_node(ir, "reshape", shape=(4, 2))
    path = tmp_path / "g.ncet"
    with pytest.raises(ValueError, match=r"cannot save this GraphIR: node 'reshape' \(Reshape\) "
                                         r"declares per-sample shape \[4, 2\] but computes "
                                         r"\[2, 4\]") as info:
        save(bad, path)
    assert not isinstance(info.value, GraphIRFormatError) and not path.exists()
    save(bad, path, verify=False)
    with pytest.raises(GraphIRFormatError, match="declares per-sample shape"):
        load(path)
    assert load(path, verify=False).nodes == bad.nodes
    save(ir, path)  # the GraphIR as converted saves
    assert load(path).nodes == ir.nodes


def test_save_names_the_provenance_field_it_refuses(tmp_path):
    with pytest.raises(ValueError, match=r"'relu'.*source\.fx_name: expected a string"):
        save(with_node(linear_ir(), "relu", source=None), tmp_path / "g.ncet")


def test_save_needs_a_graphir(tmp_path):
    with pytest.raises(TypeError, match="GraphIR"):
        save({"nodes": []}, tmp_path / "g.ncet")


# --- Hostile files -------------------------------------------------------------------------


def node_of(header: dict, op_type: str) -> dict:
    return next(n for n in header["nodes"] if n["op_type"] == op_type)


def edit(change):
    """A row that edits the parsed header (in place) and re-packs the file."""
    def make(header, data):
        change(header)
        return pack(header, data)
    return make


def attr(op_type: str, key: str, value):
    return edit(lambda h: node_of(h, op_type)["attrs"].__setitem__(key, value))


def field(index: int, key: str, value):
    return edit(lambda h: h["nodes"][index].__setitem__(key, value))


def const(index: int, key: str, value):
    return edit(lambda h: h["constants"][index].__setitem__(key, value))


def header_text(text: bytes):
    return lambda h, d: pack(text=text)


def leaky_slope_text(literal: str):
    """The real header with LeakyReLU's slope spelled as a raw JSON literal."""
    def make(h, d):
        node_of(h, "LeakyReLU")["attrs"]["negative_slope"] = "@SLOPE@"
        return pack(text=dumps(h).replace(b'"@SLOPE@"', literal.encode()), data=d)
    return make


def padded_header(h, d):
    """A header padded with spaces to leave 2+ padding bytes, cut off inside that padding."""
    text = dumps(h) + b" " * next(k for k in range(8) if -(PREFIX.size + len(dumps(h)) + k) % 8 > 1)
    return pack(text=text, data=d)[:PREFIX.size + len(text) + 1]


def move(h, index, to):
    h["nodes"].insert(to, h["nodes"].pop(index))


def input_y(h):
    h["nodes"].insert(-1, copy.deepcopy(h["nodes"][0]) | {"name": "y"})


def gap(h, d):
    h["constants"][-1]["offset"] += 8
    return pack(h, d[:-h["constants"][-1]["nbytes"]] + bytes(8) + d[-h["constants"][-1]["nbytes"]:])


def data_byte(name: str, at: int, value: int):
    def make(h, d):
        entry = next(c for c in h["constants"] if c["name"] == name)
        d = bytearray(d)
        d[entry["offset"] + at] = value
        return pack(h, bytes(d))
    return make


def padding_byte(h, d):
    """A non-zero byte in the padding after the first constant whose end is not aligned."""
    end = next(e for e in (c["offset"] + c["nbytes"] for c in h["constants"]) if e % 8)
    d = bytearray(d)
    d[end] = 1
    return pack(h, bytes(d))


def header_padding_byte(h, d):
    """A header padded with spaces so that padding follows it, and that padding set to 1s."""
    text = dumps(h) + b" " * next(k for k in range(8) if (PREFIX.size + len(dumps(h)) + k) % 8)
    return PREFIX.pack(MAGIC, 1, len(text)) + text + b"\x01" * len(pad(PREFIX.size + len(text))) + d


def output_not_last(h):
    node_of(h, "Output")["inputs"] = ["x"]
    move(h, -1, 1)


def respelled(text_of):
    """A row whose header is the real one written by `text_of` (another JSON spelling)."""
    return lambda h, d: pack(text=text_of(h).encode("utf-8"), data=d)


def source_text(h: dict, text: str) -> dict:
    h["nodes"][0]["source"]["location"] = text
    return h


def cut(n: int):
    return lambda h, d: pack(h, d)[:n]


HOSTILE = [
    # The container: magic, version, lengths, truncation, padding, trailing bytes.
    ("empty-file", lambda h, d: b"", "the file is empty"),
    ("wrong-magic", lambda h, d: pack(h, d, magic=b"NCETIX\n\x00"), "wrong magic"),
    ("truncated-in-magic", cut(5), "truncated in the magic"),
    ("truncated-in-prefix", cut(13), "truncated in the 20-byte prefix"),
    ("unknown-version", lambda h, d: pack(h, d, version=2), "format version 2 is not supported"),
    ("version-zero", lambda h, d: pack(h, d, version=0), "format version 0"),
    ("header-length-beyond-file", lambda h, d: pack(h, d, length=2**63), "runs past the end"),
    ("header-length-short", lambda h, d: pack(h, d, length=len(dumps(h)) - 9), "invalid JSON"),
    ("truncated-in-header", cut(PREFIX.size + 40), "runs past the end"),
    ("truncated-in-header-padding", padded_header, "truncated in the padding"),
    ("truncated-in-data", lambda h, d: pack(h, d)[:-3], "truncated?"),
    ("truncated-at-data-start", lambda h, d: pack(h, b""), "truncated?"),
    ("nonzero-header-padding", header_padding_byte, "non-zero bytes in the padding after"),
    ("nonzero-padding-between-constants", padding_byte, "non-zero bytes in the padding before"),
    ("trailing-zero-byte", lambda h, d: pack(h, d) + b"\x00", "trailing bytes"),
    ("trailing-garbage", lambda h, d: pack(h, d) + b"garbage!", "trailing bytes"),
    # The header as text.
    ("header-invalid-utf8", header_text(b'{"format":"\xff\xfe"}'), "invalid UTF-8"),
    ("header-invalid-json", header_text(b'{"format":'), "invalid JSON"),
    ("header-not-object", header_text(b"[]"), "header: expected a JSON object"),
    ("header-duplicate-key", header_text(b'{"nodes":[],"nodes":[]}'), "duplicate JSON keys"),
    ("header-nan-literal", leaky_slope_text("NaN"), "NaN is not allowed"),
    ("header-infinity-literal", leaky_slope_text("-Infinity"), "-Infinity is not allowed"),
    ("header-float-overflows-to-inf", leaky_slope_text("1e400"), "expected a finite number"),
    ("header-int-too-many-digits", leaky_slope_text("9" * 5000), "invalid JSON"),
    ("header-nested-too-deeply", header_text(b"[" * 100_000 + b"]" * 100_000), "too deeply"),
    # Top-level fields.
    ("header-missing-key", edit(lambda h: h.pop("nodes")), "missing keys ['nodes']"),
    ("header-extra-key", edit(lambda h: h.update(extra=1)), "unexpected keys ['extra']"),
    ("format-name-wrong", edit(lambda h: h.update(format="onnx")), "header.format"),
    ("header-version-mismatch", edit(lambda h: h.update(version=2)), "header.version"),
    ("header-version-string", edit(lambda h: h.update(version="1")), "header.version"),
    ("header-version-bool", edit(lambda h: h.update(version=True)), "header.version"),
    # Nodes.
    ("nodes-not-list", edit(lambda h: h.update(nodes={})), "nodes: expected a non-empty list"),
    ("nodes-empty", edit(lambda h: h.update(nodes=[])), "nodes: expected a non-empty list"),
    ("node-not-object", edit(lambda h: h["nodes"].__setitem__(1, "relu")), "expected a JSON obj"),
    ("node-missing-key", edit(lambda h: h["nodes"][1].pop("dtype")), "missing keys ['dtype']"),
    ("node-extra-key", field(1, "doc", ""), "unexpected keys ['doc']"),
    ("node-name-not-string", field(1, "name", 7), "nodes[1].name"),
    ("node-name-empty", field(1, "name", ""), "nodes[1].name"),
    ("node-name-duplicated", field(2, "name", "x"), "duplicate node name 'x'"),
    ("op-type-unknown", field(1, "op_type", "Softmax"), "unknown op_type 'Softmax'"),
    ("op-type-not-string", field(1, "op_type", ["ReLU"]), "unknown op_type ['ReLU']"),
    ("inputs-not-list", field(1, "inputs", "x"), "expected a list of node names"),
    ("input-not-string", field(1, "inputs", [0]), "inputs[0]: expected node names"),
    ("input-names-no-node", field(1, "inputs", ["nope"]), "'nope' names no earlier node"),
    ("input-names-later-node", field(1, "inputs", ["adaptiveavgpool2d"]), "no earlier node"),
    ("input-names-itself", field(1, "inputs", ["linear"]), "'linear' names no earlier node"),
    ("arity-too-many", edit(lambda h: node_of(h, "ReLU").update(inputs=["x", "x"])),
     "ReLU takes 1 inputs, got 2"),
    ("arity-too-few", edit(lambda h: node_of(h, "Add").update(inputs=["x"])), "Add takes 2"),
    ("output-without-inputs", edit(lambda h: node_of(h, "Output").update(inputs=[])),
     "Output takes one or more inputs, got 0"),
    ("output-cut-not-a-list", edit(lambda h: node_of(h, "Output")["attrs"].update(cut="fc")),
     "expected a list (empty when the cut leaves nothing out) of [node name, why]"),
    ("output-cut-not-pairs", edit(lambda h: node_of(h, "Output")["attrs"].update(cut=["fc"])),
     "kind 'cut'"),
    ("output-cut-name-twice", edit(lambda h: node_of(h, "Output")["attrs"].update(
        cut=[["fc", "a"], ["fc", "b"]])), "each name once"),
    ("relu-with-a-cut", edit(lambda h: node_of(h, "ReLU")["attrs"].update(cut=[["fc", "a"]])),
     "unexpected keys ['cut']"),
    ("output-stop-at-not-a-string", edit(lambda h: node_of(h, "Output")["attrs"].update(
        cut=[["fc", "a"]], cut_trailing=False, stop_at=3)), "expected a string (kind 'str')"),
    ("output-cut-trailing-not-a-bool", edit(lambda h: node_of(h, "Output")["attrs"].update(
        cut=[["fc", "a"]], cut_trailing=1)), "expected a bool (kind 'bool')"),
    ("attrs-not-object", edit(lambda h: node_of(h, "ReLU").update(attrs=[])), "expected a JSON"),
    ("attrs-missing-key", edit(lambda h: node_of(h, "LeakyReLU")["attrs"].clear()),
     "missing keys ['negative_slope']"),
    ("attrs-extra-key", attr("ReLU", "inplace", False), "unexpected keys ['inplace']"),
    ("attr-int-given-string", attr("Flatten", "start_dim", "1"), "expected an int"),
    ("attr-int-given-bool", attr("Flatten", "start_dim", True), "expected an int"),
    ("attr-int-given-float", attr("Flatten", "start_dim", 1.0), "expected an int"),
    ("attr-int-over-int64", attr("Flatten", "start_dim", 2**63), "expected an int"),
    ("attr-float-given-string", attr("LeakyReLU", "negative_slope", "0.1"), "finite number"),
    ("attr-float-given-bool", attr("LeakyReLU", "negative_slope", False), "finite number"),
    ("attr-float-given-huge-int", attr("LeakyReLU", "negative_slope", 10**400), "finite number"),
    ("attr-bool-given-int", attr("AvgPool2d", "ceil_mode", 1), "expected a bool"),
    ("attr-ints-given-string", attr("Conv2d", "stride", "11"), "expected a list of ints"),
    ("attr-ints-item-bool", attr("Conv2d", "stride", [1, True]), "expected a list of ints"),
    ("attr-ints-item-null", attr("Conv2d", "stride", [1, None]), "expected a list of ints"),
    ("attr-str-given-int", attr("Conv2d", "padding_mode", 3), "expected a string"),
    ("attr-const-names-no-constant", attr("Linear", "weight", "nope"), "names no constant"),
    ("attr-const-given-int", attr("Linear", "weight", 0), "expected a constant name"),
    ("attr-const-given-null", attr("Linear", "weight", None), "expected a constant name"),
    ("attr-const?-names-no-constant", attr("BatchNorm", "bias", "gone"), "names no constant"),
    ("attr-int?-given-string", attr("AvgPool2d", "divisor_override", "2"), "int or null"),
    ("attr-float?-given-list", attr("ElementwiseAffine", "scalar", [1.0]), "number or null"),
    ("attr-index-not-list", attr("GetItem", "index", 0), "kind 'index'"),
    ("attr-index-item-string", attr("GetItem", "index", ["a"]), "kind 'index'"),
    ("attr-index-item-float", attr("Slice", "index", [1.5]), "kind 'index'"),
    ("attr-index-slice-two-items", attr("Slice", "index", [[0, 1]]), "kind 'index'"),
    ("attr-index-slice-bool", attr("Slice", "index", [[0, 1, True]]), "kind 'index'"),
    ("attr-index-slice-null", attr("Slice", "index", [[0, None, 1]]), "kind 'index'"),
    ("attr-index-nested-too-deep", attr("Slice", "index", [[[0, 1, 1], 1, 1]]), "kind 'index'"),
    ("shape-not-list", field(1, "shape", 4), "expected a list of non-negative int64 sizes"),
    ("shape-negative", field(1, "shape", [4, -1]), "shape[1]: expected non-negative"),
    ("shape-item-bool", field(1, "shape", [True]), "shape[0]: expected non-negative"),
    ("shape-item-float", field(1, "shape", [4.0]), "shape[0]: expected non-negative"),
    ("shape-item-over-int64", field(1, "shape", [2**63]), "shape[0]: expected non-negative"),
    ("shape-numel-overflows", field(1, "shape", [2**62, 4]), "overflows int64"),
    ("shape-rank-over-limit", field(1, "shape", [1] * 65), "rank 65 is over the 64 limit"),
    ("shape-strides-overflow", field(1, "shape", [0, 2**62, 2**62]), "cannot lay out"),
    ("shape-null-for-non-output", field(1, "shape", None), "expected a list of non-negative"),
    ("output-shape-not-null", field(-1, "shape", [4]), "must be null for Output"),
    ("dtype-not-string", field(1, "dtype", 32), "dtype: expected a string"),
    ("source-not-object", field(1, "source", "model.py:3"), "source: expected a JSON object"),
    ("source-missing-field", edit(lambda h: h["nodes"][1]["source"].pop("location")),
     "missing keys ['location']"),
    ("source-field-not-string", edit(lambda h: h["nodes"][1]["source"].update(fx_op=None)),
     "source.fx_op: expected a string"),
    ("output-missing", edit(lambda h: h["nodes"].pop()), "the last node must be Output"),
    ("output-not-last", edit(output_not_last), "Output must be the last node"),
    ("output-twice", edit(lambda h: h["nodes"].append(copy.deepcopy(h["nodes"][-1]))),
     "Output must be the last node"),
    ("output-twice-renamed", edit(lambda h: h["nodes"].append(
        copy.deepcopy(h["nodes"][-1]) | {"name": "output2"})), "Output must be the last node"),
    ("input-after-other-nodes", edit(input_y), "Input nodes must come first"),
    # Constants.
    ("constants-not-list", edit(lambda h: h.update(constants={})), "constants: expected a list"),
    ("constant-not-object", edit(lambda h: h["constants"].__setitem__(0, "f32")), "JSON object"),
    ("constant-missing-key", edit(lambda h: h["constants"][0].pop("nbytes")),
     "missing keys ['nbytes']"),
    ("constant-extra-key", const(0, "strides", [1]), "unexpected keys ['strides']"),
    ("constant-name-not-string", const(0, "name", 1), "constants[0].name"),
    ("constant-name-empty", const(0, "name", ""), "constants[0].name"),
    ("constant-names-duplicated", const(1, "name", "f32"), "expected a new non-empty name"),
    ("constant-renamed-away", const(0, "name", "g32"), "names no constant: 'f32'"),
    ("constant-dtype-complex", const(0, "dtype", "complex64"), "'complex64' is not one of"),
    ("constant-dtype-object", const(0, "dtype", "object"), "'object' is not one of"),
    ("constant-dtype-not-string", const(0, "dtype", 4), "4 is not one of"),
    ("constant-shape-negative", const(0, "shape", [-6]), "shape[0]: expected non-negative"),
    ("constant-shape-bool", const(0, "shape", [True]), "shape[0]: expected non-negative"),
    ("constant-shape-overflows", const(0, "shape", [2**40, 2**40]), "overflows int64"),
    ("constant-empty-strides-overflow", edit(lambda h: h["constants"].insert(0, {
        "name": "void", "dtype": "float32", "shape": [0, 2**62, 2**62], "offset": 0,
        "nbytes": 0})), "PyTorch cannot lay out a tensor of shape [0, "),
    ("constant-nbytes-mismatch", const(0, "nbytes", 20), "expected 24 (numel x itemsize)"),
    ("constant-nbytes-string", const(0, "nbytes", "24"), "expected 24 (numel x itemsize)"),
    ("constant-nbytes-float", const(0, "nbytes", 24.0), "expected 24 (numel x itemsize)"),
    ("constant-declares-8-gib", edit(lambda h: h["constants"][-1].update(
        shape=[2**30], dtype="float64", nbytes=2**33)), "run past the end"),
    ("constant-offset-misaligned", const(1, "offset", 28), "non-negative multiple of 8"),
    ("constant-offset-negative", const(0, "offset", -8), "non-negative multiple of 8"),
    ("constant-offset-string", const(0, "offset", "0"), "non-negative multiple of 8"),
    ("constant-offset-out-of-bounds", const(1, "offset", 2**40), "run past the end"),
    ("constant-offsets-overlap", const(1, "offset", 16), "overlaps 'f32'"),
    ("constant-offset-gap", gap, "leaves a gap"),
    ("constant-bool-byte-not-0-or-1", data_byte("flags", 1, 2), "bytes other than 0 and 1"),
    # The header's spelling (issue 21, item 8): only the bytes save writes are accepted.
    ("header-indented", respelled(lambda h: json.dumps(h, sort_keys=True, indent=1)),
     "not in canonical form at byte 21 of the file"),  # the newline after "{"
    ("header-spaces", respelled(lambda h: json.dumps(h, sort_keys=True)), "not in canonical"),
    ("header-keys-unsorted", respelled(lambda h: json.dumps(
        dict(reversed(h.items())), separators=(",", ":"))), "not in canonical form at byte 22"),
    ("header-trailing-space", respelled(lambda h: dumps(h).decode() + " "),
     "' ' where save writes the end of the header"),
    ("header-escaped-ascii", respelled(lambda h: dumps(h).decode().replace(
        '"name":"x"', '"name":"\\u0078"')), "'\\\\u0078"),
    ("header-raw-del", respelled(lambda h: json.dumps(
        source_text(h, "\x7f"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)),
     "'\\x7f\",\"module_p' where save writes '\\\\u007f"),
    ("header-raw-utf8", respelled(lambda h: json.dumps(
        source_text(h, "caf\u00e9"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)),
     "where save writes '\\\\u00e9"),
    ("header-float-spelled-long", respelled(lambda h: dumps(h).decode().replace(
        "0.30000000000000004", "3.0000000000000004e-1")), "not in canonical form"),
    ("header-int-spelled-as-float", respelled(lambda h: dumps(h).decode().replace(
        '"index":0', '"index":0.0')), "expected an int"),  # the schema speaks first
]


@pytest.fixture(scope="module")
def base_file(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("io") / "all-ops.ncet"
    save(all_ops_ir(), path, verify=False)  # the format alone: all-ops computes nothing
    return path.read_bytes()


@pytest.mark.parametrize("make, message", [row[1:] for row in HOSTILE],
                         ids=[row[0] for row in HOSTILE])
def test_hostile_file_is_rejected(make, message, base_file, tmp_path):
    path = tmp_path / "hostile.ncet"
    path.write_bytes(make(*split(base_file)))
    tracemalloc.start()
    try:
        with pytest.raises(GraphIRFormatError, match=r"hostile\.ncet'.*") as info:
            load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message in str(info.value)
    assert peak < 2 * len(path.read_bytes()) + 2**22  # nothing sized by a declared length


def test_hostile_table_has_unique_ids():
    assert len({row[0] for row in HOSTILE}) == len(HOSTILE)


class Trap:
    """Unpickling this creates the marker file: proof that something was unpickled."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("write", [
    pytest.param(lambda obj, path: path.write_bytes(pickle.dumps(obj)), id="pickle"),
    pytest.param(lambda obj, path: path.write_bytes(pickle.dumps(obj, protocol=0)),
                 id="pickle-protocol-0"),
    pytest.param(lambda obj, path: torch.save(obj, path), id="torch-save"),
    pytest.param(lambda obj, path: path.write_bytes(
        PREFIX.pack(MAGIC, 1, 40) + pickle.dumps(obj)), id="pickle-behind-magic"),
])
def test_pickle_payload_is_never_unpickled(write, tmp_path):
    marker = tmp_path / "unpickled"
    with open(pickle.loads(pickle.dumps(Trap(marker))).name):  # the trap is live
        assert marker.exists()
    marker.unlink()
    path = tmp_path / "model.ncet"
    write(Trap(marker), path)
    with pytest.raises(GraphIRFormatError):
        load(path)
    assert not marker.exists()


def test_directory_is_rejected(tmp_path):
    with pytest.raises(GraphIRFormatError, match="is a directory"):
        load(tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_rejected_without_reading(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(GraphIRFormatError, match="not a regular file"):
        load(tmp_path / "pipe")


def test_file_over_the_size_cap_is_rejected(base_file, tmp_path, monkeypatch):
    (tmp_path / "big.ncet").write_bytes(base_file)
    monkeypatch.setattr(nio, "MAX_FILE_BYTES", len(base_file) - 1)
    with pytest.raises(GraphIRFormatError, match="over the .* cap"):
        load(tmp_path / "big.ncet")


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "absent.ncet")


@pytest.mark.skipif(not __debug__, reason="the IR's own checks are asserts, off under -O")
def test_ir_checks_are_a_second_net(base_file, tmp_path, monkeypatch):
    header, data = split(base_file)
    header["nodes"][2]["name"] = "x"
    (tmp_path / "dup.ncet").write_bytes(pack(header, data))
    monkeypatch.setattr(ncet.format.header, "_check_nodes", lambda nodes, constants: None)
    with pytest.raises(GraphIRFormatError, match="the IR's own checks rejected it"):
        load(tmp_path / "dup.ncet")


# --- Fuzzing -------------------------------------------------------------------------------


def outcome(blob: bytes, path) -> str:
    """Whether the file loads; one that does must save back to exactly its own bytes."""
    path.write_bytes(blob)
    try:
        ir = load(path)
    except GraphIRFormatError:
        return "rejected"
    again = path.with_name("again.ncet")
    save(ir, again)
    assert again.read_bytes() == blob, "an accepted file does not save back to its own bytes"
    return "loaded"


# Positions are drawn as large integers taken modulo the file's length, so that flips spread
# over the whole file instead of clustering at the first bytes.
POSITION = st.integers(0, 2**32)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(flips=st.lists(st.tuples(POSITION, st.integers(0, 255) | st.characters(
           min_codepoint=0x20, max_codepoint=0x7E).map(ord)), max_size=6),  # JSON-ish bytes too
       cut_at=st.sampled_from([None] * 3) | POSITION)
def test_fuzzed_bytes_load_or_raise_format_error(flips, cut_at, base_file, tmp_path_factory):
    blob = bytearray(base_file)
    for where, value in flips:
        blob[where % len(blob)] = value
    if cut_at is not None:
        blob = blob[:cut_at % len(blob)]
    assert outcome(bytes(blob), tmp_path_factory.getbasetemp() / "fuzz.ncet") in (
        "loaded", "rejected")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6)
NAMES = st.sampled_from(["x", "linear", "relu", "output", "f32", "flags", "empty", "ReLU",
                         "Output", "Slice", "float32", "bool", "int64", ""])


def replacements(value):
    """Any JSON value, or one close to `value` (same type, or the same list reordered)."""
    options = [JSON]
    if type(value) is int:
        options.append(st.integers(-2, 70) | st.integers(-2**64, 2**64))
    if type(value) is str:
        options.append(NAMES)
    if type(value) is list and value:
        options += [st.just(value[1:]), st.just(value + value[:1]), st.permutations(value)]
    return st.one_of(options)


def json_paths(value, prefix=()):
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, child in items:
        yield from json_paths(child, (*prefix, key))


@settings(derandomize=True, max_examples=300, deadline=None)
@given(data=st.data())
def test_fuzzed_header_values_load_or_raise_format_error(data, base_file, tmp_path_factory):
    header, blob = split(base_file)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(json_paths(header))[1:]
        if not paths:
            break
        *parent, key = data.draw(st.sampled_from(paths))
        target = header
        for step in parent:
            target = target[step]
        if isinstance(target, dict) and data.draw(st.integers(0, 4)) == 0:
            del target[key]
        else:
            target[key] = data.draw(replacements(target[key]))
    path = tmp_path_factory.getbasetemp() / "fuzz-header.ncet"
    assert outcome(pack(header, blob), path) in ("loaded", "rejected")


# --- Meaning: a well-formed file whose graph does not compute what it declares ----------------


@pytest.fixture(scope="module")
def cnn_file(tmp_path_factory) -> bytes:
    """A real converted model: Conv2d, BatchNorm, ReLU, MaxPool2d, Flatten, Linear."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 5)).eval()
    path = tmp_path_factory.mktemp("io") / "cnn.ncet"
    save(ncet.convert(model, (2, 4, 4)), path)
    return path.read_bytes()


def constant_entry(h, name: str) -> dict:
    return next(c for c in h["constants"] if c["name"] == name)


# One row per way a structurally valid file can contradict itself (defect B5 in
# docs/reliability.md): load must say so, naming the node, instead of evaluate failing later.
MEANINGLESS = [
    ("input-shape-wrong", edit(lambda h: node_of(h, "Input").update(shape=[2, 5, 4])),
     "(Conv2d) declares per-sample shape [3, 4, 4] but computes [3, 5, 4]"),
    ("input-channels-wrong", edit(lambda h: node_of(h, "Input").update(shape=[3, 4, 4])),
     "weight of shape [3, 2, 3, 3] does not fit 1 group(s) of an input of 3 channels"),
    ("input-rank-wrong", edit(lambda h: node_of(h, "Input").update(shape=[32])),
     "its input has per-sample rank 1, but Conv2d takes rank 3"),
    ("input-index-wrong", edit(lambda h: node_of(h, "Input")["attrs"].update(index=1)),
     "is forward() argument 0 in graph order but declares index 1"),
    ("node-dtype-unknown", edit(lambda h: node_of(h, "ReLU").update(dtype="banana")),
     "dtype 'banana' is not one of"),
    ("node-dtype-integer", edit(lambda h: node_of(h, "ReLU").update(dtype="int64")),
     "dtype 'int64' is not one of"),
    ("declared-shape-wrong", edit(lambda h: node_of(h, "ReLU").update(shape=[3, 4, 5])),
     "declares per-sample shape [3, 4, 5] but computes [3, 4, 4]"),
    ("output-shape-wrong", edit(lambda h: node_of(h, "Linear").update(shape=[6])),
     "declares per-sample shape [6] but computes [5]"),
    ("flatten-dims-reversed", edit(lambda h: node_of(h, "Flatten")["attrs"].update(
        start_dim=7)), "start_dim 7 comes after end_dim 2"),
    ("flatten-dim-out-of-range", edit(lambda h: node_of(h, "Flatten")["attrs"].update(
        start_dim=3, end_dim=3)), "end_dim 3 is out of range for per-sample rank 3"),
    ("pool-kernel-too-large", edit(lambda h: node_of(h, "MaxPool2d")["attrs"].update(
        kernel_size=[9, 9])), "cannot be computed"),
    ("conv-weight-swapped-with-linear", edit(lambda h: node_of(h, "Conv2d")["attrs"].update(
        weight=node_of(h, "Linear")["attrs"]["weight"])),
     "weight of shape [5, 12] does not fit 1 group(s) of an input of 2 channels"),
    ("batchnorm-mean-of-other-length", edit(lambda h: node_of(h, "BatchNorm")["attrs"].update(
        mean=node_of(h, "Linear")["attrs"]["bias"])),
     "mean has shape [5], not [3] (the input's channels)"),
    ("output-cut-without-its-arguments", edit(lambda h: node_of(h, "Output")["attrs"].update(
        cut=[["fc", "a"]])), "a cut is declared by cut (the nodes left out) with cut_trailing"),
    ("output-cut-arguments-without-cut", edit(lambda h: node_of(h, "Output")["attrs"].update(
        stop_at="fc", cut_trailing=False)), "carries ['stop_at', 'cut_trailing'] of a cut"),
    ("output-cut-made-by-nothing", edit(lambda h: node_of(h, "Output")["attrs"].update(
        cut=[["fc", "a"]], cut_trailing=False)), "made by neither stop_at nor cut_trailing"),
    ("output-cut-with-stop-at-without-cut-trailing", edit(
        lambda h: node_of(h, "Output")["attrs"].update(cut=[["fc", "a"]], stop_at="fc")),
     "carries ['cut', 'stop_at'] of a cut"),
    ("output-empty-cut-alone", edit(lambda h: node_of(h, "Output")["attrs"].update(cut=[])),
     "carries ['cut'] of a cut"),
    ("output-empty-cut-made-by-nothing", edit(lambda h: node_of(h, "Output")["attrs"].update(
        cut=[], cut_trailing=False)), "made by neither stop_at nor cut_trailing"),
]


@pytest.mark.parametrize("make, message", [row[1:] for row in MEANINGLESS],
                         ids=[row[0] for row in MEANINGLESS])
def test_file_that_does_not_compute_is_rejected(make, message, cnn_file, tmp_path):
    path = tmp_path / "meaningless.ncet"
    path.write_bytes(make(*split(cnn_file)))
    with pytest.raises(GraphIRFormatError, match=r"meaningless\.ncet'.*node '") as info:
        load(path)
    assert message in str(info.value)
    load(path, verify=False)  # well-formed: only the meaning is wrong


def test_real_file_loads_and_evaluates_like_the_original(cnn_file, tmp_path):
    path = tmp_path / "cnn.ncet"
    path.write_bytes(cnn_file)
    ir = load(path)
    x = torch.randn(3, 2, 4, 4, dtype=torch.float64)
    assert ncet.evaluate(ir, x).shape == (3, 5)
