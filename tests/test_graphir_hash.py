"""`hash_graphir`, the GraphIR hash `to_onnx` stamps into `metadata_props`: its stream as
ncet/format/digest.py documents it, rebuilt here with json and hashlib; the same for a
GraphIR and the one its file loads back; different for every change of content; and refusing
the GraphIRs `save` refuses (tests/test_io.py's UNSAVEABLE rows and the STRUCTURE rows here,
each checked against save itself)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch

import ncet
from ncet.examples import EXAMPLES
from ncet.format.digest import hash_graphir
from ncet.format.file import load, save
from ncet.ir import OP_SCHEMAS, GraphIR
from tests.test_io import UNSAVEABLE, all_ops_ir, bits, linear_ir, with_node

onnx = pytest.importorskip("onnx")

from ncet.onnx import ExportError  # noqa: E402


def documented_stream(ir: GraphIR) -> bytes:
    """The bytes the module docstring says are hashed, built from its words alone."""
    source = ("fx_name", "fx_op", "target", "module_path", "module_type", "location")
    nodes = [[n.name, n.op_type, list(n.inputs), [n.attrs[k] for k in OP_SCHEMAS[n.op_type][1]],
              None if n.shape is None else list(n.shape), n.dtype,
              [getattr(n.source, k) for k in source]] for n in ir.nodes]
    names = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
             torch.bfloat16: "bfloat16", torch.int8: "int8", torch.int16: "int16",
             torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8",
             torch.bool: "bool"}
    constants = [[name, names[t.dtype], list(t.shape)] for name, t in ir.constants.items()]
    text = json.dumps([nodes, constants], separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)
    data = b"".join(bytes(t.contiguous().reshape(-1).view(torch.uint8).tolist())
                    for t in ir.constants.values())
    return b"ncet-graphir-sha256 1\n" + text.encode("ascii") + b"\n" + data


def _example(name: str) -> GraphIR:
    example = EXAMPLES[name]
    torch.manual_seed(0)
    return ncet.convert(example.build(), *example.input_shapes)


GRAPHS = [pytest.param(linear_ir, id="linear"), pytest.param(all_ops_ir, id="all-ops"),
          *[pytest.param(lambda n=name: _example(n), id=name)
            for name, e in EXAMPLES.items() if e.converts]]
"""Hand-built GraphIRs with every op_type, attribute kind and constant dtype (NaN payloads,
-0.0, subnormals, a transposed constant), and every bundled example that converts."""


@pytest.mark.parametrize("build", GRAPHS)
def test_the_hash_is_the_sha256_of_the_documented_stream(build):
    ir = build()
    assert hash_graphir(ir) == hashlib.sha256(documented_stream(ir)).hexdigest()


@pytest.mark.parametrize("build", GRAPHS)
def test_a_graphir_and_the_one_its_file_loads_back_hash_alike(build, tmp_path):
    ir = build()
    save(ir, tmp_path / "g.ncet", verify=False)  # some GRAPHS are the format alone
    assert hash_graphir(load(tmp_path / "g.ncet", verify=False)) == hash_graphir(ir)


def test_tuples_and_lists_hash_alike():
    ir = all_ops_ir()
    as_tuples = GraphIR(tuple(dataclasses.replace(n, attrs={
        k: tuple(v) if isinstance(v, list) else v for k, v in n.attrs.items()})
        for n in ir.nodes), ir.constants)
    assert hash_graphir(as_tuples) == hash_graphir(ir)


def _with_constants(ir: GraphIR, **constants) -> GraphIR:
    return GraphIR(ir.nodes, {**ir.constants, **constants})


def _renamed(ir: GraphIR, old: str, new: str) -> GraphIR:
    return GraphIR(tuple(dataclasses.replace(
        n, name=new if n.name == old else n.name,
        inputs=tuple(new if i == old else i for i in n.inputs)) for n in ir.nodes), ir.constants)


CHANGES = [
    ("one bit of a NaN payload", lambda ir: _with_constants(ir, **{"fc.bias": bits(
        0x80000000, 0x00000001, 0x7FC00124, dtype=torch.float32, via=torch.int32)})),
    ("-0.0 made +0.0", lambda ir: _with_constants(ir, **{"fc.bias": bits(
        0x00000000, 0x00000001, 0x7FC00123, dtype=torch.float32, via=torch.int32)})),
    ("the same bytes in another shape", lambda ir: _with_constants(
        ir, **{"fc.weight": ir.constants["fc.weight"].reshape(4, 3)})),
    ("the same bytes as another dtype", lambda ir: _with_constants(
        ir, **{"fc.bias": ir.constants["fc.bias"].view(torch.int32)})),
    ("the constants in another order", lambda ir: GraphIR(
        ir.nodes, dict(reversed(list(ir.constants.items()))))),
    ("a node renamed", lambda ir: _renamed(ir, "relu", "relu2")),
    ("a node's shape", lambda ir: with_node(ir, "relu", shape=(1, 3))),
    ("a node's dtype", lambda ir: with_node(ir, "relu", dtype="float64")),
    ("a node's op_type", lambda ir: with_node(ir, "relu", op_type="Identity")),
    ("a constant attribute naming the other constant", lambda ir: with_node(
        ir, "fc", attrs={"weight": "fc.bias", "bias": "fc.weight"})),
    ("the bias dropped", lambda ir: with_node(ir, "fc", attrs={"weight": "fc.weight",
                                                              "bias": None})),
    ("the provenance's source line", lambda ir: with_node(ir, "relu", source=dataclasses.replace(
        ir.node("relu").source, location="model.py:2"))),
    ("Output's tuple flag", lambda ir: with_node(ir, "output", attrs={"tuple": True})),
]
"""One change of content per row, each on tests/test_io.py's linear_ir."""


@pytest.mark.parametrize("change", [c for _, c in CHANGES], ids=[i for i, _ in CHANGES])
def test_every_change_of_content_changes_the_hash(change):
    ir = linear_ir()
    assert hash_graphir(change(ir)) != hash_graphir(ir)


def test_a_float_attribute_and_its_neighbour_hash_differently():
    ir = all_ops_ir()
    slope = ir.node("leakyrelu").attrs["negative_slope"]  # 0.30000000000000004
    nearby = with_node(ir, "leakyrelu", attrs={"negative_slope": 0.3})
    assert slope != 0.3 and hash_graphir(nearby) != hash_graphir(ir)


class _Name(str):
    """A str subclass: equal to the name, but not a JSON string to save's schema."""


def _nodes(ir: GraphIR, *nodes) -> GraphIR:
    return GraphIR(tuple(nodes), ir.constants)


def _structure():
    ir = linear_ir()
    x, fc, relu, output = ir.nodes
    return [
        pytest.param(with_node(ir, "output", shape=(3,)), id="output-shape"),
        pytest.param(_nodes(ir, x, fc, relu, dataclasses.replace(output, inputs=())),
                     id="output-without-inputs"),
        pytest.param(_nodes(ir, x, fc, dataclasses.replace(output, name="early"), relu,
                            output), id="output-not-last"),
        pytest.param(_nodes(ir, x, fc, dataclasses.replace(x, name="y", attrs={"index": 1}),
                            relu, output), id="input-after-an-operator"),
        pytest.param(_nodes(ir, x, relu, fc, output), id="input-names-a-later-node"),
        pytest.param(with_node(ir, "relu", inputs=(_Name("fc"),)), id="input-a-str-subclass"),
        pytest.param(with_node(ir, "relu", inputs=(["fc"],)), id="input-a-list"),
        pytest.param(with_node(ir, "relu", shape=(3.0,)), id="shape-a-float-equal-to-an-int"),
        pytest.param(with_node(ir, "relu", shape=([3],)), id="shape-of-a-list"),
        pytest.param(with_node(ir, "relu", source=dataclasses.replace(relu.source, target=None)),
                     id="provenance-not-a-string"),
        pytest.param(GraphIR(ir.nodes, {**ir.constants, "": torch.zeros(1)}),
                     id="constant-named-empty"),
        pytest.param(GraphIR(ir.nodes, {**ir.constants, 1: torch.zeros(1)}),
                     id="constant-named-by-an-int"),
    ]


STRUCTURE = _structure()
"""GraphIRs whose records accept them but whose structure `save`'s header schema refuses."""


@pytest.mark.parametrize("ir", UNSAVEABLE + STRUCTURE)
def test_what_save_refuses_is_refused(ir, tmp_path):
    with pytest.raises(ValueError, match="cannot save"):  # the oracle: save refuses it
        save(ir, tmp_path / "g.ncet")
    with pytest.raises(ValueError):
        hash_graphir(ir)
    with pytest.raises(ExportError, match="cannot export a GraphIR that cannot be saved"):
        ncet.to_onnx(ir)


def test_a_graphir_is_required():
    with pytest.raises(TypeError, match="hash_graphir\\(\\) expects a GraphIR"):
        hash_graphir("net.ncet")


def test_to_onnx_stamps_the_hash_of_the_graphir_and_of_its_file(tmp_path):
    ir = _example("residual_cnn")
    save(ir, tmp_path / "g.ncet")
    props = {p.key: p.value for p in ncet.to_onnx(ir).metadata_props}
    assert props["ncet.graphir.hash"] == hash_graphir(ir)
    assert props["ncet.graphir.hash"] == hash_graphir(load(tmp_path / "g.ncet"))


def test_the_hash_does_not_depend_on_the_process():
    code = ("import torch, ncet; from ncet.examples import EXAMPLES; "
            "from ncet.format.digest import hash_graphir; torch.manual_seed(0); "
            "e = EXAMPLES['residual_cnn']; "
            "print(hash_graphir(ncet.convert(e.build(), *e.input_shapes)))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == hash_graphir(_example("residual_cnn"))


def _little_endian(t: torch.Tensor) -> bytes:
    """The tensor's values as the file writes them, from their own definition: row-major,
    little-endian, each element's bytes (torch's view of them as uint8)."""
    dense = t.detach().resolve_neg().contiguous().reshape(-1)
    raw = dense.view(torch.uint8).reshape(-1, dense.element_size())
    return bytes((raw if sys.byteorder == "little" else raw.flip(1)).reshape(-1).tolist())


_BASE = torch.tensor([[1.5, -0.0, 3e-39], [float("nan"), -2.25, 7.0]])
CONSTANT_FORMS = [  # (tensor, whether constant_bytes reads it in its fast path)
    *[pytest.param(_BASE.to(dtype), dtype is not torch.bfloat16,
                   id=str(dtype).removeprefix("torch."))
      for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
                    torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)],
    pytest.param(_BASE.t(), False, id="transposed"),
    pytest.param(_BASE[:, 1:], False, id="a strided slice"),
    pytest.param(_BASE[1:], True, id="a row slice, at an offset"),
    pytest.param(torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last), False,
                 id="channels-last"),
    pytest.param(torch.nn.Parameter(_BASE.clone()), False, id="a parameter"),
    pytest.param(torch.nn.Parameter(_BASE.clone(), requires_grad=False), False,
                 id="a parameter without grad"),
    pytest.param(_BASE.clone().requires_grad_(), False, id="requires-grad"),
    pytest.param((-_BASE)._neg_view(), False, id="negative bit"),
    pytest.param(torch.tensor(2.5), True, id="0-d"),
    pytest.param(torch.tensor(5), True, id="0-d int64"),
    pytest.param(torch.tensor(True), True, id="0-d bool"),
    pytest.param(torch.empty(0, 3), True, id="empty"),
    pytest.param(_BASE.expand(4, 2, 3), False, id="expanded"),
]


@pytest.mark.parametrize(("tensor", "fast"), CONSTANT_FORMS)
def test_a_constants_bytes_are_its_values_little_endian_in_every_form(tensor, fast,
                                                                       monkeypatch):
    """constant_bytes, which save, the hash and to_onnx read, in its fast path (a plain
    contiguous tensor: the general path's resolve_neg is not called) and the general one."""
    from ncet.format.file import constant_bytes

    resolved = []
    resolve_neg = torch.Tensor.resolve_neg
    monkeypatch.setattr(torch.Tensor, "resolve_neg",
                        lambda self: resolved.append(1) or resolve_neg(self))
    dtype, blob = constant_bytes("c", tensor)
    assert (not resolved) == (fast and sys.byteorder == "little"), "the path taken"
    assert dtype == str(tensor.dtype).removeprefix("torch.") and isinstance(blob, memoryview)
    assert blob.tobytes() == _little_endian(tensor) and blob.nbytes == len(_little_endian(tensor))
    assert hashlib.sha256(blob).digest() == hashlib.sha256(_little_endian(tensor)).digest()


def test_the_file_byte_order_is_little_endian():
    from ncet.format.file import constant_bytes

    assert constant_bytes("c", torch.tensor([1.5]))[1].tobytes() == bytes([0, 0, 0xC0, 0x3F])
    assert constant_bytes("c", torch.tensor([258], dtype=torch.int16))[1].tobytes() == b"\x02\x01"


def test_a_float_attributes_sign_of_zero_changes_the_hash():
    ir = all_ops_ir()
    zero = with_node(ir, "leakyrelu", attrs={"negative_slope": 0.0})
    negative = with_node(ir, "leakyrelu", attrs={"negative_slope": -0.0})
    assert hash_graphir(zero) != hash_graphir(negative)
    assert hash_graphir(zero) == hash_graphir(with_node(ir, "leakyrelu",
                                                        attrs={"negative_slope": 0.0}))
