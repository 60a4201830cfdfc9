"""Honest exactness views: root causes singled out from their consequences, nothing shown as
certified downstream of a violation, vacuous end-to-end bounds flagged, per-element
error/bound histograms, cards that agree with sentences, and the report's notebook display.

Every assertion compares facts (verdicts, statuses, node names, ratios against 1), never one
machine's float32 digits.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
import torch

import ncet
from ncet import render
from ncet.render.html import render_report, verdict

sys.path.insert(0, str(Path(__file__).parent))
from test_faults import (  # noqa: E402
    dtype_recorded_wrong,
    eps_ignored,
    node_inserted,
    relu_for_leaky,
    slope_changed,
    weight_transposed,
    zoo,
)

SHAPE = (3, 6, 8)


def checked(fault=None):
    model = zoo()
    conversion = ncet.diagnose(model, SHAPE)
    ir = conversion.graph if fault is None else fault(conversion.graph)
    return conversion, ncet.check_exactness(model, ir)


@pytest.fixture(scope="module")
def eps_fault():
    return checked(eps_ignored)  # BatchNorm "bn" with eps 0: every later node moves


@pytest.fixture(scope="module")
def healthy():
    return checked()


@pytest.fixture(scope="module")
def deep_mlp():
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from benchmarks.scale import build

    model, shape = build("mlp", 121)
    return ncet.check_exactness(model, ncet.convert(model, shape))


# -- root causes and consequences ---------------------------------------------------------

def test_a_seeded_fault_has_one_root_cause_and_its_consequences_are_not_certified(eps_fault):
    _, report = eps_fault
    names = [e.name for e in report.entries]
    violated = [e.name for e in report.entries if e.violated]
    assert len(violated) > 1  # the fault shows at its node and at every node after it
    assert [e.name for e in report.root_causes] == ["bn"]
    downstream = names[names.index("bn") + 1:]
    assert list(report.not_certified[:len(downstream)]) == downstream
    assert set(violated) - {"bn"} <= set(report.not_certified)
    assert report.status("bn") == "root cause"
    assert all(report.status(n) == "not certified" for n in downstream)
    assert all(report.caused_by(n) == ("bn",) for n in downstream)
    assert report.status("conv") == "certified"  # upstream of the fault: still certified
    for output in report.outputs:
        assert report.output_status(output) == "not certified"
        assert report.caused_by(output.name, output=True) == ("bn",)
    assert "root cause(s): 'bn'" in report.summary()


@pytest.mark.parametrize(("second", "node"), [(slope_changed, "leaky_relu"),
                                              (weight_transposed, "lin")],
                         ids=["bn then leaky_relu", "bn then lin"])
def test_a_second_fault_after_the_first_is_a_root_cause_too(second, node):
    """The node-local check runs on PyTorch's own inputs: a fault downstream of another is
    still seen at its node, and singled out as a root cause, not hidden as a consequence."""
    _, report = checked(lambda ir: second(eps_ignored(ir)))
    assert [e.name for e in report.root_causes] == ["bn", node]
    assert report.status(node) == "root cause" and report.status("conv") == "certified"


def test_a_structural_fault_is_the_one_root_cause_of_what_reads_it():
    """An IR node the model does not have: its readers fail node-local too, but only
    because they read it; they are its consequences."""
    _, report = checked(node_inserted)
    assert [e.name for e in report.root_causes] == ["doubled"]
    assert report.entry("doubled").structural


def test_outputs_downstream_of_a_violation_never_read_zero_violations():
    """A float32 Linear recorded as bfloat16: its looser bound hides the fault at the output
    (0 violations there), which must read "not certified", never "0 violations"."""
    pytest.importorskip("ipywidgets")
    from ncet.widgets import static

    conversion, report = checked(dtype_recorded_wrong)
    (output,) = report.outputs
    assert output.violations == 0 and report.first_violation.name == output.name
    assert report.output_status(output) == "not certified"
    assert output.name in report.not_certified
    text = render.output_verdict(report, output)
    assert "0 violations" not in text and "NOT CERTIFIED" in text
    assert "0 violations" not in static.outputs_html(report)
    page = render_report(conversion, report)
    start = page.index("<h3>Outputs")
    outputs_table = page[start:page.index("</table>", start)]
    assert "NOT CERTIFIED" in outputs_table and "0 violations" not in outputs_table


def test_the_panel_marks_the_root_cause_and_the_nodes_downstream(eps_fault):
    pytest.importorskip("ipywidgets")
    from ncet import widgets

    _, report = eps_fault
    panel = widgets.ExactnessPanel(report)
    assert panel.shown == "bn"  # the root cause is drawn first
    rows = re.findall(r'<tr data-node="([^"]+)"(?: class="([^"]*)")?>', panel.table.value)
    classes = dict(rows)
    assert classes["bn"] == "problem root-cause"
    assert all("root-cause" not in classes[n] for n in report.not_certified
               if n in classes)
    assert "root cause(s)" in panel.verdict.value
    assert "1 root cause(s)" in panel.count.value


def test_without_recorded_inputs_everything_after_a_violation_is_not_certified(eps_fault):
    """Entries made before they recorded their inputs: the conservative reading."""
    _, report = eps_fault
    bare = dataclasses.replace(report, entries=tuple(
        dataclasses.replace(e, inputs=()) for e in report.entries))
    names = [e.name for e in bare.entries]
    first = names.index(bare.first_violation.name)
    assert [e.name for e in bare.root_causes] == [names[first]]
    assert list(bare.not_certified[:len(names) - first - 1]) == names[first + 1:]


def test_a_healthy_model_has_no_root_cause_and_everything_certified(healthy):
    _, report = healthy
    assert report.ok and report.root_causes == () and report.not_certified == ()
    assert all(report.status(e.name) in ("certified", "vacuous") for e in report.entries)


# -- vacuous end-to-end bounds ------------------------------------------------------------

def test_a_deep_mlp_flags_its_vacuous_end_to_end_bound(deep_mlp):
    pytest.importorskip("ipywidgets")
    from ncet.widgets import static

    report = deep_mlp
    assert report.ok  # no violation: the node-local checks hold
    (output,) = report.outputs
    assert output.max_bound >= output.max_value > 0  # the rule, from the recorded facts
    assert output.vacuous and report.vacuous_outputs == (output,)
    assert report.output_status(output) == "vacuous"
    assert output.name in report.vacuous
    assert all(report.entry(n).e2e_relative_bound >= 1 for n in report.vacuous)
    assert "vacuous end-to-end bound at output(s)" in report.summary()
    assert static.verdict_level(report) == "warn"
    assert "ncet-level-warn" in static.verdict_html(report)
    assert "vacuous" in render.output_verdict(report, output)
    conversion = ncet.diagnose(*_mlp())
    level, headline = verdict(conversion, report)
    assert level == "warn" and "vacuous" in headline


def _mlp():
    from benchmarks.scale import build

    return build("mlp", 121)


def test_the_sensitivity_figure_marks_the_vacuous_nodes(deep_mlp):
    pytest.importorskip("matplotlib")
    report = deep_mlp
    (axis,) = render.sensitivity_figure(report).axes
    assert axis.get_yscale() == "log"
    marked = [c for c in axis.collections if c.get_label() == "vacuous end-to-end bound"]
    assert len(marked) == 1 and len(marked[0].get_offsets()) == len(report.vacuous)
    assert any(line.get_ydata()[0] == 1.0 for line in axis.get_lines())  # the line at 1


def test_a_healthy_models_outputs_are_not_vacuous(healthy):
    _, report = healthy
    assert all(not o.vacuous and o.max_bound < o.max_value for o in report.outputs)


# -- histograms of error / bound ----------------------------------------------------------

def test_the_output_histogram_is_of_error_over_bound_per_element(healthy):
    pytest.importorskip("matplotlib")
    _, report = healthy
    ratios = report.output_ratio_sample()
    assert ratios.numel() > 0 and bool((ratios <= 1).all())  # within the bounds
    (axis,) = render.output_error_figure(report).axes
    assert "/ its bound" in axis.get_xlabel()
    (bars,) = axis.containers
    counted = sum(p.get_height() for p in bars)
    exact = int((ratios == 0).sum())
    assert counted + exact == ratios.numel()
    assert any(list(line.get_xdata()) == [1.0, 1.0] for line in axis.get_lines())
    assert f"{ratios.numel()} sampled elements, {exact} exact" in axis.get_title(loc="left")
    # the bars sit left of the line: every ratio <= 1
    assert max(p.get_x() for p in bars if p.get_height() > 0) < 1.0


def test_a_fault_puts_ratios_above_one_and_says_not_certified():
    pytest.importorskip("matplotlib")
    _, report = checked(relu_for_leaky)  # most output elements off
    assert bool((report.output_ratio_sample() > 1).any())
    (axis,) = render.output_error_figure(report).axes
    assert "above 1" in axis.get_title(loc="left")
    assert any("not certified" in t.get_text() for t in axis.texts)


# -- cards and sentences ------------------------------------------------------------------

@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1.000"), (0.99996, "0.9999"), (1.00002, "1.001"), (0.0, "0"),
    (float("inf"), "inf"), (0.5, "0.5000"), (1.0000000000005, "1.001")])
def test_ratios_read_on_their_side_of_one(value, text):
    assert render.ratio_text(value) == text


def test_the_cards_and_the_sentence_give_the_same_worst_ratio(healthy):
    conversion, report = healthy
    page = render_report(conversion, report)
    card = re.search(r"<b>([^<]*)</b><span>worst ratio</span>", page).group(1)
    sentence = re.search(r"worst observed/bound (\S+) at", report.summary()).group(1)
    assert card == sentence == render.ratio_text(report.worst_ratio)
    assert "&lt; 1" not in page


def test_an_attained_bound_reads_as_attained(healthy):
    conversion, report = healthy
    worst = report.worst_entries(1)[0]
    attained = dataclasses.replace(worst, local_ratio=1.0)
    report = dataclasses.replace(report, entries=tuple(
        attained if e.name == worst.name else e for e in report.entries))
    assert report.ok
    assert "worst observed/bound 1.000" in report.summary()
    assert "<b>1.000</b><span>worst ratio</span>" in render_report(conversion, report)


# -- the report's notebook display ----------------------------------------------------------

def test_repr_html_shows_the_verdict_and_the_worst_nodes(eps_fault):
    _, report = eps_fault
    page = report._repr_html_()
    assert report.summary().splitlines()[0].replace("'", "&#x27;") in page
    assert "<table>" in page and page.count("<tr") <= 11  # header + the 10 worst
    first_row = page[page.index("<tbody>"):].split("</tr>")[0]
    assert "<code>bn</code>" in first_row and "root cause" in first_row
    assert "var(--jp-error-color1" in page  # the theme's colour for a violation


def test_to_pandas_styled_returns_a_styler_and_plain_stays_a_frame(eps_fault):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("jinja2")
    _, report = eps_fault
    frame = report.to_pandas()
    assert isinstance(frame, pd.DataFrame) and "status" not in frame.columns
    assert list(frame["name"]) == [e.name for e in report.entries]
    styler = report.to_pandas(styled=True)
    assert type(styler).__name__ == "Styler"
    statuses = list(styler.data["status"])
    assert statuses[[e.name for e in report.entries].index("bn")] == "root cause"
    html = styler.to_html()
    assert "text-align: right" in html and "background-color: rgba(220, 38, 38" in html


# -- the panel's selection and the figures' theme -------------------------------------------

def test_the_panel_selection_is_a_traitlet(healthy):
    pytest.importorskip("ipywidgets")
    from ncet import widgets

    _, report = healthy
    panel = widgets.ExactnessPanel(report)
    seen = []
    panel.observe(lambda change: seen.append(change["new"]), names="selected")
    assert panel.selected is None
    panel.select("conv")
    assert panel.selected == "conv" and panel.shown == "conv"
    panel.node.value = "lin"  # as the user picking in the Combobox
    assert panel.selected == "lin" and seen == ["conv", "lin"]
    panel.node.value = "no_such_node"  # refused: the selection stays
    assert panel.selected == "lin"


def test_figures_follow_the_theme_and_stay_deterministic(healthy):
    pytest.importorskip("matplotlib")
    _, report = healthy
    svgs = [render.figure_svg(render.output_error_figure(report), "t") for _ in range(2)]
    assert svgs[0] == svgs[1]
    assert "currentColor" in svgs[0] and render.plots.INK not in svgs[0]
    assert "fill: #ffffff" not in svgs[0]  # no white box behind the figure
    assert torch.__version__  # (the figure holds no version, date or id beyond the salt)
    assert not re.search(r"\d{4}-\d{2}-\d{2}T", svgs[0])


def test_the_panels_downloads_are_made_on_a_click(healthy):
    """Two renderings of each figure and the table's CSV are large on large models: the
    panel holds one button until it is pressed."""
    from ncet.widgets import ExactnessPanel

    _, report = healthy
    panel = ExactnessPanel(report)
    (button,) = panel.downloads.children
    button.click()
    html = "".join(getattr(c, "value", "") or "".join(getattr(g, "value", "")
                                                     for g in getattr(c, "children", ()))
                   for c in panel.downloads.children)
    assert 'download="exactness-nodes.csv"' in html and 'download="exactness-errors.svg"' in html
