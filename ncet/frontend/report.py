"""ConversionReport: one row per FX node, with every problem of the model at once."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..errors import ConversionError, from_caller
from ..ir import GraphIR, Source

STATUSES = ("mapped", "lifted", "unsupported", "boundary", "skipped", "cut")
"""Row statuses: mapped to an op_type, lifted into constants, rejected by spelling, rejected
by the support boundary, not checked because a node it depends on failed to run (or was
not run: a rejected function of the user's own code), or left out by `stop_at` or
`cut_trailing` (not run, not part of the GraphIR)."""

_PROBLEMS = ("unsupported", "boundary")

ROW_COLUMNS = ("fx_name", "fx_op", "spelling", "module_path", "module_type", "op_type",
               "status", "code", "message", "hint", "shape", "location", "source_text",
               "rewrite")
"""The columns of `ConversionReport.to_pandas`: the provenance first, then the outcome, and
the rewrite rule that changed the node (with `rewrite=True`; "" for none)."""


@dataclass(frozen=True, slots=True)
class Row:
    """What NCET made of one FX node.

    `source` is the node's provenance record (`Source`, the record an IRNode carries: FX
    node, spelling, module path and type, file:line); `fx_name`, `fx_op`, `spelling`,
    `module_path`, `module_type` and `location` read it.
    """

    source: Source
    op_type: str | None
    status: str
    code: str | None
    message: str
    hint: str
    shape: tuple[int, ...] | None
    error: ConversionError | None = field(default=None, compare=False, repr=False)
    source_text: str = ""
    rewrite: str = ""

    fx_name = property(lambda self: self.source.fx_name, doc="The FX node's name.")
    fx_op = property(lambda self: self.source.fx_op, doc="The FX node's op.")
    spelling = property(lambda self: self.source.target, doc="The spelling NCET saw.")
    module_path = property(lambda self: self.source.module_path, doc="The module's path.")
    module_type = property(lambda self: self.source.module_type, doc="The module's type.")
    location = property(lambda self: self.source.location, doc="file:line, or \"\".")

    def __str__(self) -> str:
        """The message a problem row carries (`print(report.errors[0])` reads as the error
        does); for a row without a problem, what the node became, e.g. "node 'fc'
        (call_module nn.Linear): mapped to Linear"."""
        if self.message:
            return self.message
        made = f" to {self.op_type}" if self.op_type else ""
        where = f" ({self.fx_op} {self.spelling})".rstrip() if self.fx_op else ""
        return f"node {self.fx_name!r}{where}: {self.status}{made}"


@dataclass(frozen=True)
class ConversionReport:
    """The result of `diagnose`: a row per FX node and, when every node converts, the GraphIR.

    Attributes:
        rows: One `Row` per FX node, in graph order (a single row when tracing failed);
            for an ONNX file (`diagnose_onnx`), one per graph input, then one per ONNX node.
        graph: The GraphIR when `ok`, else None.
        notes: What the reader should know about the whole import (an ONNX file: how its
            batch axis was read).
        unit: What a row stands for, as the summary counts them ("FX nodes", "ONNX nodes").
    """

    rows: tuple[Row, ...]
    graph: GraphIR | None
    notes: tuple[str, ...] = ()
    unit: str = "FX nodes"

    @property
    def ok(self) -> bool:
        """True when the whole model converts."""
        return self.graph is not None

    @property
    def errors(self) -> tuple[Row, ...]:
        """The rows with a problem, in graph order."""
        return tuple(r for r in self.rows if r.status in _PROBLEMS)

    @property
    def cut(self) -> tuple[Row, ...]:
        """The rows of the nodes `stop_at` or `cut_trailing` left out, in graph order (each
        message says why); empty when the whole model was converted."""
        return tuple(r for r in self.rows if r.status == "cut")

    def cut_summary(self) -> str:
        """One line naming what was cut (node, spelling, where), "" when nothing was."""
        if not self.cut:
            return ""
        shown = [f"{r.fx_name} ({_where(r)})" for r in self.cut[:SHOWN_PER_REASON]]
        more = len(self.cut) - len(shown)
        tail = f" and {more} more" if more > 0 else ""
        return (f"cut: {len(self.cut)} node(s) left out of the GraphIR: {', '.join(shown)}"
                f"{tail} ({self.cut[0].message.removeprefix('cut: ').split(';')[0]})")

    @from_caller
    def raise_first(self) -> None:
        """Raise the first problem's ConversionError, if there is one (from the caller's
        frame, as `convert` raises it)."""
        for row in self.errors:
            raise row.error

    def to_pandas(self, styled: bool = False):
        """The rows as a pandas DataFrame (without the error objects), one per FX node.

        Args:
            styled: Return a pandas Styler of that DataFrame for notebooks instead: status
                pills, rejected rows tinted, shapes as `[3, 32, 32]` on one line, numbers
                right-aligned, no index. Its `.data` is the plain DataFrame, unchanged.
                Needs jinja2 to render (pandas' own requirement for Stylers).

        Returns:
            A pandas DataFrame with the columns `ROW_COLUMNS`, or its Styler.
        """
        import pandas as pd

        columns = ROW_COLUMNS
        frame = pd.DataFrame([{c: getattr(r, c) for c in columns} for r in self.rows],
                             columns=columns)
        return _styled(frame) if styled else frame

    def summary(self) -> str:
        """One line: how many nodes, how many mapped, how many problems."""
        counts = {s: sum(1 for r in self.rows if r.status == s) for s in STATUSES}
        parts = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        verdict = "converts" if self.ok else f"rejected: {len(self.errors)} problem(s)"
        cut = f"; {self.cut_summary()}" if self.cut else ""
        notes = "".join(f"; {note}" for note in self.notes)
        return f"{len(self.rows)} {self.unit} ({parts}); {verdict}{cut}{notes}"

    def table(self) -> str:
        """The per-node mapping table as fixed-width text."""
        header = ("node", "fx op", "spelling", "module", "op_type", "status", "shape", "source")
        lines = [header] + [(
            r.fx_name, r.fx_op, r.spelling, r.module_path, r.op_type or "-",
            r.status if r.code is None else f"{r.status}:{r.code}",
            "" if r.shape is None else str(list(r.shape)), r.location) for r in self.rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
                         for line in lines)

    def __repr__(self) -> str:
        text = [self.summary(), self.table()]
        text += [f"- {r.message}" for r in self.errors]
        return "\n".join(text)

    def op_type_counts(self) -> dict[str, int]:
        """How many FX nodes map to each op_type, in order of first appearance."""
        return dict(Counter(r.op_type for r in self.rows if r.op_type is not None))

    def _repr_html_(self) -> str:
        """The notebook display: the verdict, the problems grouped by reason code (node,
        source line, reason, hint) and the op_types the nodes map to; the full per-node
        table is `to_pandas(styled=True)`."""
        from ..render import VIEW_STYLE, escape, reason_summary

        counts = Counter(r.status for r in self.rows)
        if self.ok:
            assert self.graph is not None
            level = "ok"
            verdict = (f"converts: {len(self.rows)} FX nodes to {len(self.graph.nodes)} GraphIR "
                       f"nodes and {len(self.graph.constants)} constants")
        else:
            groups: dict[str, list[Row]] = {}
            for row in self.errors:
                groups.setdefault(row.code or "", []).append(row)
            level = "bad"
            verdict = (f"rejected: {len(self.errors)} problem(s) for {len(groups)} reason(s) "
                       f"in {len(self.rows)} FX nodes")
        tally = " ".join(f'<span class="pill {s}">{counts[s]} {s}</span>'
                         for s in STATUSES if counts[s])
        parts = [VIEW_STYLE, _DISPLAY_STYLE, '<div class="ncet-static ncet-conversion">',
                 f'<div class="ncet-verdict {level}">{escape(verdict)}</div>',
                 f'<p class="ncet-tally">{tally}</p>']
        if not self.ok:
            for code, rows in groups.items():
                parts.append(_reason_html(code, rows, reason_summary(code), escape))
        mapped = self.op_type_counts()
        if mapped:
            chips = " &middot; ".join(f"<code>{escape(op)}</code>&nbsp;&times;{n}"
                                      for op, n in mapped.items())
            parts.append(f'<p class="ncet-ops"><b>op_types</b> {chips}</p>')
        if self.cut:
            items = "".join(f"<li><code>{escape(r.fx_name)}</code> <code>{escape(r.spelling)}"
                            f"</code> {_source_html(r, escape)}: {escape(r.message)}</li>"
                            for r in self.cut[:SHOWN_PER_REASON])
            more = len(self.cut) - SHOWN_PER_REASON
            items += f"<li>... and {more} more node(s)</li>" if more > 0 else ""
            parts.append(f'<div class="ncet-cut"><p><b>cut</b> &middot; {len(self.cut)} '
                         f"node(s) left out of the GraphIR:</p><ul>{items}</ul></div>")
        rewritten = sum(1 for r in self.rows if r.rewrite)
        if rewritten:
            parts.append(f'<p class="ncet-note">{rewritten} node(s) rewritten (opt-in '
                         "rewrites; see the <code>rewrite</code> column).</p>")
        parts.append('<p class="ncet-note">Every node: <code>report.to_pandas(styled=True)'
                     "</code>; the errors: <code>report.errors</code>.</p></div>")
        return "".join(parts)


def _where(row: Row) -> str:
    """A cut node's spelling and where it sits (file:line, else its module path)."""
    return ", ".join(p for p in (row.spelling, row.location or row.module_path) if p)


SHOWN_PER_REASON = 25
"""Rejected nodes listed per reason code in the notebook display; the rest are counted."""

_DISPLAY_STYLE = (
    "<style>"
    ".ncet-conversion{font-size:13px;line-height:1.4;max-width:100%;overflow-x:auto}"
    ".ncet-conversion .ncet-verdict{display:inline-block;border:1px solid;border-radius:6px;"
    "padding:6px 12px;font-weight:600;margin:4px 0}"
    ".ncet-conversion .ncet-verdict.ok{background:var(--ncet-ok-bg,#dcfce7);"
    "color:var(--ncet-ok,#15803d)}"
    ".ncet-conversion .ncet-verdict.bad{background:var(--ncet-bad-bg,#fee2e2);"
    "color:var(--ncet-bad,#b91c1c)}"
    ".ncet-conversion .ncet-reason{border-left:4px solid var(--ncet-bad,#b91c1c);"
    "padding:2px 10px;margin:8px 0}"
    ".ncet-conversion .ncet-reason.boundary{border-left-color:var(--ncet-warn,#b45309)}"
    ".ncet-conversion .ncet-reason p{margin:2px 0 4px}"
    ".ncet-conversion td.nowrap,.ncet-conversion span.nowrap{white-space:nowrap}"
    ".ncet-conversion .ncet-note{color:var(--ncet-muted,#64748b);font-size:12px}"
    "</style>")
"""The display's own rules, scoped to `.ncet-conversion`, in the palette of `ncet.render`'s
VIEW_STYLE (which styles its tables, pills and problem rows and follows JupyterLab's theme)."""


def _reason_html(code: str, rows: list[Row], summary: str, escape) -> str:
    """One reason code's box: its meaning and a table of the nodes it rejects."""
    kind = "boundary" if rows[0].status == "boundary" else "unsupported"
    error = rows[0].error
    cls = type(error).__name__ if error is not None else kind
    meaning = f"{summary[:1].upper()}{summary[1:]} ({cls})" if summary else cls
    body = "".join(
        f'<tr class="problem"><td class="nowrap"><code>{escape(r.fx_name)}</code></td>'
        f'<td class="nowrap"><code>{escape(r.spelling)}</code></td>'
        f"<td>{_source_html(r, escape)}</td>"
        f"<td>{escape(r.error.reason if r.error is not None else r.message)}</td>"
        f'<td class="hint">{escape(r.hint)}</td></tr>'
        for r in rows[:SHOWN_PER_REASON])
    more = len(rows) - SHOWN_PER_REASON
    tail = f'<p class="ncet-note">... and {more} more node(s).</p>' if more > 0 else ""
    return (f'<div class="ncet-reason {kind}"><p><b><code>{escape(code)}</code></b> &middot; '
            f"{len(rows)} node(s): {escape(meaning)}</p>"
            "<table><thead><tr><th>node</th><th>spelling</th><th>source</th><th>reason</th>"
            f"<th>hint</th></tr></thead><tbody>{body}</tbody></table>{tail}</div>")


def _source_html(row: Row, escape) -> str:
    """file:line and, when Python could read it, the line's code."""
    where = f'<span class="nowrap">{escape(row.location)}</span>' if row.location else ""
    code = f" <code>{escape(row.source_text)}</code>" if row.source_text else ""
    return where + code or "-"


_STATUS_COLORS = {"mapped": ("#dcfce7", "#14532d"), "lifted": ("#dbeafe", "#1e3a8a"),
                  "unsupported": ("#fee2e2", "#7f1d1d"), "boundary": ("#fef3c7", "#78350f"),
                  "skipped": ("#e2e8f0", "#334155"), "cut": ("#ede9fe", "#4c1d95")}
"""Pill colours of the Styler, whose table sits outside VIEW_STYLE's scope: light
backgrounds with dark text, legible in light and dark themes alike."""

_PROBLEM_TINT = "background-color:rgba(220,38,38,0.10)"
"""A rejected row's tint: translucent, so the theme's own text colour stays legible."""


def _styled(frame):
    """`frame` (of `to_pandas`) as a Styler: status pills, rejected rows tinted, shapes on
    one line, numbers right-aligned, text HTML-escaped."""
    from ..render import pill

    problem = frame["status"].isin(_PROBLEMS)
    numeric = [c for c in frame.columns if frame[c].dtype.kind in "iuf"]
    pills = [{"selector": f".pill.{s}", "props": f"background:{bg};color:{fg}"}
             for s, (bg, fg) in _STATUS_COLORS.items()]
    styler = frame.style.format(na_rep="", escape="html")
    styler = styler.format(lambda s: pill(str(s)), subset=["status"])
    styler = styler.format(lambda s: "" if s is None else f"[{', '.join(map(str, s))}]",
                           subset=["shape"], escape="html")
    return (styler.hide(axis="index")
            .apply(lambda row: [_PROBLEM_TINT if problem[row.name] else ""] * len(row),
                   axis=1)
            .set_properties(subset=["shape", "fx_name", "spelling", "status", "code",
                                    "location"], **{"white-space": "nowrap"})
            .set_properties(subset=numeric, **{"text-align": "right"})
            .set_properties(subset=["message"], **{"min-width": "28em"})
            .set_properties(subset=["hint"], **{"min-width": "16em"})
            .set_table_styles([
                {"selector": "", "props": "border-collapse:collapse;font-size:12px"},
                {"selector": "th, td", "props": "padding:2px 8px;text-align:left;"
                 "vertical-align:top;border-bottom:1px solid var(--jp-border-color2,#e2e8f0)"},
                {"selector": ".pill", "props": "display:inline-block;border-radius:999px;"
                 "padding:0 8px;font-size:11.5px;font-weight:600;white-space:nowrap"},
                *pills]))
