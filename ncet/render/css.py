"""The styling of the rendered HTML: the report page's stylesheet and the compact one the
notebook views embed in each static form."""

REPORT_CSS = """
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
"""The report page's stylesheet: colours, tiles, tables, status pills and reason boxes."""

VIEW_STYLE = (
    "<style>"
    ".ncet-static table{border-collapse:collapse;font-size:12px}"
    ".ncet-static th,.ncet-static td{border-bottom:1px solid #e2e8f0;padding:2px 6px;"
    "text-align:left;vertical-align:top}"
    ".ncet-static tr.problem td{background:#fef2f2}"
    ".ncet-static code{font-size:11px}"
    ".ncet-static .hint{color:#166534}"
    "</style>")
"""A `<style>` element for the notebook views' static forms (rules scoped to `.ncet-static`):
compact tables, problem rows, hints."""
