"""`lint_onnx`: every node of an ONNX file that a given verification tool would reject or
silently mis-handle, with the reason and the tool-side evidence (tools.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import onnx

from ..escapes import name_text
from .onnx_file import ONNXFileError, read_model
from .tool_graph import GraphContext, ToolRule
from .tools import LINT_TOOLS, RULES_BY_OP, TOOLS

__all__ = ["LINT_TOOLS", "LintFinding", "LintReport", "ONNXFileError", "lint_onnx"]


@dataclass(frozen=True, slots=True)
class LintFinding:
    """One node a tool would reject or mis-handle."""

    node: str
    op_type: str
    verdict: str
    reason: str
    source: str
    location: str = ""
    code: str = ""


@dataclass(frozen=True, slots=True)
class LintReport:
    """The findings of `lint_onnx` for one model and one tool."""

    tool: str
    findings: tuple[LintFinding, ...]
    nodes: int

    @property
    def ok(self) -> bool:
        """True when the tool is expected to load every node as ONNX defines it."""
        return not self.findings

    def __str__(self) -> str:
        head = (f"lint for {self.tool} ({TOOLS[self.tool].importer}): {self.nodes} nodes, "
                f"{len(self.findings)} finding{'s' if len(self.findings) != 1 else ''}")
        lines = [head]
        for f in self.findings:
            at = f" [{name_text(f.location)}]" if f.location else ""
            lines.append(f"  {name_text(f.node)} ({name_text(f.op_type)}){at}: {f.verdict}: "
                         f"{f.reason}")
            lines.append(f"      source: {f.source}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """A JSON-serialisable form (the CLI's --json)."""
        return {"tool": self.tool, "nodes": self.nodes, "ok": self.ok,
                "findings": [asdict(f) for f in self.findings]}

    def to_pandas(self):
        """The findings as a pandas DataFrame, one row per finding (imports pandas)."""
        import pandas as pd

        columns = [name for name in LintFinding.__dataclass_fields__]
        return pd.DataFrame([asdict(f) for f in self.findings], columns=columns)


def _text(value: str | bytes) -> str:
    """A string field read from the file: protobuf returns one that is not valid UTF-8 as
    bytes, shown here with its undecodable bytes escaped (\\xff)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return value


def _location(node: onnx.NodeProto) -> str:
    """NCET's source line from the node's provenance (`...; at: file:line`), if any."""
    for part in _text(node.doc_string).split("; "):
        if part.startswith("at: "):
            return part[4:].strip()
    return ""


def _node_name(node: onnx.NodeProto, index: int) -> str:
    if node.name:
        return _text(node.name)
    return f"#{index} ({_text(node.output[0])})" if node.output else f"#{index}"


def lint_onnx(model_or_path, tool: str) -> LintReport:
    """Lists every node of an ONNX model that `tool`'s importer would reject or silently
    mis-handle, with the reason and the tool-side source (docs/export.md).

    Only the top-level graph is checked (no Loop/If bodies). An op type outside the tool's
    supported list is reported as rejected; the others are held to the tool's rules. The
    model is read and checked by onnx.checker the same way whatever its form (`read_model`).

    Args:
        model_or_path: An `onnx.ModelProto`, a path to a .onnx file, or its bytes.
        tool: One of `LINT_TOOLS`: "abcrown", "marabou", "nnv", "eran".

    Returns:
        A `LintReport`; `.ok` when nothing was found, `str()` for a readable listing.

    Raises:
        ValueError: `tool` is unknown.
        ONNXFileError: The model is not a valid ONNX model, or is ambiguous (a ValueError
            too; `.code` is one of `ncet.onnx.onnx_file.READING_REASONS`: onnx-unparsable,
            onnx-empty, onnx-invalid, onnx-external-data, onnx-duplicate-*,
            onnx-malformed-node, and the reader's limits and checks of docs/export.md,
            "Reading a file safely").
        TypeError: `model_or_path` is none of the accepted kinds.

    Example:
        >>> report = lint_onnx("model.onnx", tool="eran")  # doctest: +SKIP
        >>> print(report)  # doctest: +SKIP
    """
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}; choose one of {', '.join(LINT_TOOLS)}")
    model = read_model(model_or_path, "lint_onnx", accept_bytes=True, validate=True)
    spec = TOOLS[tool]
    ctx = GraphContext.of(model.graph)
    findings = []
    for index, node in enumerate(ctx.nodes):
        op_type, domain = _text(node.op_type), _text(node.domain)
        op = op_type if domain in ("", "ai.onnx") else f"{domain}.{op_type}"
        name, location = _node_name(node, index), _location(node)
        matched = [r for r in RULES_BY_OP.get((tool, op), ()) if _holds(r, node, ctx, name)]
        for rule in matched:
            findings.append(LintFinding(name, op, rule.verdict, rule.reason, rule.source,
                                        location, rule.code))
        if op not in spec.supported and not matched:
            findings.append(LintFinding(
                name, op, "rejects", f"{op} is not in {tool}'s supported ops", spec.source,
                location, f"{tool}-unsupported-op"))
    return LintReport(tool, tuple(findings), len(ctx.nodes))


def _holds(rule: ToolRule, node: onnx.NodeProto, ctx: GraphContext, name: str) -> bool:
    """Whether `rule` applies to `node`; a node the rule cannot read (a constant whose data
    does not fit its shape, say, which onnx.checker lets through) is a clear error."""
    if rule.condition is None:
        return True
    try:
        return bool(rule.condition(node, ctx))
    except (TypeError, KeyError, IndexError, ValueError, AttributeError) as exc:
        detail = (str(exc).strip().splitlines() or [""])[0]
        raise ONNXFileError("onnx-malformed-node", (
            f"the model is not a valid ONNX model: node {name!r} ({_text(node.op_type)}) "
            f"cannot be read as {_text(node.op_type)} defines it, so rule {rule.code} cannot "
            f"be applied ({type(exc).__name__}: {detail})")) from None
