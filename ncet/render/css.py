"""The styling of the rendered HTML: one table style (status pills, tinted problem rows,
right-aligned numbers, names and numbers that never wrap, long code that wraps, headers that
wrap at spaces when the table is narrow, compact rows, a scrolling container with a
sticky header), shared by the report page and the notebook views, in theme-aware colours.

The rules are written once, in `TABLE_RULES`, and scoped twice: unscoped in the report's
`REPORT_CSS`, under `.ncet-static` / `.ncet-view` in the views' `VIEW_CSS`. Colours are CSS
variables (`--ncet-*`) that follow JupyterLab's theme variables (`--jp-layout-color1`,
`--jp-ui-font-color1`, ...) and fall back to the report's light palette where those are
not defined (the standalone report, nbviewer); inside JupyterLab the tints are mixed from
the theme's own colours, so a dark theme gets dark tints.
"""

from __future__ import annotations

PALETTE = """--ncet-ink: var(--jp-ui-font-color1, #1f2937);
  --ncet-muted: var(--jp-ui-font-color2, #64748b);
  --ncet-bg: var(--jp-layout-color1, #fff); --ncet-soft: var(--jp-layout-color2, #f8fafc);
  --ncet-line: var(--jp-border-color2, #e2e8f0);
  --ncet-ok: color-mix(in srgb, var(--jp-success-color1, #15803d) 65%, var(--ncet-ink));
  --ncet-ok-bg: #dcfce7;
  --ncet-bad: color-mix(in srgb, var(--jp-error-color1, #b91c1c) 65%, var(--ncet-ink));
  --ncet-bad-bg: #fee2e2;
  --ncet-bad-tint: #fff5f5; --ncet-selected: #dbeafe;
  --ncet-warn: color-mix(in srgb, var(--jp-warn-color1, #b45309) 65%, var(--ncet-ink));
  --ncet-warn-bg: #fef3c7;
  --ncet-warn-tint: #fffbeb;
  --ncet-info: color-mix(in srgb, var(--jp-brand-color1, #1d4ed8) 65%, var(--ncet-ink));
  --ncet-info-bg: #dbeafe;
  --ncet-mono: var(--jp-code-font-family, "DejaVu Sans Mono", ui-monospace, Menlo, Consolas,
    monospace);"""
"""The colour variables with their fallbacks: the report's light palette."""

THEMED = """--ncet-ok-bg: color-mix(in srgb, var(--ncet-ok) 18%, var(--ncet-bg));
  --ncet-bad-bg: color-mix(in srgb, var(--ncet-bad) 18%, var(--ncet-bg));
  --ncet-bad-tint: color-mix(in srgb, var(--ncet-bad) 9%, transparent);
  --ncet-warn-bg: color-mix(in srgb, var(--ncet-warn) 18%, var(--ncet-bg));
  --ncet-warn-tint: color-mix(in srgb, var(--ncet-warn) 9%, transparent);
  --ncet-info-bg: color-mix(in srgb, var(--ncet-info) 18%, var(--ncet-bg));
  --ncet-selected: color-mix(in srgb, var(--ncet-info) 22%, transparent);"""
"""The tints inside JupyterLab (`body[data-jp-theme-name]`): mixed from the theme's colours."""

TABLE_RULES: tuple[tuple[str, str], ...] = (
    ("table", "border-collapse: collapse; font-size: 12.5px; line-height: 16px; "
              "color: var(--ncet-ink)"),
    ("th, td", "text-align: left; padding: 2px 8px; border-bottom: 1px solid var(--ncet-line); "
               "vertical-align: top"),
    ("th", "background: var(--ncet-soft); position: sticky; top: 0; z-index: 1; "
           "font-weight: 600"),
    ("td.num, th.num", "text-align: right; font-variant-numeric: tabular-nums"),
    ("td.num, td.mono, td.nowrap, td.shape", "white-space: nowrap"),
    ("td.mono.wrap", "white-space: normal; overflow-wrap: anywhere; min-width: 8ch"),
    ("td.mono, td code", "font-family: var(--ncet-mono)"),
    ("tr.problem td, tr.violated td", "background: var(--ncet-bad-tint)"),
    ("tr.root-cause td:first-child", "box-shadow: inset 3px 0 0 var(--ncet-bad)"),
    ("tr.not-certified td, tr.vacuous td", "background: var(--ncet-warn-tint)"),
    ("tr.ncet-selected td", "background: var(--ncet-selected)"),
    ("th.ncet-sort", "cursor: pointer; user-select: none"),
    ("th.ncet-sort:hover", "color: var(--ncet-info)"),
    ("th[aria-sort=ascending]::after", 'content: "\\00A0\\25B2"; font-size: 9px'),
    ("th[aria-sort=descending]::after", 'content: "\\00A0\\25BC"; font-size: 9px'),
    (".ncet-clickable tbody tr[data-node]", "cursor: pointer"),
    (".ncet-clickable tbody tr[data-node]:hover td", "background: var(--ncet-soft)"),
    (".pill", "display: inline-block; border-radius: 999px; padding: 0 8px; font-size: 11.5px; "
              "line-height: 16px; font-weight: 600; white-space: nowrap"),
    (".pill.mapped", "background: var(--ncet-ok-bg); color: var(--ncet-ok)"),
    (".pill.lifted", "background: var(--ncet-info-bg); color: var(--ncet-info)"),
    (".pill.unsupported", "background: var(--ncet-bad-bg); color: var(--ncet-bad)"),
    (".pill.boundary", "background: var(--ncet-warn-bg); color: var(--ncet-warn)"),
    (".pill.skipped", "background: var(--ncet-line); color: var(--ncet-muted)"),
    (".ncet-scroll", "max-height: 480px; overflow: auto"),
    (".ncet-empty", "color: var(--ncet-muted); font-style: italic; margin: 6px 0"),
    (".ncet-count", "color: var(--ncet-muted); white-space: nowrap"),
    (".hint", "color: var(--ncet-ok)"),
)
"""The one table style, as (selector, declarations): the report's and the views' tables."""


def table_css(scope: str = "") -> str:
    """`TABLE_RULES` as CSS text, every selector prefixed by `scope` (none when empty).

    Example:
        >>> table_css(".ncet-view")  # '.ncet-view table { ... } ...'
    """
    rules = []
    for selectors, declarations in TABLE_RULES:
        scoped = ", ".join(f"{scope} {s.strip()}" if scope else s.strip()
                           for s in selectors.split(","))
        rules.append(f"{scoped} {{ {declarations}; }}")
    return "\n".join(rules) + "\n"


REPORT_CSS = """
:root { --ink: #1f2937; --muted: #64748b; --line: #e2e8f0; --soft: #f8fafc;
  --ok: #15803d; --ok-bg: #dcfce7; --bad: #b91c1c; --bad-bg: #fee2e2;
  --warn: #b45309; --warn-bg: #fef3c7; --info: #1d4ed8; --info-bg: #dbeafe;
  """ + PALETTE + """ }
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
table { width: 100%; margin: 6px 0 12px; }
""" + table_css() + """
.reason { border: 1px solid var(--line); border-left: 4px solid var(--bad);
  border-radius: 6px; padding: 4px 14px 6px; margin: 12px 0; }
.reason.boundary { border-left-color: var(--warn); }
.reason h3 { margin: 8px 0 2px; }
.reason p { margin: 0 0 6px; color: var(--muted); }
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
.wide.bleed { width: min(100vw - 48px, 1640px); margin-left: calc(50% - min(50vw - 24px, 820px)); }
.bleed th, .bleed td { padding: 2px 6px; }
#graph .ncet-graph { max-height: none !important; }
"""
"""The report page's stylesheet: colours, tiles, the shared table style (`TABLE_RULES`),
reason boxes. A `.wide` box scrolls a table sideways; `.wide.bleed` (the 16-column per-node
exactness table) also reaches beyond the text column to the window's width (up to 1640 px),
with narrower cell padding, so that at 1400 px every column is on screen. The graph section's
drawing (the views' static form, a 640 px scrolling box there) is shown at full height, so
that the page scrolls and prints it whole."""

VIEW_SCOPE = ":is(.ncet-static, .ncet-view)"
"""The elements the views' rules apply in: static forms and live views."""

VIEW_CSS = (f"{VIEW_SCOPE} {{ {PALETTE} }}\n"
            f"body[data-jp-theme-name] {VIEW_SCOPE} {{ {THEMED} }}\n"
            + table_css(VIEW_SCOPE)
            + f"{VIEW_SCOPE} table {{ font-size: 12px; margin: 4px 0; }}\n"
            f"{VIEW_SCOPE} :is(th, td) {{ padding: 2px 6px; }}\n"
            f"{VIEW_SCOPE} :is(td.mono, code) {{ font-size: 11.5px; }}\n"
            + f"{VIEW_SCOPE} .jupyter-widget-html-content {{ line-height: 18px; }}\n")
"""The views' stylesheet: the palette and `TABLE_RULES` under `.ncet-static` / `.ncet-view`
(widgets' HTML content gets compact lines: ipywidgets sets 28 px)."""

VIEW_STYLE = f"<style>{VIEW_CSS}</style>"
"""A `<style>` element holding `VIEW_CSS`, embedded in each static form of the views."""
