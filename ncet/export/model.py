"""`to_onnx`: a GraphIR written as one ONNX model, node for node, with its provenance."""

from __future__ import annotations

import hashlib
import os
import tempfile

import onnx
import torch
from onnx import helper

from ..format.atomic import atomic_writer
from ..format.file import save
from ..ir import CONSTANT_ATTRS, GraphIR, IRNode
from .builder import ELEMENT_TYPES, ExportError, GraphBuilder, refuse
from .profiles import PROFILES

DEFAULT_OPSET = 21
MIN_OPSET = 18  # ReduceMean's axes and Pad's pads as inputs, Squeeze/Unsqueeze axes inputs


def _check_arguments(ir, profile, batch, opset) -> None:
    if not isinstance(ir, GraphIR):
        raise TypeError(f"to_onnx() expects a GraphIR (from ncet.convert or ncet.load), not "
                        f"{type(ir).__name__}")
    if not isinstance(profile, str) or profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                              or batch < 1):
        raise ValueError(f"batch must be None (a symbolic batch axis 'N') or a positive int, "
                         f"not {batch!r}")
    fixed = PROFILES[profile].fixed_batch
    if fixed is not None and batch not in (None, fixed):
        raise ValueError(f"the {profile} profile fixes the batch to {fixed}; give batch=None "
                         f"or batch={fixed}, not {batch!r}")
    latest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= latest:
        raise ValueError(f"opset must be an int from {MIN_OPSET} to {latest}, not {opset!r}")


def _check_dtypes(ir: GraphIR, node: IRNode) -> None:
    """One dtype per node: its inputs' and constants' dtypes are its own (no Cast is written)."""
    if node.dtype not in ELEMENT_TYPES:
        raise refuse(node, f"dtype {node.dtype} is not exported (float32 and float64 are)")
    for name in node.inputs:
        if ir.node(name).dtype != node.dtype:
            raise refuse(node, f"input {name!r} is {ir.node(name).dtype}, the node "
                               f"{node.dtype}: ONNX would need a Cast")
    for attr in CONSTANT_ATTRS[node.op_type]:
        const = node.attrs[attr]
        if const is not None:
            dtype = str(ir.constants[const].dtype).removeprefix("torch.")
            if dtype != node.dtype:
                raise refuse(node, f"constant {const!r} is {dtype}, the node {node.dtype}: "
                                   "ONNX would need a Cast")


def graphir_sha256(ir: GraphIR) -> str:
    """The sha256 of the bytes `ncet.save` writes for `ir`."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "graph.ncet")
        try:
            save(ir, path)
        except ValueError as exc:
            raise ExportError(f"cannot export a GraphIR that cannot be saved: {exc}") from None
        with open(path, "rb") as f:  # streamed: no second copy of the constants in memory
            return hashlib.file_digest(f, "sha256").hexdigest()


def _outputs(b: GraphBuilder, ir: GraphIR) -> list[onnx.ValueInfoProto]:
    """Graph outputs: the returned values themselves; one returned twice, or an input
    returned as it is, goes through an Identity named `<Output>/<position>`."""
    output = ir.nodes[-1]
    b.current = output
    infos, seen = [], set()
    for position, name in enumerate(output.inputs):
        node = ir.node(name)
        value = name
        if name in seen or node.op_type == "Input":
            value = b.node("Identity", [name], f"{output.name}/{position}")
        seen.add(name)
        infos.append(b.value_info(value, node.dtype, node.shape))
    return infos


def build_model(ir: GraphIR, profile: str = "canonical", batch: int | None = None,
                opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    _check_arguments(ir, profile, batch, opset)
    spec = PROFILES[profile]
    if spec.fixed_batch is not None:
        batch = spec.fixed_batch
    b = GraphBuilder(ir, batch, opset, spec.ops, spec.name)
    inputs = []
    for node in sorted(ir.inputs, key=lambda n: n.attrs["index"]):
        b.current = node
        _check_dtypes(ir, node)
        inputs.append(b.value_info(b.claim(node.name), node.dtype, node.shape))
    for name, tensor in ir.constants.items():
        b.constant(name, tensor)
    value_info = []
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        b.current = node
        _check_dtypes(ir, node)
        spec.patterns[node.op_type](b, node, list(node.inputs))
        if node.name not in b.names:
            raise refuse(node, "internal: the pattern did not produce the node's value")
        value_info.append(b.value_info(node.name, node.dtype, node.shape))
    outputs = _outputs(b, ir)
    returned = {info.name for info in outputs}
    graph = helper.make_graph(b.nodes, "ncet", inputs, outputs, b.initializers,
                              doc_string=f"exported by ncet.to_onnx, {profile} profile",
                              value_info=[v for v in value_info if v.name not in returned])
    opset_id = helper.make_opsetid("", opset)
    model = helper.make_model(graph, opset_imports=[opset_id],
                              ir_version=helper.find_min_ir_version_for([opset_id]),
                              producer_name="ncet", producer_version=_ncet_version())
    helper.set_model_props(model, {
        "ncet.version": _ncet_version(),
        "ncet.profile": profile,
        "ncet.graphir.sha256": graphir_sha256(ir),
        "torch.version": torch.__version__,
    })
    return model


def _ncet_version() -> str:
    from .. import __version__

    return __version__


def to_onnx(ir: GraphIR, path: str | os.PathLike | None = None, *, profile: str = "canonical",
            batch: int | None = None, opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    """Write `ir` as an ONNX model (docs/export.md); see `ncet.to_onnx`."""
    model = build_model(ir, profile, batch, opset)
    if path is not None:
        with atomic_writer(path) as f:
            f.write(model.SerializeToString())
    return model
