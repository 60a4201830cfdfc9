"""The float margin report: a `Margin` (`ncet.float_margin`), and optionally the `Property` it
was computed for and the network, as HTML: the headline, eps per output against the exact
output's range, each unsafe row against the exact interval and eps (`margin_facts`), where
eps comes from (each node's share: a table and `margin_figure`) and the unstable neurons per
nonlinear node. One renderer for the report page (`margin_page`), its section
(`margin_section`), the notebook display (`margin_repr_html`) and the workbench's margin
view; `margin_summary` is the same in a few lines of text.
"""

from __future__ import annotations

import math

import torch

from . import plots
from .css import REPORT_CSS, VIEW_STYLE
from .margin_facts import (
    VERDICTS,
    node_shares,
    output_margins,
    property_verdict,
    row_margins,
    unstable_rows,
)
from .tables import Column, cell, escape, number, number_cells, records_html, text_cell

SHOWN = 20
"""The most outputs, rows and nodes the notebook display lists (the page lists them all)."""

LEVEL_CSS = (".finding.ok { color: var(--ncet-ok); } .finding.warn, .finding.open "
             "{ color: var(--ncet-warn); }")
"""The colour of a finding by its level: ok (green), warn and open (amber)."""

DISPLAY_CSS = (".ncet-margin h3 { font-size: 13.5px; margin: 14px 0 4px; } "
               ".ncet-margin .finding { font-size: 13px; font-weight: 600; } "
               ".ncet-margin p { margin: 4px 0; } "
               ".ncet-margin .note, .ncet-margin figcaption { color: var(--ncet-muted); "
               "font-size: 12px; } .ncet-margin figure { margin: 6px 0; }")
"""The notebook display's headings, findings and notes, in the views' palette (the page has
`REPORT_CSS`)."""


def _mono(value) -> str:
    return text_cell(value, "mono")


def _exact_number(value) -> str:
    """A Fraction (or an infinite float) as the tables print numbers."""
    return number(float(value))


def _interval(low, high) -> str:
    return cell(f"[{_exact_number(low)}, {_exact_number(high)}]", "num")


def _ratio(error, room) -> str:
    """error / room where every exact output stays below the row (room > 0), else "-"."""
    if not room > 0 or not math.isfinite(float(error)):
        return cell("-", "num")
    return cell(number(float(error / room)), "num")


OUTPUT_COLUMNS = (
    Column("output", lambda o: _mono(f"Y_{o.index}")),
    Column("eps", lambda o: number_cells(o.eps), numeric=True),
    Column("exact output over the region", lambda o: _interval(o.lower, o.upper),
           numeric=True),
    Column("range (upper - lower)", lambda o: number_cells(o.range), numeric=True),
    Column("eps / range", lambda o: number_cells(o.relative), numeric=True),
)
"""The outputs table: one `OutputMargin` per output element."""

ROW_COLUMNS = (
    Column("case", lambda r: cell(str(r.case), "num"), numeric=True),
    Column("polytope", lambda r: cell(str(r.polytope), "num"), numeric=True),
    Column("unsafe row", lambda r: _mono(r.text)),
    Column("b - a.y over the region", lambda r: _interval(r.low, r.high), numeric=True),
    Column("sum |a| eps", lambda r: cell(_exact_number(r.error), "num"), numeric=True),
    Column("sum |a| eps / room", lambda r: _ratio(r.error, r.room), numeric=True),
    Column("verdict", lambda r: text_cell(VERDICTS[r.verdict])),
)
"""The rows table: one `RowMargin` per row of the property's unsafe set."""

SHARE_COLUMNS = (
    Column("node", lambda s: _mono(s.node)),
    Column("op_type", lambda s: text_cell(s.op_type or "-")),
    Column("share of eps", lambda s: cell(f"{s.fraction:.1%}", "num"), numeric=True),
    Column("summed over outputs", lambda s: number_cells(s.total), numeric=True),
    Column("largest share of one output's eps", lambda s: cell(f"{s.peak:.1%} (Y_{s.at})",
                                                               "num"), numeric=True),
)
"""The contributions table: one `NodeShare` per node, the largest first."""

UNSTABLE_COLUMNS = (
    Column("node", lambda u: _mono(u[0])),
    Column("op_type", lambda u: text_cell(u[1] or "-")),
    Column("possibly unstable", lambda u: cell(str(u[2]), "num"), numeric=True),
    Column("elements", lambda u: cell(str(u[3]), "num"), numeric=True),
    Column("fraction", lambda u: cell(f"{u[2] / u[3]:.1%}" if u[3] else "-", "num"),
           numeric=True),
)
"""The unstable-neuron table: (node, op_type, possibly unstable, elements) per nonlinear
node."""


def margin_headline(margin) -> tuple[str, str]:
    """("ok" | "warn", one line) on the margin itself: the largest eps, the region."""
    eps = margin.eps
    pieces = f"{margin.boxes} box{'es' * (margin.boxes != 1)}, {margin.pieces} " \
        f"piece{'s' * (margin.pieces != 1)}"
    if eps.numel() == 0:
        return "warn", f"no outputs ({pieces})"
    vacuous = int((~torch.isfinite(eps)).sum())
    if vacuous:
        return "warn", (f"eps is infinite or undefined at {vacuous} of {eps.numel()} "
                        f"output(s): the bound says nothing there ({pieces})")
    return "ok", (f"|{margin.dtype} - exact| <= eps at every input of the region: largest "
                  f"eps {number(float(eps.max()))} over {eps.numel()} output(s) ({pieces})")


def _rounding_note(margin) -> str:
    return (f"eps covers the input's own rounding to {margin.dtype}" if margin.input_rounding
            else f"eps takes the region's inputs as {margin.dtype} values: it does not cover "
                 "the input's own rounding (input_rounding=True does)")


def margin_summary(margin, prop=None, network=None) -> str:
    """A few lines of text: the headline, the property's verdict (given `prop`), the
    largest share of eps, the unstable neurons, the input rounding and arithmetic."""
    lines = [margin_headline(margin)[1]]
    if prop is not None:
        lines.append(property_verdict(row_margins(margin, prop), prop)[1])
    shares = node_shares(margin, network)
    if shares:
        first = shares[0]
        lines.append(f"largest share of eps: {first.node!r}"
                     + (f" ({first.op_type})" if first.op_type else "")
                     + f", {first.fraction:.0%}")
    if margin.unstable:
        k = sum(u for u, _ in margin.unstable.values())
        n = sum(e for _, e in margin.unstable.values())
        lines.append(f"possibly unstable: {k} of {n} elements of {len(margin.unstable)} "
                     "nonlinear node(s)")
    lines.append(_rounding_note(margin))
    if margin.arithmetic:
        lines.append(f"arithmetic: {margin.arithmetic}")
    return "\n".join(lines)


def _property_part(margin, prop, limit: int | None) -> str:
    if prop is None:
        return ('<p class="note">No property given: pass the property the margin was '
                "computed for to see eps against its decision margins.</p>\n")
    rows = row_margins(margin, prop)
    level, text = property_verdict(rows, prop)
    return (f'<p class="finding {level}">{escape(text)}.</p>\n'
            '<p class="note">For each row a.y &lt;= b of the unsafe set: the interval of '
            "b - a.y over the exact outputs of the region (from the certified bounds "
            "[lower, upper], computed exactly), and sum |a_j| eps_j, the most float32 can "
            "move a.y. A row whose interval ends below -sum |a| eps fails for every float32 "
            "output of the region; a polytope with such a row holds no output. This is a "
            "sufficient check from loose interval bounds, not a verifier: when it decides "
            "nothing the property may still hold. room: how far below 0 the interval "
            "ends.</p>\n" + _capped(rows, ROW_COLUMNS, limit, "rows"))


def _capped(records, columns, limit: int | None, what: str) -> str:
    records = list(records)
    shown = records if limit is None else records[:limit]
    table = records_html(shown, columns, "compact") + "\n"
    if len(shown) < len(records):
        table += (f'<p class="ncet-count">{len(records) - len(shown)} more {what} (the page '
                  "and <code>margin_section</code> list them all)</p>\n")
    return table


def margin_tables(margin, prop=None, network=None, limit: int | None = None) -> str:
    """The tables (with their headings): outputs, the property's rows, the shares of eps,
    the unstable neurons; each to `limit` records (None: all)."""
    unstable = unstable_rows(margin, network)
    parts = ["<h3>eps per output, against the exact output's range over the region</h3>\n",
             _capped(output_margins(margin), OUTPUT_COLUMNS, limit, "outputs"),
             "<h3>The property's unsafe rows, against eps</h3>\n",
             _property_part(margin, prop, limit),
             "<h3>Where eps comes from</h3>\n<p class=\"note\">Each node's share: the part "
             "of eps its own rounding contributes, summed over the outputs, over the sum of "
             "eps (the shares add up to about 1).</p>\n",
             _capped(node_shares(margin, network), SHARE_COLUMNS, limit, "nodes"),
             "<h3>Unstable neurons</h3>\n"]
    if unstable:
        parts += ['<p class="note">Elements whose input (exact or float32) may change sign '
                  "over the region, the largest over the pieces: each widens the bound.</p>\n",
                  _capped(unstable, UNSTABLE_COLUMNS, limit, "nodes")]
    else:
        parts.append('<p class="note">No nonlinear node.</p>\n')
    return "".join(parts)


def margin_plot(margin, network=None, fit: bool = True) -> str:
    """The figure (`margin_figure`) as inline SVG in a `<figure>` with its caption, or a
    note when matplotlib is not installed."""
    if not plots.matplotlib_available():
        return ('<p class="note">No plot: matplotlib is not installed '
                "(<code>pip install 'ncet[report]'</code>). The tables hold the same "
                "numbers.</p>\n")
    from .margin_figure import margin_figure

    svg = plots.figure_svg(margin_figure(margin, network), "ncet-margin", fit=fit)
    return ("<figure>" + svg + "<figcaption>Left: each node's share of eps, the largest "
            "first. Right: per output, eps (dots) and the exact output's range over the "
            "region (dashes), on a log axis.</figcaption></figure>\n")


def margin_section(margin, prop=None, network=None) -> str:
    """The report's float margin section (`<section id="margin">`): the headline, the
    figure and every table."""
    level, headline = margin_headline(margin)
    return ('<section id="margin">\n<h2>Float margin</h2>\n'
            f'<p class="finding {level}">{escape(headline)}.</p>\n'
            f'<p class="note">{escape(_rounding_note(margin))}. Arithmetic: '
            f"{escape(margin.arithmetic or '-')}.</p>\n"
            + margin_plot(margin, network) + margin_tables(margin, prop, network)
            + "</section>")


def margin_page(margin, prop=None, network=None, *, title: str = "network",
                command: str = "") -> str:
    """The float margin report as one self-contained HTML document (no scripts, nothing
    fetched).

    Args:
        margin: The Margin (`ncet.float_margin`).
        prop: The Property it was computed for (optional: the rows table and verdict).
        network: The GraphIR (optional: op_types in the tables, colours in the figure).
        title: How the network is named.
        command: The command line that made the page, shown for reproducibility.

    Example:
        >>> page = margin_page(ncet.float_margin(ir, prop), prop, ir, title="acasxu 1_1")
    """
    level, headline = margin_headline(margin)
    if prop is not None:
        level, headline = property_verdict(row_margins(margin, prop), prop)
        level = {"open": "warn"}.get(level, level)
    meta = f"torch <code>{escape(torch.__version__)}</code>"
    if command:
        meta += f" &middot; made by <code>{escape(command)}</code>"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>NCET float margin: {escape(title)}</title>\n<style>{REPORT_CSS}{LEVEL_CSS}"
            "</style>\n"
            f"</head>\n<body>\n<main>\n<h1>NCET float margin: <code>{escape(title)}</code>"
            f"</h1>\n<p class=\"meta\">{meta}</p>\n"
            f"<div class=\"verdict {level}\" id=\"verdict\">{escape(headline)}</div>\n"
            + margin_section(margin, prop, network) + "\n</main>\n</body>\n</html>\n")


def margin_repr_html(margin, prop=None, network=None, limit: int | None = SHOWN,
                     figure: bool = False) -> str:
    """The notebook display (`Margin._repr_html_`) and the margin view's static form: the
    headline, the tables to `limit` records, and (with `figure`) the figure."""
    level, headline = margin_headline(margin)
    plot = margin_plot(margin, network, fit=False) if figure else ""
    return (f'<div class="ncet-static ncet-margin">{VIEW_STYLE}<style>{DISPLAY_CSS} '
            f'{LEVEL_CSS}</style>'
            f'<p class="finding {level}"><b>{escape(headline)}</b></p>'
            f'<p class="note">{escape(_rounding_note(margin))}.</p>'
            + plot + margin_tables(margin, prop, network, limit) + "</div>")
