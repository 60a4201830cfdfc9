"""`to_onnx`: a GraphIR written as one ONNX model, node for node, with its provenance."""

from __future__ import annotations

import functools
import os

import onnx
import torch
from onnx import helper

from ..format.atomic import atomic_writer
from ..format.digest import constant_table, hash_graphir
from ..frontend.canonicalize import cyclic_gc_paused  # the export keeps what it allocates
from ..ir import CONSTANT_ATTRS, GraphIR, IRNode
from . import wire
from .builder import ELEMENT_TYPES, ExportError, GraphBuilder, refuse
from .profiles import CANONICAL, MIN_OPSET, PROFILES

DEFAULT_OPSET = CANONICAL.default_opset
"""The canonical profile's opset, the one `to_onnx` writes by default (each profile has its
own: `Profile.default_opset`)."""


def _check_arguments(ir, profile, batch, opset) -> int:
    """Refuse what `to_onnx` does not take; returns the opset (the profile's when None)."""
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
    if opset is None:
        return PROFILES[profile].default_opset
    latest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= latest:
        raise ValueError(f"opset must be an int from {MIN_OPSET} to {latest}, not {opset!r}")
    return opset


def _check_dtypes(ir: GraphIR, node: IRNode, constant_dtypes: dict[str, str]) -> None:
    """One dtype per node: its inputs' and constants' dtypes are its own (no Cast is written)."""
    dtype = node.dtype
    if dtype not in ELEMENT_TYPES:
        raise refuse(node, f"dtype {dtype} is not exported (float32 and float64 are)")
    for name in node.inputs:
        if ir.node(name).dtype != dtype:
            raise refuse(node, f"input {name!r} is {ir.node(name).dtype}, the node "
                               f"{dtype}: ONNX would need a Cast")
    attrs = node.attrs
    for attr in CONSTANT_ATTRS[node.op_type]:
        const = attrs[attr]
        if const is not None and constant_dtypes[const] != dtype:
            raise refuse(node, f"constant {const!r} is {constant_dtypes[const]}, the node "
                               f"{dtype}: ONNX would need a Cast")


def graphir_sha256(ir: GraphIR, table: dict | None = None) -> str:
    """`metadata_props["ncet.graphir.hash"]`: `ncet.format.digest.hash_graphir(ir)`;
    `table` is the GraphIR's `constant_table` when the caller has it."""
    try:
        with cyclic_gc_paused():
            return hash_graphir(ir, table)
    except ValueError as exc:
        raise ExportError(f"cannot export a GraphIR that cannot be saved: {exc}") from None


def _constant_table(ir: GraphIR) -> dict:
    try:
        return constant_table(ir)
    except ValueError as exc:
        raise ExportError(f"cannot export a GraphIR that cannot be saved: {exc}") from None


def _outputs(b: GraphBuilder, ir: GraphIR) -> None:
    """Graph outputs: the returned values themselves; one returned twice, or an input
    returned as it is, goes through an Identity named `<Output>/<position>`."""
    output = ir.nodes[-1]
    b.current = output
    seen = set()
    for position, name in enumerate(output.inputs):
        node = ir.node(name)
        value = name
        if name in seen or node.op_type == "Input":
            value = b.node("Identity", [name], f"{output.name}/{position}")
        seen.add(name)
        b.value_info(value, node.dtype, node.shape, wire.GRAPH_OUTPUT)


def _returned(ir: GraphIR) -> set[str]:
    """The IR nodes whose values are graph outputs themselves (so get no value_info)."""
    return {name for name in ir.nodes[-1].inputs if ir.node(name).op_type != "Input"}


def build_model(ir: GraphIR, profile: str = "canonical", batch: int | None = None,
                opset: int | None = None, graphir_hash: str | None = None
                ) -> onnx.ModelProto:
    """The ModelProto `to_onnx` writes; `graphir_hash` is `graphir_sha256(ir)` when the
    caller has it already."""
    opset = _check_arguments(ir, profile, batch, opset)
    spec = PROFILES[profile]
    if spec.fixed_batch is not None:
        batch = spec.fixed_batch
    with cyclic_gc_paused():
        # first: a GraphIR that cannot be saved is refused before any value is written
        table = _constant_table(ir)
        graphir_hash = graphir_hash or graphir_sha256(ir, table)
        model = onnx.ModelProto(ir_version=_ir_version(opset), producer_name="ncet",
                                producer_version=_ncet_version())
        b = GraphBuilder(ir, batch, opset, spec.ops, spec.name, model.graph)
        dtypes = {name: dtype for name, (dtype, _) in table.items()}
        for node in sorted(ir.inputs, key=lambda n: n.attrs["index"]):
            b.current = node
            _check_dtypes(ir, node, dtypes)
            b.value_info(b.claim(node.name), node.dtype, node.shape, wire.GRAPH_INPUT)
        b.current = None  # a constant's refusal names the constant, not the last input
        for name, tensor in ir.constants.items():
            b.constant(name, tensor, *table[name])
        returned, patterns, value_info = _returned(ir), spec.patterns, wire.GRAPH_VALUE_INFO
        for node in ir.nodes:
            if node.op_type in ("Input", "Output"):
                continue
            b.current = node
            _check_dtypes(ir, node, dtypes)
            try:
                patterns[node.op_type](b, node, node.inputs)
            except (IndexError, KeyError, TypeError, ValueError) as exc:  # not ExportError
                raise refuse(node, f"its pattern failed on its attributes and shapes "
                                   f"({type(exc).__name__}: {exc}); ncet.load's meaning "
                                   "check refuses a GraphIR whose attributes do not "
                                   "compute") from exc
            if node.name not in b.names:
                raise refuse(node, "internal: the pattern did not produce the node's value")
            if node.name not in returned:
                b.value_info(node.name, node.dtype, node.shape, value_info)
        _outputs(b, ir)
        b.flush()
        graph = model.graph
        graph.name = "ncet"
        graph.doc_string = f"exported by ncet.to_onnx, {profile} profile"
        model.opset_import.add(domain="", version=opset)
        for key, value in (("ncet.version", _ncet_version()), ("ncet.profile", profile),
                           ("ncet.graphir.hash", graphir_hash),
                           ("torch.version", torch.__version__)):
            model.metadata_props.add(key=key, value=value)
    return model


@functools.cache
def _ir_version(opset: int) -> int:
    return helper.find_min_ir_version_for([helper.make_opsetid("", opset)])


def _ncet_version() -> str:
    from .. import __version__

    return __version__


def to_onnx(ir: GraphIR, path: str | os.PathLike | None = None, *, profile: str = "canonical",
            batch: int | None = None, opset: int | None = None) -> onnx.ModelProto:
    """Write `ir` as an ONNX model (docs/export.md); see `ncet.to_onnx`. `opset=None` is the
    profile's `default_opset` (canonical 21, verifier 18)."""
    model = build_model(ir, profile, batch, opset)
    if path is not None:
        with atomic_writer(path) as f:
            f.write(model.SerializeToString())
    return model
