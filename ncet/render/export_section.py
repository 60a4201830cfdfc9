"""The HTML report's ONNX export section, rendered from plain facts (`ExportFacts`) so that
the renderers never import onnx: the command exports, lints and checks, then hands over what
it found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..exactness.report import ExactnessEntry, ExactnessReport
from .facts import quote_source
from .tables import (
    Column,
    cell,
    escape,
    facts_html,
    long_code_cell,
    number_cells,
    records_html,
    text_cell,
)


@dataclass(frozen=True, slots=True)
class ExportFacts:
    """What one export to ONNX made of a GraphIR, and what was found about the file.

    Attributes:
        profile: The export profile asked for, e.g. "canonical".
        batch: The batch size asked for; None for a symbolic batch axis.
        opset: The ONNX opset of the default domain.
        error: Why the export was refused (the message names the node), or None.
        path: Where the file was written; None when exported in memory only.
        nodes: ONNX nodes in the graph.
        op_types: (ONNX op type, nodes of that type), most frequent first.
        batch_axis: The first input's batch dimension in the file: an int, or the name of the
            symbolic dimension.
        metadata: The model's metadata_props, as (key, value) pairs.
        size: Bytes of the serialized model.
        sha256: The sha256 of those bytes.
        lint: (tool, its lint report) per tool linted; a report has `.ok`, `.findings` (each
            with node, op_type, verdict, reason, source, location) and `.to_dict()`.
        check: What the check of the file in onnxruntime found, or None when not asked.
    """

    profile: str
    batch: int | None
    opset: int
    error: str | None = None
    path: str | None = None
    nodes: int = 0
    op_types: tuple[tuple[str, int], ...] = ()
    batch_axis: int | str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    size: int = 0
    sha256: str = ""
    lint: tuple[tuple[str, Any], ...] = ()
    check: ExactnessReport | None = None

    @property
    def exported(self) -> bool:
        """The profile could express the GraphIR: a model was made (and written, with a path)."""
        return self.error is None

    @property
    def findings(self) -> int:
        """Lint findings over every tool linted."""
        return sum(len(report.findings) for _, report in self.lint)

    @property
    def ok(self) -> bool:
        """Exported, no lint finding, and the check (when run) certifies the file."""
        return self.exported and all(r.ok for _, r in self.lint) and (
            self.check is None or self.check.ok)

    def headline(self) -> tuple[str, str]:
        """("ok" | "warn" | "bad", what the export adds to the report's verdict)."""
        if not self.exported:
            return "bad", f"ONNX export refused ({self.profile} profile)"
        if self.check is not None and not self.check.ok:
            return "bad", "ONNX file: " + self.check.summary().splitlines()[0]
        if self.findings:
            tools = ", ".join(tool for tool, report in self.lint if not report.ok)
            return "warn", f"ONNX file: {self.findings} lint finding(s) for {tools}"
        checked = "; certified in onnxruntime" if self.check is not None else ""
        return "ok", f"exported to ONNX ({self.profile} profile){checked}"


def batch_text(batch_axis: int | str | None) -> str:
    """An ONNX file's batch dimension in words: "fixed batch size 1" for a fixed size,
    "symbolic batch size N" for a symbolic one ("none" for a file without inputs), never
    "batch axis 1", which reads as if the batch were axis 1."""
    if batch_axis is None:
        return "none"
    if isinstance(batch_axis, int):
        return f"fixed batch size {batch_axis}"
    return f"symbolic batch size {batch_axis}"


OP_TYPE_COLUMNS = (
    Column("ONNX op type", lambda p: text_cell(p[0], "mono")),
    Column("nodes", lambda p: cell(str(p[1]), "num"), numeric=True),
)
"""The node count per ONNX op type: one (op type, count) pair per row."""

METADATA_COLUMNS = (
    Column("key", lambda p: text_cell(p[0], "mono")),
    Column("value", lambda p: text_cell(p[1], "mono")),
)
"""The model's metadata_props: one (key, value) pair per row."""

FINDING_COLUMNS = (
    Column("node", lambda f: text_cell(f.node, "mono")),
    Column("op type", lambda f: text_cell(f.op_type, "mono")),
    Column("verdict", lambda f: text_cell(f.verdict)),
    Column("reason", lambda f: text_cell(f.reason)),
    Column("source", lambda f: text_cell(f.source)),
    Column("location", lambda f: text_cell(f.location or "-", "mono")),
)
"""One tool's lint findings: one LintFinding per row."""

CHECK_COLUMNS = (
    Column("node", lambda e: text_cell(e.name, "mono")),
    Column("op_type", lambda e: text_cell(e.op_type)),
    Column("source", lambda e: long_code_cell(quote_source(e.location, e.source_text))),
    Column("local ratio", lambda e: number_cells(e.local_ratio), numeric=True),
    Column("e2e ratio", lambda e: number_cells(e.e2e_ratio), numeric=True),
    Column("violations", lambda e: cell(str(e.local_violations + e.e2e_violations), "num"),
           numeric=True),
    Column("note", lambda e: text_cell(e.note if e.checked else "NOT CHECKED: " + e.note)),
)
"""The check of the file, per IR node: observed error / certified bound."""


def _violated(entry: ExactnessEntry) -> str:
    return "violated" if entry.violated else ""


def export_html(facts: ExportFacts) -> str:
    """The report's `<section id="export">`: the refusal, or the file's profile, opset, node
    count per op type, metadata_props, the lint findings per tool and the check's verdict."""
    head = '<section id="export">\n<h2>ONNX export</h2>\n'
    if not facts.exported:
        return head + (f'<p class="finding">Refused by the {escape(facts.profile)} profile: '
                       f"{escape(facts.error)}</p>\n<p class=\"note\">Nothing was exported: "
                       "an export that could compute something else than the GraphIR is "
                       "refused (docs/export.md).</p>\n</section>")
    about = [("profile", facts.profile), ("opset", facts.opset),
             ("batch", batch_text(facts.batch_axis)), ("ONNX nodes", facts.nodes),
             ("bytes", f"{facts.size:,}"), ("sha256", facts.sha256)]
    if facts.path is not None:
        about.insert(0, ("file", facts.path))
    parts = [head, facts_html(about) + "\n",
             "<h3>Nodes per ONNX op type</h3>\n",
             records_html(facts.op_types, OP_TYPE_COLUMNS, "compact") + "\n",
             "<h3>metadata_props</h3>\n",
             records_html(facts.metadata, METADATA_COLUMNS, "compact") + "\n"]
    parts += [_lint(tool, report) for tool, report in facts.lint]
    if facts.check is not None:
        parts.append(_check(facts.check))
    return "".join(parts) + "</section>"


def _lint(tool: str, report: Any) -> str:
    title = f'<h3 id="lint-{escape(tool)}">Lint: {escape(tool)}</h3>\n'
    findings: Sequence[Any] = report.findings
    if not findings:
        return title + (f"<p>No node of this file is one {escape(tool)} would reject or "
                        "mis-handle.</p>\n")
    return (title + f'<p class="finding">{len(findings)} node(s) {escape(tool)} would reject '
            "or silently mis-handle:</p>\n"
            + records_html(findings, FINDING_COLUMNS, "compact", row_class=lambda _: "problem")
            + "\n")


def _check(check: ExactnessReport) -> str:
    finding = check.summary().splitlines()[0]
    table = records_html(check.entries, CHECK_COLUMNS, "", row_class=_violated)
    return ('<h3 id="onnx-check">onnxruntime against the GraphIR</h3>\n'
            f'<p class="finding">{escape(finding)}</p>\n'
            f'<p class="note">Inputs: {escape(check.inputs)}.</p>\n'
            f'<div class="wide">{table}</div>\n')
