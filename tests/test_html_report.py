"""The HTML report: self-contained, complete, and rendered by headless Chromium.

The browser tests need Debian's chromium (.ci/run installs it). Locally they skip without it;
in CI (CI=true) a missing browser fails them. The screenshots land in artifacts/ (gitignored)
for a person to look at.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ncet
from ncet.cli.phrasing import cli_phrased
from ncet.examples import load_example
from ncet.ir import GraphIR
from ncet.render import plots as exactness_plots
from ncet.render.html import render_report, verdict
from tests.browsers import chromium

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run")
NCET = str(Path(sys.executable).parent / "ncet")


def browse(page: Path, profile: Path, *options: str) -> subprocess.CompletedProcess:
    """Run headless Chromium on a local file with a throwaway profile.

    (The page has no scripts, checked above; JavaScript stays on because --dump-dom needs it.)
    """
    return subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *options,
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Reports written by the installed command: a converting model and a rejected one."""
    folder = tmp_path_factory.mktemp("reports")
    made = {}
    for name, status in (("residual_cnn", 0), ("many_problems", 1)):
        path = folder / f"{name}.html"
        result = subprocess.run([NCET, "report", name, "--samples", "4", "-q", "-o", str(path),
                                 "--json"], capture_output=True, text=True, timeout=600)
        assert result.returncode == status, result.stderr
        assert json.loads(result.stdout)["output"]["path"] == str(path)
        made[name] = path
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(made["residual_cnn"], ARTIFACTS / "report.html")
    return made


def section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start:page.index("</section>", start)]


def rows(html_text: str) -> list[str]:
    """The body rows of the first table in `html_text`, as text with tags removed."""
    body = html_text[html_text.index("<tbody>"):html_text.index("</tbody>")]
    return [re.sub(r"<[^>]+>", " ", r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]


# --- the page itself -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["residual_cnn", "many_problems"])
def test_the_report_is_self_contained(reports, name):
    page = reports[name].read_text()
    assert page.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "<link", "<iframe", "@import", 'src="http'):
        assert forbidden not in page.lower(), forbidden
    assert not re.search(r"url\((?!#)", page), "only references inside the page"
    assert all(target.startswith("#") for target in re.findall(r' href="([^"]*)"', page))


def test_a_converting_model_gets_every_section(reports):
    page = reports["residual_cnn"].read_text()
    model, shapes = load_example("residual_cnn")
    report = ncet.diagnose(model, *shapes)
    mapping = rows(section(page, "mapping"))
    assert len(mapping) == len(report.rows)
    assert all(r.fx_name in line for r, line in zip(report.rows, mapping))
    assert "converts; exact within the certified bounds on 12 samples" in page
    exactness = section(page, "exactness")
    assert exactness.count("<svg") == 1 and "block1_conv1 (Conv2d)" in exactness
    per_node = rows(exactness[exactness.index("<h3>Per node"):])
    assert len(per_node) == len(report.graph.nodes) - 2
    by_name = {r.fx_name: r for r in report.rows}
    for node, line in zip(report.graph.nodes[1:-1], per_node):  # the line's code, quoted
        row = by_name[node.name]
        assert row.source_text and html.escape(f"{row.location} `{row.source_text}`") in line
    assert "IEEE 754 binary arithmetic" in section(page, "arithmetic")
    assert "Every FX node is inside the support boundary" in section(page, "boundary")


def test_a_rejected_model_gets_its_reasons_grouped_by_code(reports):
    page = reports["many_problems"].read_text()
    model, shapes = load_example("many_problems")
    report = ncet.diagnose(model, *shapes)
    boundary = section(page, "boundary")
    for row in report.errors:
        group = boundary[boundary.index(f'id="reason-{row.code}"'):]
        group = group[:group.index("</div>")]
        assert row.fx_name in group and row.source_text  # the example's file is readable
        assert html.escape(f"{row.location} `{row.source_text}`") in group  # the line's code
        # shown as a sentence, capitalised, naming the command's flags (`ncet report` wrote it)
        assert html.escape(cli_phrased(row.hint)[1:]) in group
    assert "rejected: 7 problem(s) in 11 FX nodes" in page
    assert "Not checked: the model does not convert" in section(page, "exactness")
    assert "<svg" not in page and 'id="arithmetic"' not in page


def seeded_fault() -> tuple[ncet.ConversionReport, ncet.ExactnessReport]:
    """The MLP with one Linear's bias dropped from its IR node: a translation bug."""
    model, shapes = load_example("mlp")
    report = ncet.diagnose(model, *shapes)
    nodes = tuple(dataclasses.replace(n, attrs={**n.attrs, "bias": None})
                  if n.name == "layers_2" else n for n in report.graph.nodes)
    faulty = GraphIR(nodes, report.graph.constants)
    return report, ncet.check_exactness(model, faulty, samples_per_scale=2)


def test_a_violation_is_marked_in_the_headline_tables_and_plot():
    report, exactness = seeded_fault()
    assert verdict(report, exactness) == ("bad", "converts, but VIOLATION at node 'layers_2' "
                                                 "(Linear)")
    page = render_report(report, exactness, title="mlp")
    assert '<div class="verdict bad" id="verdict">' in page
    assert re.search(r'<tr class="violated"><td class="mono">layers_2</td>', page)
    assert "violation (error above its bound)" in page  # the plot's legend


def test_without_matplotlib_the_report_keeps_its_tables(monkeypatch):
    monkeypatch.setattr(exactness_plots, "matplotlib_available", lambda: False)
    report, exactness = seeded_fault()
    page = render_report(report, exactness, title="mlp")
    assert "<svg" not in section(page, "exactness")
    assert "No plots: matplotlib is not installed" in page and "<h3>Per node</h3>" in page
    assert section(page, "graph").count("<svg") == 1  # the graph needs no matplotlib


def test_the_graph_is_drawn_without_matplotlib_or_jupyter():
    code = ("import sys\nfor m in ('matplotlib', 'ipywidgets', 'IPython', 'anywidget'):\n"
            "    sys.modules[m] = None\n"
            "import ncet\nfrom ncet.examples import load_example\n"
            "from ncet.render import render_report\n"
            "m, s = load_example('residual_cnn')\n"
            "page = render_report(ncet.diagnose(m, *s), title='r')\n"
            "print(page.count('<svg'), page.count('class=\"cluster\"'))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1", "5"]  # the graph; no figure (no check was run)


def test_text_is_escaped():
    model, shapes = load_example("mlp")
    page = render_report(ncet.diagnose(model, *shapes), title="<b>x</b>", command="a & b")
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "a &amp; b" in page and "<b>x</b>" not in page



def container_calls(model, *shapes) -> list[str]:
    """The paths of the model's modules that have submodules, in the order PyTorch calls them
    (forward pre-hooks on one eager run): the oracle of the graph's clusters."""
    import torch

    order: list[str] = []
    hooks = [m.register_forward_pre_hook(lambda _m, _a, p=path: order.append(p))
             for path, m in model.named_modules() if path and any(True for _ in m.children())]
    try:
        with torch.no_grad():
            model.eval()(*(torch.zeros(1, *s) for s in shapes))
    finally:
        for hook in hooks:
            hook.remove()
    return order


def test_the_report_draws_every_cluster_in_call_order_and_each_node_once(reports):
    graph = section(reports["residual_cnn"].read_text(), "graph")
    model, shapes = load_example("residual_cnn")
    ir = ncet.convert(model, *shapes)
    assert graph.count("<svg") == 1 and 'id="ncet-graph"' in graph
    clusters = re.findall(r'<g id="g:([^"]*)" class="cluster">', graph)
    assert clusters == container_calls(model, *shapes) == [
        "stem", "block1", "block2", "block2.skip", "head"]
    boxes = re.findall(r'<g id="n:([^"]*)" class="node">', graph)
    assert sorted(boxes) == sorted(n.name for n in ir.nodes) and len(set(boxes)) == len(boxes)
    assert "module calls shown closed" not in graph  # 32 nodes: drawn whole


def test_a_rejected_model_has_no_graph(reports):
    graph = section(reports["many_problems"].read_text(), "graph")
    assert "No graph: the model does not convert" in graph and "<svg" not in graph


def test_the_report_graph_is_the_workbench_static_drawing(reports):
    pytest.importorskip("ipywidgets")
    pytest.importorskip("anywidget")
    from ncet import widgets

    model, shapes = load_example("residual_cnn")
    ir = ncet.convert(model, *shapes)
    drawing = widgets.graph_view_html(ir)
    assert drawing in section(reports["residual_cnn"].read_text(), "graph")
    assert drawing in widgets.Workbench(model, *shapes).to_html()
    assert drawing == widgets.GraphView(ir).to_html()  # the Graph tab as it first opens

# --- in the browser --------------------------------------------------------------------------


@pytest.mark.parametrize("name, headline", [
    ("residual_cnn", "converts; exact within the certified bounds"),
    ("many_problems", "rejected: 7 problem(s)"),
])
def test_chromium_renders_the_rows_and_the_verdict(reports, tmp_path, name, headline):
    result = browse(reports[name], tmp_path / "profile", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert re.search(r'<div class="verdict (ok|bad)" id="verdict">' + re.escape(headline), dom)
    model, shapes = load_example(name)
    expected = ncet.diagnose(model, *shapes).rows
    assert len(rows(section(dom, "mapping"))) == len(expected)
    assert all(f'<td class="mono">{r.fx_name}</td>' in dom for r in expected)


@pytest.mark.parametrize("name, png", [("residual_cnn", "report.png"),
                                       ("many_problems", "report-rejected.png")])
def test_chromium_screenshot(reports, tmp_path, name, png):
    from PIL import Image

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / png
    shot.unlink(missing_ok=True)
    result = browse(reports[name], tmp_path / "profile", f"--screenshot={shot}",
                    "--window-size=1280,2000", "--hide-scrollbars")
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.stat().st_size > 50_000
    with Image.open(shot) as image:
        assert image.size == (1280, 2000)
        pixels = image.convert("RGB").resize((320, 500))
        colors = pixels.getcolors(maxcolors=1 << 16) or []
        ink = sum(n for n, c in colors if sum(c) < 600) / (320 * 500)
    assert len(colors) > 100 and ink > 0.03, "the screenshot looks blank"


def test_chromium_screenshot_of_the_graph(reports, tmp_path):
    """The report's graph section alone (the report's stylesheet, no script), as Chromium
    draws it: the whole drawing, not a scrolling box, so every op_type's box fill is on
    screen."""
    from PIL import Image

    page = reports["residual_cnn"].read_text()
    head = page[:page.index("<body>")]
    alone = tmp_path / "graph.html"
    alone.write_text(f"{head}<body><main>{section(page, 'graph')}</section></main></body></html>")
    shot = ARTIFACTS / "report-graph.png"
    shot.unlink(missing_ok=True)
    result = browse(alone, tmp_path / "profile", f"--screenshot={shot}",
                    "--window-size=1280,2500", "--hide-scrollbars")
    assert result.returncode == 0, result.stderr[-2000:]
    fills = set(re.findall(r'<rect [^>]*rx="4" fill="(#[0-9a-f]{6})"', section(page, "graph")))
    with Image.open(shot) as image:
        counts = {"#" + bytes(c).hex(): n for n, c in
                  image.convert("RGB").getcolors(maxcolors=1 << 20) or []}
    assert len(fills) >= 8 and all(counts.get(f, 0) > 200 for f in fills), \
        {f: counts.get(f, 0) for f in fills}
