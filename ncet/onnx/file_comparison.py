"""The file read against the GraphIR it claims to be the export of, for `check_onnx`: its
inputs (`fixed_batch`), and every node, initializer, value_info entry and output compared with
what `to_onnx` writes (`structural_faults`), each fault held by the IR node that owns it."""

from __future__ import annotations

import onnx

from ..ir import CONSTANT_ATTRS, GraphIR
from .builder import ELEMENT_TYPES
from .model import build_model
from .onnx_file import meaning_of, tensor_meaning


def fixed_batch(ir: GraphIR, graph: onnx.GraphProto) -> int | None:
    """The file's batch size (None for a symbolic one), after checking that its inputs are
    the IR's: names in forward() order, dtypes and per-sample shapes."""
    initializers = {t.name for t in graph.initializer}
    feeds = [i for i in graph.input if i.name not in initializers]
    expected = sorted(ir.inputs, key=lambda n: n.attrs["index"])
    if [i.name for i in feeds] != [n.name for n in expected]:
        raise ValueError(f"the file's inputs {[i.name for i in feeds]} are not the GraphIR's "
                         f"Input nodes {[n.name for n in expected]}: was it exported from "
                         "this GraphIR?")
    sizes = set()
    for value, node in zip(feeds, expected):
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if tensor.elem_type != ELEMENT_TYPES.get(node.dtype) or dims[1:] != list(node.shape):
            raise ValueError(f"the file's input {value.name!r} is {dims} of element type "
                             f"{tensor.elem_type}, the GraphIR's [N, *{list(node.shape)}] "
                             f"{node.dtype}")
        sizes.add(dims[0] if dims else None)
    if len(sizes) > 1:
        raise ValueError(f"the file's inputs have different batch sizes {sorted(map(str, sizes))}"
                         ": an export has one batch axis")
    return sizes.pop() if sizes else None


def _opset(model: onnx.ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def structural_faults(ir: GraphIR, model: onnx.ModelProto, batch: int | None,
                      graphir_hash: str | None = None) -> dict[str, str]:
    """IR node name -> how the file departs from what `to_onnx` writes for `ir` in the
    file's own profile, batch and opset (the export is deterministic): a node of the
    node's pattern with another op type, domain, inputs or attributes (subgraphs included),
    missing, or added; an initializer of its own (an IR constant or a pattern's helper) with
    other values (`tensor_meaning`: however encoded) or missing; a value_info entry that is
    not the export's (element type, shape), missing or added; a graph output that is not
    the export's (at the IR node it returns). What no IR node owns (an added node, a graph
    input, a local function, another domain) is a fault at every returned node: the file is
    not the export of this GraphIR. A GraphIR without operator nodes has no node to hold a
    fault: a file that is not its export raises ValueError (`_blamed`).
    `graphir_hash` is `graphir_sha256(ir)` when the caller has it (the rebuilt export's
    metadata is not compared, but building it would hash the GraphIR again)."""
    operators = [n.name for n in ir.nodes if n.op_type not in ("Input", "Output")]
    known = set(operators)
    props = {p.key: p.value for p in model.metadata_props}
    profile = props.get("ncet.profile")
    try:
        reference = build_model(ir, profile, batch, _opset(model), graphir_hash)
    except Exception as exc:  # noqa: BLE001 - any reason the export cannot be rebuilt
        reason = (f"the file cannot be compared with this GraphIR's export (profile "
                  f"{profile!r}, batch {batch}, opset {_opset(model)}): "
                  f"{type(exc).__name__}: {str(exc)[:200]}")
        return _blamed(ir, dict.fromkeys(operators or ir.outputs, reason))
    faults: dict[str, str] = {}

    def owner(value: str) -> str | None:
        head = value.partition("/")[0]
        return head if head in known else None

    def fault(name: str | None, reason: str) -> None:
        for target in ([name] if name in known else returned):
            faults.setdefault(target, reason)

    # a returned Input node: the last operator, or the output itself when there is none
    returned = [n if n in known else (operators[-1] if operators else n)
                for n in ir.outputs] or operators[-1:]
    ours = {tuple(n.output): n for n in reference.graph.node}
    theirs = {tuple(n.output): n for n in model.graph.node}
    for outputs, node in ours.items():
        other = theirs.get(outputs)
        if other is None:
            fault(owner(outputs[0]), f"the file has no {node.op_type} node writing "
                                     f"{outputs[0]!r}, which the export writes")
        elif meaning_of(other) != meaning_of(node):
            fault(owner(outputs[0]), f"the file's {other.op_type} node writing {outputs[0]!r} "
                                     f"is not the export's {node.op_type} node (op type, "
                                     "domain, inputs or attributes differ)")
    for outputs, node in theirs.items():
        if outputs not in ours:
            fault(owner(outputs[0]) if outputs else None,
                  f"the file has a {node.op_type} node writing {list(outputs)} that the "
                  "export does not write")
    constants = {t.name: t for t in model.graph.initializer}
    for tensor in reference.graph.initializer:
        other = constants.get(tensor.name)
        if other is None or tensor_meaning(other) != tensor_meaning(tensor):
            users = [n.name for n in ir.nodes if tensor.name in
                     {n.attrs.get(a) for a in CONSTANT_ATTRS.get(n.op_type, ())}]
            reason = (f"the initializer {tensor.name!r} is not the export's, bit for bit"
                      if other is not None else
                      f"the file has no initializer {tensor.name!r}")
            for name in users or [owner(tensor.name)]:
                fault(name, reason)
    ours_out = [meaning_of(o) for o in reference.graph.output]
    theirs_out = [meaning_of(o) for o in model.graph.output]
    for i, target in enumerate(returned):
        if i >= len(theirs_out) or theirs_out[i] != ours_out[i]:
            faults.setdefault(target, f"the file's graph output {i} is not the export's "
                                      "(name, element type or shape)")
    ours_in = [meaning_of(i) for i in reference.graph.input]
    theirs_in = [meaning_of(i) for i in model.graph.input]
    if ours_in != theirs_in:
        fault(None, "the file's graph inputs are not the export's (names, element types or "
                    "shapes, or an initializer listed as an input)")
    ours_info = {v.name: meaning_of(v) for v in reference.graph.value_info}
    theirs_info = {v.name: meaning_of(v) for v in model.graph.value_info}
    for name in sorted(ours_info.keys() | theirs_info.keys()):
        if ours_info.get(name) != theirs_info.get(name):
            what = ("is not the export's (element type or shape)" if name in ours_info
                    and name in theirs_info else "is missing" if name in ours_info
                    else "is one the export does not write")
            fault(owner(name), f"the file's value_info entry {name!r} {what}")
    extras = [f"local functions ({len(model.functions)})" if model.functions else "",
              "sparse initializers" if model.graph.sparse_initializer else "",
              ", ".join(sorted(o.domain for o in model.opset_import
                               if o.domain not in ("", "ai.onnx")))]
    extras = [e for e in extras if e]
    if extras:
        fault(None, f"the file declares what the export never writes: {'; '.join(extras)}")
    return _blamed(ir, faults)


def _blamed(ir: GraphIR, faults: dict[str, str]) -> dict[str, str]:
    """`faults`, refused as a ValueError when there is no operator node to hold them (a
    GraphIR that returns its inputs): the report has no entry that could say "violated"."""
    if not faults or any(n.op_type not in ("Input", "Output") for n in ir.nodes):
        return faults
    raise ValueError("the file is not the export of this GraphIR, which has no operator "
                     "node to hold the fault: " + "; ".join(dict.fromkeys(faults.values()))
                     + " (re-export it with ncet.to_onnx)")
