"""The HTML report: one self-contained page (inline CSS and SVG, no scripts, nothing fetched)
with the mapping table, the support-boundary reasons, the exactness results and the
arithmetic model."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

import torch

from ..errors import REASONS, quote_source
from ..exactness.report import ExactnessReport
from ..frontend.report import STATUSES, ConversionReport, Row

CSS = """
:root { --ink: #1f2937; --muted: #64748b; --line: #e2e8f0; --soft: #f8fafc;
  --ok: #15803d; --ok-bg: #dcfce7; --bad: #b91c1c; --bad-bg: #fee2e2;
  --warn: #b45309; --warn-bg: #fef3c7; --info: #1d4ed8; --info-bg: #dbeafe; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.45;
  font: 14px/1.45 "DejaVu Sans", system-ui, -apple-system, "Segoe UI", sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 8px; padding-bottom: 4px;
  border-bottom: 2px solid var(--line); }
h3 { font-size: 15px; margin: 20px 0 6px; }
code, .mono { font-family: "DejaVu Sans Mono", ui-monospace, Menlo, Consolas, monospace;
  font-size: 12.5px; }
.meta { color: var(--muted); margin: 0 0 16px; }
.meta code { color: var(--ink); }
.verdict { border-radius: 8px; padding: 14px 18px; font-size: 17px; font-weight: 600;
  border: 1px solid; margin: 16px 0; }
.verdict.ok { background: var(--ok-bg); color: var(--ok); border-color: #86efac; }
.verdict.bad { background: var(--bad-bg); color: var(--bad); border-color: #fca5a5; }
.verdict.warn { background: var(--warn-bg); color: var(--warn); border-color: #fcd34d; }
.verdict .detail { display: block; font-size: 13px; font-weight: 400; margin-top: 4px;
  color: var(--ink); }
.tiles { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0 8px; padding: 0; }
.tile { list-style: none; border: 1px solid var(--line); border-radius: 8px;
  padding: 6px 12px; min-width: 96px; background: var(--soft); }
.tile b { display: block; font-size: 20px; }
.tile.bad { background: var(--bad-bg); border-color: #fca5a5; color: var(--bad); }
.tile span { color: var(--muted); font-size: 12px; }
nav { font-size: 13px; color: var(--muted); }
nav a { color: var(--info); margin-right: 14px; text-decoration: none; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 12.5px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { background: var(--soft); position: sticky; top: 0; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.problem td { background: #fff5f5; }
tr.violated td { background: #fff5f5; }
.pill { display: inline-block; border-radius: 999px; padding: 0 8px; font-size: 11.5px;
  font-weight: 600; white-space: nowrap; }
.pill.mapped { background: var(--ok-bg); color: var(--ok); }
.pill.lifted { background: var(--info-bg); color: var(--info); }
.pill.unsupported { background: var(--bad-bg); color: var(--bad); }
.pill.boundary { background: var(--warn-bg); color: var(--warn); }
.pill.skipped { background: var(--line); color: var(--muted); }
.reason { border: 1px solid var(--line); border-left: 4px solid var(--bad);
  border-radius: 6px; padding: 4px 14px 6px; margin: 12px 0; }
.reason.boundary { border-left-color: var(--warn); }
.reason h3 { margin: 8px 0 2px; }
.reason p { margin: 0 0 6px; color: var(--muted); }
.hint { color: var(--ok); }
.note { color: var(--muted); font-size: 13px; }
figure { margin: 8px 0 16px; }
figure svg { width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
ul.notes { margin: 4px 0 10px; padding-left: 20px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--soft);
  border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
table.compact { width: auto; min-width: 50%; }
.finding { font-weight: 600; margin: 8px 0 4px; }
.wide { overflow-x: auto; }
"""


def verdict(conversion: ConversionReport, exactness: ExactnessReport | None
            ) -> tuple[str, str]:
    """The report's headline: ("ok" | "warn" | "bad", one line of text)."""
    if not conversion.ok:
        return "bad", (f"rejected: {len(conversion.errors)} problem(s) in "
                       f"{len(conversion.rows)} FX nodes")
    if exactness is None:
        return "ok", "converts (exactness not checked)"
    first = exactness.first_violation
    if first is not None:
        return "bad", f"converts, but VIOLATION at node {first.name!r} ({first.op_type})"
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
    return "ok", f"converts; exact within the certified bounds on {exactness.samples} samples"


def render_report(conversion: ConversionReport, exactness: ExactnessReport | None = None, *,
                  title: str = "model", input_shapes: Sequence[Sequence[int]] = (),
                  command: str = "") -> str:
    """The whole report as one HTML document.

    Args:
        conversion: What `diagnose` made of the model.
        exactness: What `check_exactness` found, or None (a rejected model has none).
        title: How the model is named, e.g. the command's TARGET.
        input_shapes: The per-sample input shapes it was converted for.
        command: The command line that produced the report, shown for reproducibility.

    Returns:
        The HTML text; it needs no network and no JavaScript. Plots need matplotlib; without
        it the page says so and keeps the tables.

    Example:
        >>> page = render_report(ncet.diagnose(model, (16,)), title="mlp")
    """
    level, headline = verdict(conversion, exactness)
    sections = [_boundary(conversion), _exactness(exactness)]
    if exactness is not None:
        sections.append(_arithmetic(exactness))
    sections.append(_mapping(conversion))
    shapes = ", ".join(str(list(s)) for s in input_shapes) or "-"
    meta = (f"input shape(s) <code>{_e(shapes)}</code> &middot; torch "
            f"<code>{_e(torch.__version__)}</code>")
    if command:
        meta += f" &middot; made by <code>{_e(command)}</code>"
    links = [("boundary", "Support boundary"), ("exactness", "Exactness"),
             ("arithmetic", "Arithmetic model"), ("mapping", "Mapping table")]
    nav = "".join(f'<a href="#{i}">{t}</a>' for i, t in links
                  if exactness is not None or i != "arithmetic")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>NCET report: {_e(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<main>\n<h1>NCET report: <code>{_e(title)}</code></h1>\n"
        f"<p class=\"meta\">{meta}</p>\n"
        f"<div class=\"verdict {level}\" id=\"verdict\">{_e(headline)}"
        f"<span class=\"detail\">{_e(conversion.summary())}</span></div>\n"
        f"{_tiles(conversion, exactness)}\n<nav>{nav}</nav>\n"
        + "\n".join(sections) + "\n</main>\n</body>\n</html>\n")


def _tiles(conversion: ConversionReport, exactness: ExactnessReport | None) -> str:
    counts = {s: sum(1 for r in conversion.rows if r.status == s) for s in STATUSES}
    tiles = [("FX nodes", len(conversion.rows)), ("mapped", counts["mapped"]),
             ("lifted", counts["lifted"]), ("problems", len(conversion.errors))]
    if conversion.graph is not None:
        tiles += [("GraphIR nodes", len(conversion.graph.nodes)),
                  ("constants", len(conversion.graph.constants))]
    if exactness is not None:
        worst = max((max(e.local_ratio, e.e2e_ratio) for e in exactness.entries), default=0.0)
        tiles += [("samples checked", exactness.samples),
                  ("violations", sum(e.violated for e in exactness.entries)),
                  ("worst ratio", "< 1" if _g(worst) == "1" and worst < 1 else _g(worst))]
    alarming = {"problems", "violations"}
    items = "".join(
        f'<li class="tile{" bad" if k in alarming and v else ""}"><b>{_e(str(v))}</b>'
        f"<span>{_e(k)}</span></li>" for k, v in tiles)
    return f'<ul class="tiles">{items}</ul>'


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
        body = "".join(
            f'<tr><td class="mono">{_e(r.fx_name)}</td><td class="mono">{_e(r.spelling)}</td>'
            f'<td class="mono">{_e(quote_source(r.location, r.source_text) or "-")}</td>'
            f"<td>{_e(_sentence(_reason_text(r)))}</td>"
            f'<td class="hint">{_e(_sentence(r.hint))}</td></tr>'
            for r in rows)
        parts.append(
            f'<div class="reason {_e(kind)}" id="reason-{_e(code)}">'
            f"<h3><code>{_e(code)}</code> &middot; {len(rows)} node(s)</h3>"
            f"<p>{_e(_sentence(summary))} ({_e(reason.error if reason else kind)})</p>"
            + _table(_head("node", "spelling", "source", "problem", "what to do"), body)
            + "</div>\n")
    return "".join(parts) + "</section>"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] if text else "-"


def _reason_text(row: Row) -> str:
    error = row.error
    return error.reason if error is not None and getattr(error, "reason", "") else row.message


def _mapping(conversion: ConversionReport) -> str:
    head = _head("#", "node", "fx op", "spelling", "module", "op_type", "status", "shape",
                 "source", numeric=(0,))
    body = []
    for i, r in enumerate(conversion.rows):
        status = f'<span class="pill {_e(r.status)}">{_e(r.status)}</span>'
        if r.code:
            status += f' <code>{_e(r.code)}</code>'
        module = r.module_path + (f" ({r.module_type})" if r.module_type else "")
        cls = ' class="problem"' if r.status in ("unsupported", "boundary") else ""
        cells = (f'<td class="num">{i}</td>', f'<td class="mono">{_e(r.fx_name)}</td>',
                 f"<td>{_e(r.fx_op)}</td>", f'<td class="mono">{_e(r.spelling)}</td>',
                 f'<td class="mono">{_e(module)}</td>', f"<td>{_e(r.op_type or '-')}</td>",
                 f"<td>{status}</td>",
                 f'<td class="mono">{_e("" if r.shape is None else str(list(r.shape)))}</td>',
                 f'<td class="mono">{_e(r.location)}</td>')
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return ('<section id="mapping">\n<h2>Mapping table</h2>\n'
            f"<p>{_e(conversion.summary())}. One row per FX node, in graph order.</p>\n"
            f'<div class="wide">{_table(head, "".join(body))}</div>\n</section>')


def _exactness(exactness: ExactnessReport | None) -> str:
    head = '<section id="exactness">\n<h2>Exactness</h2>\n'
    if exactness is None:
        return head + ("<p class=\"note\">Not checked: the model does not convert, so there "
                       "is no GraphIR to hold to the certified bounds. Fix the problems "
                       "above, then run the report again.</p>\n</section>")
    finding = exactness.summary().splitlines()[0]  # the verdict, with the first violation
    parts = [head, f'<p class="finding">{_e(finding)}</p>\n',
             f'<p class="note">Inputs: {_e(exactness.inputs)}.'
             + (" The traced graph's outputs are not bit-identical to the eager model's."
                if exactness.traced_differs else "") + "</p>\n",
             _plot(exactness), _outputs(exactness), _tightness(exactness), _nodes(exactness)]
    return "".join(parts) + "</section>"


def _plot(exactness: ExactnessReport) -> str:
    from .plots import error_plot_svg, matplotlib_available

    if not matplotlib_available():
        return ('<p class="note">No plots: matplotlib is not installed '
                "(<code>pip install 'ncet[report]'</code>). The tables below hold the same "
                "numbers.</p>\n")
    if not exactness.entries:
        return ""
    return ("<figure>" + error_plot_svg(exactness) + "<figcaption>Per IR node, in topological "
            "order. At each node the element whose observed error is closest to its bound is "
            "shown: the bar is its certified bound, the dot the observed error there, so a "
            "dot above its bar is a violation (a red cross). Zeros sit on the shaded "
            "band at the bottom. The largest error over all elements is in the table "
            "below.</figcaption></figure>\n")


def _outputs(exactness: ExactnessReport) -> str:
    rows = "".join(
        f'<tr{_violated(o.violations)}><td class="mono">{_e(o.name)}</td>'
        + _numbers(o.max_error, o.bound, o.ratio) + f'<td class="num">{o.violations}</td></tr>'
        for o in exactness.outputs)
    head = _head("output", "max |model(x) - reference|", "bound", "ratio", "violations",
                 numeric=range(1, 5))
    return ("<h3>Outputs: the eager model against the reference graph</h3>\n"
            + _table(head, rows, "compact"))


def _tightness(exactness: ExactnessReport) -> str:
    tight = exactness.tightness()
    if not tight:
        return ""
    rows = "".join(f"<tr><td>{_e(op)}</td>{_numbers(median, worst)}</tr>"
                   for op, (median, worst) in sorted(tight.items()))
    head = _head("op_type", "median observed / bound", "worst observed / bound",
                 numeric=(1, 2))
    return ("<h3>How tight the node-local bounds are, per op_type</h3>\n"
            + _table(head, rows, "compact"))


def _nodes(exactness: ExactnessReport) -> str:
    head = _head("node", "op_type", "source", "local max err", "local bound", "local ratio",
                 "ulps", "sensitivity", "suspicion", "e2e max err", "e2e bound", "e2e ratio",
                 "violations", "note", numeric=range(3, 13))
    body = "".join(
        f'<tr{_violated(e.violated)}><td class="mono">{_e(e.name)}</td><td>{_e(e.op_type)}'
        f'</td><td class="mono">{_e(quote_source(e.location, e.source_text))}</td>'
        + _numbers(e.local_max_error, e.local_bound, e.local_ratio, e.local_ulps,
                   e.sensitivity, e.suspicion, e.e2e_max_error, e.e2e_bound, e.e2e_ratio)
        + f'<td class="num">{e.local_violations + e.e2e_violations}</td>'
        f"<td>{_e(e.note if e.checked else 'NOT CHECKED: ' + e.note)}</td></tr>"
        for e in exactness.entries)
    return ("<h3>Per node</h3>\n<p class=\"note\">max err: the largest |torch - reference| "
            "over all elements; bound and ratio: at the element where observed / bound is "
            "largest; ulps: that error in units in the last place of PyTorch's value; "
            "sensitivity: bound / |value| there, the smallest relative change of the value "
            "the check would have flagged (a fault below it can pass); suspicion: the "
            "node-local ratio against Higham &amp; Mary's probabilistic bound, a second tier "
            "that never changes the verdict (above 1: suspicious).</p>\n"
            f'<div class="wide">{_table(head, body)}</div>\n')


def _arithmetic(exactness: ExactnessReport) -> str:
    model = exactness.arithmetic
    status = ("certified: the bounds hold for this arithmetic" if model.certified else
              "NOT CERTIFIED: a mode outside the declared model is on")
    notes = "".join(f"<li>{_e(n)}</li>" for n in model.notes)
    flags = "".join(f'<tr><td class="mono">{_e(k)}</td><td class="mono">{_e(v)}</td></tr>'
                    for k, v in model.flags.items())
    return ('<section id="arithmetic">\n<h2>Arithmetic model</h2>\n'
            f"<p><b>{_e(status)}</b>. The bounds assume:</p>\n"
            f'<ul class="notes">{notes}</ul>\n'
            "<h3>PyTorch precision flags read at check time</h3>\n"
            + _table(_head("flag", "value"), flags, "compact") + "</section>")


def _head(*columns: str, numeric: Iterable[int] = ()) -> str:
    right = set(numeric)
    return "".join(f'<th class="num">{_e(c)}</th>' if i in right else f"<th>{_e(c)}</th>"
                   for i, c in enumerate(columns))


def _table(head: str, body: str, cls: str = "") -> str:
    attribute = f' class="{cls}"' if cls else ""
    return (f"<table{attribute}><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            "</table>\n")


def _numbers(*values: float) -> str:
    return "".join(f'<td class="num">{_g(v)}</td>' for v in values)


def _violated(violated) -> str:
    return ' class="violated"' if violated else ""


def _g(value: float) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
