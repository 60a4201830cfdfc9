"""The JSON records the `--json` option prints: plain dicts with stable keys.

The keys are spelled out here rather than taken from the dataclasses, so renaming a field
inside the library does not silently change what scripts read. Non-finite floats (an infinite
ratio where a bound is zero) are written as the strings "inf", "-inf" and "nan", so the output
is strict JSON.
"""

from __future__ import annotations

import json
from typing import Any

import ncet

from ..comparison import json_safe
from ..exactness.report import ExactnessEntry, ExactnessReport, OutputEntry
from ..frontend.report import STATUSES, ConversionReport, Row
from ..ir import GraphIR, IRNode, describe_tensor
from ..render.export_section import ExportFacts

SCHEMA_VERSION = 1
"""Bumped when a key is removed or changes meaning (new keys may appear at any time)."""


def ncet_version() -> str:
    """The installed package's version, or "unknown" when running from a bare checkout."""
    return ncet.__version__


def document(command: str, **fields: Any) -> dict[str, Any]:
    """The top-level object every command prints: what ran, then its results."""
    return {"schema_version": SCHEMA_VERSION, "ncet_version": ncet_version(),
            "command": command, **fields}


def dumps(value: Any) -> str:
    """Strict JSON text (no NaN or Infinity literals), indented for people too."""
    return json.dumps(json_safe(value), indent=2, allow_nan=False)


def row_record(row: Row) -> dict[str, Any]:
    """One FX node of a ConversionReport."""
    return {
        "node": row.fx_name, "fx_op": row.fx_op, "spelling": row.spelling,
        "module_path": row.module_path, "module_type": row.module_type,
        "op_type": row.op_type, "status": row.status, "code": row.code,
        "message": row.message, "hint": row.hint,
        "shape": None if row.shape is None else list(row.shape), "location": row.location,
        "source_text": row.source_text, "rewrite": row.rewrite,
    }


def conversion_record(report: ConversionReport) -> dict[str, Any]:
    """A ConversionReport: verdict, counts per status, every row and every problem."""
    graph = report.graph
    return {
        "ok": report.ok,
        "summary": report.summary(),
        "counts": {s: sum(1 for r in report.rows if r.status == s) for s in STATUSES},
        "rows": [row_record(r) for r in report.rows],
        "problems": [row_record(r) for r in report.errors],
        "graph": None if graph is None else {"nodes": len(graph.nodes),
                                             "constants": len(graph.constants)},
    }


def entry_record(entry: ExactnessEntry) -> dict[str, Any]:
    """One IR node's node-local and end-to-end results."""
    return {
        "node": entry.name, "op_type": entry.op_type, "fx_node": entry.fx_name,
        "fx_op": entry.fx_op, "spelling": entry.spelling, "location": entry.location,
        "source_text": entry.source_text, "violated": entry.violated,
        "checked": entry.checked, "sensitivity": entry.sensitivity,
        "suspicion": entry.suspicion, "suspicious": entry.suspicious,
        "local": {"max_error": entry.local_max_error, "bound": entry.local_bound,
                  "error_at_worst": entry.local_error_at_worst,
                  "ratio": entry.local_ratio, "median_ratio": entry.local_median_ratio,
                  "ulps": entry.local_ulps, "violations": entry.local_violations},
        "end_to_end": {"max_error": entry.e2e_max_error, "bound": entry.e2e_bound,
                       "error_at_worst": entry.e2e_error_at_worst,
                       "ratio": entry.e2e_ratio, "median_ratio": entry.e2e_median_ratio,
                       "violations": entry.e2e_violations},
        "note": entry.note,
    }


def output_record(output: OutputEntry) -> dict[str, Any]:
    """One model output: eager model(x) against the reference graph."""
    return {"output": output.name, "max_error": output.max_error, "bound": output.bound,
            "ratio": output.ratio, "violations": output.violations,
            "traced_differs": output.traced_differs, "checked": output.checked}


def exactness_record(report: ExactnessReport) -> dict[str, Any]:
    """An ExactnessReport: verdict, arithmetic model, per node and per output."""
    first = report.first_violation
    arithmetic = report.arithmetic
    return {
        "ok": report.ok,
        "summary": report.summary(),
        "worst_ratio": report.worst_ratio,
        "samples": report.samples,
        "inputs": report.inputs,
        "traced_differs": report.traced_differs,
        "cut": dict(report.cut),
        "first_violation": None if first is None else first.name,
        "unchecked": list(report.unchecked), "suspicious": list(report.suspicious),
        "arithmetic": {"certified": arithmetic.certified, "operand_u": arithmetic.operand_u,
                       "flush": arithmetic.flush,
                       "flags": dict(arithmetic.flags), "notes": list(arithmetic.notes)},
        "tightness": {op: {"median_ratio": median, "worst_ratio": worst}
                      for op, (median, worst) in report.tightness().items()},
        "root_causes": [e.name for e in report.root_causes],
        "not_certified": list(report.not_certified),
        "vacuous": list(report.vacuous),
        "nodes": [{**entry_record(e), "status": report.status(e.name)}
                  for e in report.entries],
        "outputs": [{**output_record(o), "status": report.output_status(o)}
                    for o in report.outputs],
    }


def node_record(node: IRNode) -> dict[str, Any]:
    """One GraphIR node, with its FX provenance."""
    s = node.source
    return {
        "name": node.name, "op_type": node.op_type, "inputs": list(node.inputs),
        "attrs": {k: _plain(v) for k, v in node.attrs.items()},
        "shape": None if node.shape is None else list(node.shape), "dtype": node.dtype,
        "source": {"fx_node": s.fx_name, "fx_op": s.fx_op, "spelling": s.target,
                   "module_path": s.module_path, "module_type": s.module_type,
                   "location": s.location},
    }


def graph_record(ir: GraphIR) -> dict[str, Any]:
    """A GraphIR: inputs, outputs, nodes and a summary of each constant (not its values)."""
    return {
        "inputs": [n.name for n in ir.inputs],
        "outputs": list(ir.outputs),
        "nodes": [node_record(n) for n in ir.nodes],
        "constants": [{"name": name, "dtype": str(t.dtype).removeprefix("torch."),
                       "shape": list(t.shape), "summary": describe_tensor(t)}
                      for name, t in ir.constants.items()],
    }


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def export_record(facts: ExportFacts) -> dict[str, Any]:
    """An export to ONNX: what was asked, and the file made (sizes None when refused)."""
    made = facts.exported
    return {
        "exported": made, "error": facts.error, "path": facts.path,
        "profile": facts.profile, "batch": facts.batch, "opset": facts.opset,
        "batch_axis": facts.batch_axis if made else None,
        "nodes": facts.nodes if made else None,
        "op_types": dict(facts.op_types) if made else None,
        "metadata": dict(facts.metadata) if made else None,
        "bytes": facts.size if made else None, "sha256": facts.sha256 if made else None,
    }


def export_fields(facts: ExportFacts | None) -> dict[str, Any]:
    """The keys an export adds to a command's document: `export` (None when nothing was
    exported), `lint` (each tool's report, by tool id) and `onnx_exactness` (the check of the
    file in onnxruntime, as `exactness_record` gives it, or None)."""
    if facts is None:
        return {"export": None, "lint": {}, "onnx_exactness": None}
    return {"export": export_record(facts),
            "lint": {tool: report.to_dict() for tool, report in facts.lint},
            "onnx_exactness": None if facts.check is None else exactness_record(facts.check)}
