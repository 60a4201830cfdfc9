"""The renderers (ncet.render) shared by the HTML report, the command line and the notebook
views: one figure, one table renderer, optional matplotlib, and views that use only public
names."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

import ncet
import ncet.render as render
from ncet.examples import load_example

WIDGETS = Path(__file__).resolve().parents[1] / "widgets"
PUBLIC = {"ncet": frozenset(ncet.__all__), "ncet.render": frozenset(render.__all__)}
"""The modules the views may import from, and the names each makes public."""


def non_public_uses(source: str) -> list[str]:
    """Every import of, or attribute reached through, a module or name of ncet that is not
    public (`ncet.__all__`, `ncet.render.__all__`), as "line: what"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("ncet.") and a.name not in PUBLIC]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and \
                (node.module or "").split(".")[0] == "ncet":
            public = PUBLIC.get(node.module, frozenset())
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if a.name not in public]
        elif isinstance(node, ast.Attribute):
            path = dotted(node)
            for module, names in PUBLIC.items():
                if path and path.startswith(module + ".") and path.count(".") == \
                        module.count(".") + 1:
                    name = path.rsplit(".", 1)[1]
                    if name not in names and f"{module}.{name}" not in PUBLIC:
                        found.append(f"{node.lineno}: {path}")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for an attribute chain on a plain name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def test_the_scanner_finds_private_names():
    source = ("import ncet\nimport ncet.ir\nfrom ncet.errors import quote_source\n"
              "from ncet import errors, diagnose\nfrom ncet.render.plots import COLORS\n"
              "from ncet.render import figure_svg\nx = ncet.ir.OP_SCHEMAS\ny = ncet.diagnose\n"
              "z = ncet.render.html\nw = ncet.render.escape\nfrom .frames import escape\n")
    assert non_public_uses(source) == [
        "2: import ncet.ir", "3: from ncet.errors import quote_source",
        "4: from ncet import errors", "5: from ncet.render.plots import COLORS",
        "7: ncet.ir", "9: ncet.render.html"]


@pytest.mark.parametrize("path", sorted(WIDGETS.glob("*.py")), ids=lambda p: p.name)
def test_the_views_use_only_public_names(path):
    assert non_public_uses(path.read_text()) == []


def test_the_views_lazy_names_are_public():
    pytest.importorskip("pandas")
    from ncet import widgets

    for name, module in widgets._LAZY.items():
        assert module.startswith(".") or name in PUBLIC[module], (name, module)


def test_importing_ncet_and_its_renderers_imports_no_matplotlib():
    code = ("import sys, ncet, ncet.render; "
            "print([m for m in ('matplotlib', 'ipywidgets', 'pandas') if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- one figure ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lenet():
    model, shapes = load_example("lenet")
    conversion = ncet.diagnose(model, *shapes)
    return conversion, ncet.check_exactness(model, conversion.graph, samples_per_scale=2)


def without_svg_tag(svg: str) -> str:
    return svg[svg.index(">") + 1:].strip()


def test_the_report_and_the_panel_draw_the_same_figure(lenet):
    pytest.importorskip("matplotlib")
    pytest.importorskip("ipywidgets")
    from ncet import widgets

    conversion, exactness = lenet
    page = render.render_report(conversion, exactness)
    (in_page,) = re.findall(r"<figure>(<svg.*?</svg>)", page, re.S)
    panel = widgets.ExactnessPanel(exactness)
    assert panel.plot.value.startswith("<svg")
    assert without_svg_tag(panel.plot.value) == without_svg_tag(in_page)
    assert "end to end: the reference graph" in panel.plot.value  # the three panels


def entries_renamed(report, count: int):
    base = report.entries
    return dataclasses.replace(report, entries=tuple(
        dataclasses.replace(base[i % len(base)], name=f"n{i}") for i in range(count)))


def test_one_tick_limit_names_the_nodes(lenet):
    pytest.importorskip("matplotlib")
    _, exactness = lenet
    limit = render.plots.MAX_NAMED_TICKS
    named = render.exactness_figure(entries_renamed(exactness, limit)).axes[-1]
    assert [t.get_text().split(" ")[0] for t in named.get_xticklabels()] == \
        [f"n{i}" for i in range(limit)]
    counted = render.exactness_figure(entries_renamed(exactness, limit + 1)).axes[-1]
    assert not any(t.get_text().startswith("n") for t in counted.get_xticklabels())


def test_the_report_draws_bounds_near_overflow(lenet):
    pytest.importorskip("matplotlib")
    conversion, exactness = lenet
    huge = tuple(dataclasses.replace(e, e2e_bound=1.5e308 if i % 2 else float("inf"))
                 for i, e in enumerate(exactness.entries))  # deep models' end-to-end bounds
    page = render.render_report(conversion, dataclasses.replace(exactness, entries=huge))
    assert page.count("<figure><svg") == 1  # the exactness figure (the graph is no figure)
    e2e = render.exactness_figure(dataclasses.replace(exactness, entries=huge)).axes[1]
    assert e2e.get_ylim()[1] <= render.plots.CEILING * 10


def test_a_check_not_run_is_said_in_its_panel():
    pytest.importorskip("matplotlib")
    model, shapes = load_example("mlp")
    conversion = ncet.diagnose(model, *shapes)
    exactness = ncet.check_exactness(model, conversion.graph, samples_per_scale=2,
                                     end_to_end=False)
    local, e2e, ratio = render.exactness_figure(exactness).axes
    assert "the end to end check was not run" in [t.get_text() for t in e2e.texts]
    assert [c.get_label() for c in ratio.collections] == ["node-local"]
    assert sum(len(c.get_offsets()) for c in local.collections
               if c.get_label() != "certified bound") == len(exactness.entries)


# --- one table renderer ----------------------------------------------------------------------


class Cells(HTMLParser):
    """The tags and the text of each `<td>`/`<th>` of an HTML fragment."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.cells: list[str] = []
        self._open = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("td", "th"):
            self._open, self.cells = True, [*self.cells, ""]

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._open = False

    def handle_data(self, data):
        if self._open:
            self.cells[-1] += data


HOSTILE = ("<script>alert('x')</script>", 'a "quoted" & <b>bold</b>', "-->", "")


def test_records_tables_escape_every_cell_and_attribute():
    columns = (render.Column("<name>", lambda r: render.code_cell(r)),
               render.Column("text & more", lambda r: render.text_cell(r, "mono")),
               render.Column("status", lambda r: render.cell(render.pill(r))),
               render.Column("n", lambda r: render.number_cells(len(r)), numeric=True))
    table = render.records_html(HOSTILE, columns, "t", node=lambda r: r,
                                row_class=lambda r: "problem" if r else "")
    parsed = Cells(table)
    assert [t for t, _ in parsed.tags if t in ("script", "b")] == []
    assert parsed.cells == ["<name>", "text & more", "status", "n",
                            *[c for r in HOSTILE for c in (r, r, r, str(len(r)))]]
    rows = [a for t, a in parsed.tags if t == "tr"][1:]
    assert [r["data-node"] for r in rows] == list(HOSTILE)
    assert [r.get("class") for r in rows] == ["problem"] * 3 + [None]
    assert [a.get("class") for t, a in parsed.tags if t == "th"] == [None, None, None, "num"]
    pills = [a["class"] for t, a in parsed.tags if t == "span"]
    assert pills == [f"pill {r}" for r in HOSTILE]


def test_numbers_print_as_the_tables_print_them():
    assert render.number(float("inf")) == render.number(-float("inf")) == "inf"
    assert render.number(0.000123456) == f"{0.000123456:.3g}"
    assert render.number(1234567.0, digits=2) == f"{1234567.0:.2g}"
    assert render.escape(None) == "" and render.sentence("") == "-"
    assert render.sentence("use x.relu()") == "Use x.relu()"


def test_the_quoted_source_line_is_the_messages_quote():
    model, shapes = load_example("many_problems")
    conversion = ncet.diagnose(model, *shapes)
    for row in conversion.errors:
        quoted = render.quote_source(row.location, row.source_text)
        assert quoted in row.message and quoted.startswith(row.location)
        assert render.reason_summary(row.code)  # every code the examples hit is documented
    assert render.reason_summary("no-such-code") == ""


def test_node_constants_are_the_constants_a_node_names():
    model, shapes = load_example("residual_cnn")
    graph = ncet.convert(model, *shapes)
    used = [name for node in graph.nodes for name in render.node_constants(node)]
    assert sorted(used) == sorted(graph.constants)  # each once: the model shares none
    for node in graph.nodes:
        assert set(render.node_constants(node)) == {
            v for v in node.attrs.values() if isinstance(v, str) and v in graph.constants}
