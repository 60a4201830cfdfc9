"""The HTML report: one self-contained page (inline CSS and SVG, no scripts, nothing fetched)
with the mapping table, the support-boundary reasons, the exactness results, the arithmetic
model, the graph as the notebook Workbench's Graph tab first draws it (`graph_svg`) and, when
asked, the ONNX export (`export_section`); its tables are declared as columns
(`tables.Column`); the exactness section is `exactness_section`'s."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import REASONS
from ..exactness.report import ExactnessReport
from ..exactness.report_view import names_text, ratio_text
from ..frontend.report import STATUSES, ConversionReport, Row
from .css import REPORT_CSS
from .exactness_section import exactness_section
from .export_section import ExportFacts, export_html
from .facts import quote_source
from .graph_svg import graph_html
from .tables import (
    Column,
    cell,
    escape,
    long_code_cell,
    pill,
    records_html,
    sentence,
    text_cell,
)


def verdict(conversion: ConversionReport, exactness: ExactnessReport | None,
            export: ExportFacts | None = None) -> tuple[str, str]:
    """The report's headline: ("ok" | "warn" | "bad", one line of text); an export's refusal,
    lint findings or failed check is added to a verdict that is not already bad."""
    level, text = _verdict(conversion, exactness)
    if export is None or level == "bad":
        return level, text
    added, more = export.headline()
    rank = ("ok", "warn", "bad")
    return max(level, added, key=rank.index), f"{text}; {more}"


def _verdict(conversion: ConversionReport, exactness: ExactnessReport | None
             ) -> tuple[str, str]:
    if not conversion.ok:
        return "bad", (f"rejected: {len(conversion.errors)} problem(s) in "
                       f"{len(conversion.rows)} FX nodes")
    if exactness is None:
        return "ok", "converts (exactness not checked)"
    first = exactness.first_violation
    if first is not None:
        roots = [e.name for e in exactness.root_causes]  # the first violation is one
        return "bad", (f"converts, but VIOLATION at node {first.name!r} ({first.op_type})"
                       + (f"; root causes {names_text(roots)}" if len(roots) > 1 else ""))
    if exactness.traced_differs:
        return "bad", ("converts, but VIOLATION at an output: the model's eager output is not "
                       "its traced graph's")
    if any(o.violations for o in exactness.outputs):
        return "bad", "converts, but VIOLATION at an output: the eager model differs"
    if not exactness.arithmetic.certified:
        return "warn", ("converts; NOT CERTIFIED: the arithmetic in force is outside the "
                        "declared model")
    if exactness.unchecked:
        return "warn", (f"converts; NOT CERTIFIED: {len(exactness.unchecked)} node(s) or "
                        "output(s) could not be checked")
    done = f"converts; exact within the certified bounds on {exactness.samples} samples"
    vacuous = exactness.vacuous_outputs
    if vacuous:
        return "warn", (f"{done}, but the end-to-end bound is vacuous at output(s) "
                        f"{names_text(o.name for o in vacuous)} (bound >= max |value|: "
                        "only the node-local checks certify anything there)")
    return "ok", done


def render_report(conversion: ConversionReport, exactness: ExactnessReport | None = None, *,
                  title: str = "model", input_shapes: Sequence[Sequence[int]] = (),
                  command: str = "", export: ExportFacts | None = None) -> str:
    """The whole report as one HTML document.

    Args:
        conversion: What `diagnose` made of the model.
        exactness: What `check_exactness` found, or None (a rejected model has none).
        title: How the model is named, e.g. the command's TARGET.
        input_shapes: The per-sample input shapes it was converted for.
        command: The command line that produced the report, shown for reproducibility.
        export: What exporting the GraphIR to ONNX found (`export_section.ExportFacts`): adds
            the export section and its verdict (for a rejected model, a section saying
            nothing was exported); None for no export section.

    Returns:
        The HTML text; it needs no network and no JavaScript. Plots need matplotlib; without
        it the page says so and keeps the tables (and the graph, which needs no matplotlib).

    Example:
        >>> page = render_report(ncet.diagnose(model, (16,)), title="mlp")
    """
    level, headline = verdict(conversion, exactness, export)
    sections = [_boundary(conversion), exactness_section(exactness)]
    if exactness is not None:
        sections.append(_arithmetic(exactness))
    if export is not None:
        sections.append(export_html(export) if conversion.ok else _NOT_EXPORTED)
    sections += [_graph(conversion), _mapping(conversion)]
    shapes = ", ".join(str(list(s)) for s in input_shapes) or "-"
    meta = (f"input shape(s) <code>{escape(shapes)}</code> &middot; torch "
            f"<code>{escape(torch.__version__)}</code>")
    if command:
        meta += f" &middot; made by <code>{escape(command)}</code>"
    links = [("boundary", "Support boundary"), ("exactness", "Exactness"),
             ("arithmetic", "Arithmetic model"), ("export", "ONNX export"), ("graph", "Graph"),
             ("mapping", "Mapping table")]
    shown = {"arithmetic": exactness is not None, "export": export is not None}
    nav = "".join(f'<a href="#{i}">{t}</a>' for i, t in links if shown.get(i, True))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>NCET report: {escape(title)}</title>\n<style>{REPORT_CSS}</style>\n"
        "</head>\n<body>\n"
        f"<main>\n<h1>NCET report: <code>{escape(title)}</code></h1>\n"
        f"<p class=\"meta\">{meta}</p>\n"
        f"<div class=\"verdict {level}\" id=\"verdict\">{escape(headline)}"
        f"<span class=\"detail\">{escape(conversion.summary())}</span></div>\n"
        f"{_tiles(conversion, exactness)}\n<nav>{nav}</nav>\n"
        + "\n".join(sections) + "\n</main>\n</body>\n</html>\n")


_NOT_EXPORTED = ('<section id="export">\n<h2>ONNX export</h2>\n<p class="note">Not exported: '
                 "the model does not convert, so there is no GraphIR to write as ONNX.</p>\n"
                 "</section>")


def _graph(conversion: ConversionReport) -> str:
    head = '<section id="graph">\n<h2>Graph</h2>\n'
    if conversion.graph is None:
        return head + ('<p class="note">No graph: the model does not convert, so there is no '
                       "GraphIR to draw.</p>\n</section>")
    return head + ("<p>The GraphIR as the notebook Workbench's Graph tab first draws it: a "
                   "dashed frame per module call, in the order the calls ran, a box per node "
                   "in its op_type's colour with its output shape and key attributes (hover "
                   "over a box for all of them).</p>\n"
                   f"{graph_html(conversion.graph)}\n</section>")


def _tiles(conversion: ConversionReport, exactness: ExactnessReport | None) -> str:
    counts = {s: sum(1 for r in conversion.rows if r.status == s) for s in STATUSES}
    tiles = [("FX nodes", len(conversion.rows)), ("mapped", counts["mapped"]),
             ("lifted", counts["lifted"]), ("problems", len(conversion.errors))]
    if conversion.graph is not None:
        tiles += [("GraphIR nodes", len(conversion.graph.nodes)),
                  ("constants", len(conversion.graph.constants))]
    if exactness is not None:
        tiles += [("samples checked", exactness.samples),
                  ("root causes", len(exactness.root_causes)),
                  ("not certified", len(exactness.not_certified)),
                  ("worst ratio", ratio_text(exactness.worst_ratio))]  # as in the finding
        if exactness.vacuous_outputs:
            tiles.append(("vacuous output bounds", len(exactness.vacuous_outputs)))
    alarming = {"problems", "root causes", "not certified", "vacuous output bounds"}
    items = "".join(
        f'<li class="tile{" bad" if k in alarming and v else ""}"><b>{escape(str(v))}</b>'
        f"<span>{escape(k)}</span></li>" for k, v in tiles)
    return f'<ul class="tiles">{items}</ul>'


def _mono(value) -> str:
    return text_cell(value, "mono")


def _module(row: Row) -> str:
    return row.module_path + (f" ({row.module_type})" if row.module_type else "")


def _status(row: Row) -> str:
    return pill(row.status) + (f" <code>{escape(row.code)}</code>" if row.code else "")


def _reason_text(row: Row) -> str:
    error = row.error
    return error.reason if error is not None and getattr(error, "reason", "") else row.message


REASON_COLUMNS = (
    Column("node", lambda r: _mono(r.fx_name)),
    Column("spelling", lambda r: _mono(r.spelling)),
    Column("source", lambda r: long_code_cell(quote_source(r.location, r.source_text) or "-")),
    Column("problem", lambda r: text_cell(sentence(_reason_text(r)))),
    Column("what to do", lambda r: text_cell(sentence(r.hint), "hint")),
)
"""The table of one reason code's rejected nodes."""

MAPPING_COLUMNS = (
    Column("#", lambda p: cell(str(p[0]), "num"), numeric=True),
    Column("node", lambda p: _mono(p[1].fx_name)),
    Column("fx op", lambda p: text_cell(p[1].fx_op)),
    Column("spelling", lambda p: _mono(p[1].spelling)),
    Column("module", lambda p: long_code_cell(_module(p[1]))),
    Column("op_type", lambda p: text_cell(p[1].op_type or "-")),
    Column("status", lambda p: cell(_status(p[1]))),
    Column("shape", lambda p: _mono("" if p[1].shape is None else str(list(p[1].shape)))),
    Column("source", lambda p: long_code_cell(p[1].location)),
)
"""The mapping table: one (position, Row) per FX node."""

FLAG_COLUMNS = (Column("flag", lambda f: _mono(f[0])), Column("value", lambda f: _mono(f[1])))
"""The precision flags table: one (flag, value) per flag."""


def _table(records, columns, cls: str = "", row_class=None) -> str:
    return records_html(records, columns, cls, row_class=row_class) + "\n"


def _problem(pair: tuple[int, Row]) -> str:
    return "problem" if pair[1].status in ("unsupported", "boundary") else ""


def _boundary(conversion: ConversionReport) -> str:
    head = '<section id="boundary">\n<h2>Support boundary</h2>\n'
    if not conversion.errors:
        return head + ("<p>Every FX node is inside the support boundary: nothing was "
                       "rejected.</p>\n</section>")
    groups: dict[str, list[Row]] = {}
    for row in conversion.errors:
        groups.setdefault(row.code or "unknown", []).append(row)
    parts = [head, f"<p>{len(conversion.errors)} node(s) rejected, for "
                   f"{len(groups)} reason(s). Each is listed with its source line and what "
                   "to do about it.</p>\n"]
    for code, rows in groups.items():
        reason = REASONS.get(code)
        summary = reason.summary if reason else ""
        kind = rows[0].status
        parts.append(
            f'<div class="reason {escape(kind)}" id="reason-{escape(code)}">'
            f"<h3><code>{escape(code)}</code> &middot; {len(rows)} node(s)</h3>"
            f"<p>{escape(sentence(summary))} ({escape(reason.error if reason else kind)})</p>"
            + _table(rows, REASON_COLUMNS) + "</div>\n")
    return "".join(parts) + "</section>"


def _mapping(conversion: ConversionReport) -> str:
    table = _table(enumerate(conversion.rows), MAPPING_COLUMNS, row_class=_problem)
    return ('<section id="mapping">\n<h2>Mapping table</h2>\n'
            f"<p>{escape(conversion.summary())}. One row per FX node, in graph order.</p>\n"
            f'<div class="wide">{table}</div>\n</section>')


def _arithmetic(exactness: ExactnessReport) -> str:
    model = exactness.arithmetic
    status = ("certified: the bounds hold for this arithmetic" if model.certified else
              "NOT CERTIFIED: a mode outside the declared model is on")
    notes = "".join(f"<li>{escape(n)}</li>" for n in model.notes)
    return ('<section id="arithmetic">\n<h2>Arithmetic model</h2>\n'
            f"<p><b>{escape(status)}</b>. The bounds assume:</p>\n"
            f'<ul class="notes">{notes}</ul>\n'
            "<h3>PyTorch precision flags read at check time</h3>\n"
            + _table(model.flags.items(), FLAG_COLUMNS, "compact") + "</section>")
