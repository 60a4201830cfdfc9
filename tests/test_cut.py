"""Cutting a model short (`stop_at=`, `cut_trailing=True`; ncet/frontend/cut.py): the GraphIR
stops at a named node or before the monotone activations that end the model, the report says
what was cut, and check_exactness holds the cut GraphIR to the model's own values there."""

from __future__ import annotations

import dataclasses
import io
from contextlib import redirect_stdout

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from ncet.cli import main
from ncet.cli.records import exactness_record
from ncet.format.digest import hash_graphir
from ncet.frontend import trace_cache
from ncet.ir import GraphIR
from ncet.render.exactness_section import exactness_section
from ncet.render.tables import escape
from tests.conftest import Fn, model_unchanged

U = ncet.UnsupportedOperatorError


def classifier(last: nn.Module | None = None) -> nn.Sequential:
    torch.manual_seed(0)
    layers = [nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)]
    return nn.Sequential(*layers, *([last] if last is not None else [])).eval()


def op_types(ir) -> list[str]:
    return [n.op_type for n in ir.nodes]


def test_a_trailing_softmax_is_cut_and_the_logits_are_checked():
    model = classifier(nn.Softmax(dim=1))
    with pytest.raises(U):
        ncet.convert(model, (4,))  # without the cut: Softmax is no canonical operator
    with model_unchanged(model):
        ir = ncet.convert(model, (4,), cut_trailing=True)
    assert op_types(ir) == ["Input", "Linear", "ReLU", "Linear", "Output"]
    assert ir.outputs == ("_2",)
    report = ncet.check_exactness(model, ir, samples_per_scale=8)
    assert report.ok, report
    (output,) = report.outputs
    # compared with the logits (the generated inputs reach 1e4), not with the softmax
    # (whose values are at most 1)
    assert output.max_value > 2 and output.violations == 0
    assert "output at a cut" in report.entry("_2").note


def test_the_report_says_what_was_cut():
    model = classifier(nn.Softmax(dim=1))
    report = ncet.diagnose(model, (4,), cut_trailing=True)
    assert report.ok
    (row,) = report.cut
    assert (row.fx_name, row.spelling, row.status, row.op_type) == \
        ("_3", "nn.Softmax", "cut", None)
    assert "trailing nn.Softmax, cut_trailing=True" in row.message
    assert row.location == "model[3]"  # a Sequential's child, as Python reaches it
    assert "1 cut" in report.summary() and "_3 (nn.Softmax, model[3])" in report.summary()
    assert "_3 (nn.Softmax" in repr(report)
    html = report._repr_html_()
    assert "ncet-cut" in html and "_3" in html and "trailing nn.Softmax" in html
    frame = report.to_pandas()
    assert frame.set_index("fx_name").loc["_3", "status"] == "cut"
    assert report.to_pandas(styled=True).to_html()  # the Styler knows the status


class Net(nn.Module):
    def __init__(self, last):
        super().__init__()
        torch.manual_seed(1)
        self.fc1, self.fc2, self.last = nn.Linear(4, 6), nn.Linear(6, 3), last

    def forward(self, x):
        return self.last(self.fc2(F.relu(self.fc1(x))))


TRAILING = {  # every spelling cut_trailing knows
    "nn.Sigmoid": nn.Sigmoid(), "torch.sigmoid": torch.sigmoid,
    "Tensor.sigmoid": lambda x: x.sigmoid(), "nn.Tanh": nn.Tanh(), "torch.tanh": torch.tanh,
    "F.tanh": F.tanh, "Tensor.tanh": lambda x: x.tanh(), "nn.Softmax": nn.Softmax(dim=-1),
    "F.softmax": lambda x: F.softmax(x, dim=1), "torch.softmax": lambda x: torch.softmax(x, 1),
    "Tensor.softmax": lambda x: x.softmax(-1), "nn.LogSoftmax": nn.LogSoftmax(dim=1),
    "F.log_softmax": lambda x: F.log_softmax(x, dim=-1),
    "torch.log_softmax": lambda x: torch.log_softmax(x, 1),
    "Tensor.log_softmax": lambda x: x.log_softmax(dim=1),
    "tanh then softmax": lambda x: F.softmax(torch.tanh(x), dim=1),
}


@pytest.mark.parametrize("spelling", list(TRAILING))
def test_every_trailing_spelling_is_cut(spelling):
    last = TRAILING[spelling]
    model = Net(last if isinstance(last, nn.Module) else Fn(lambda m, x: last(x))).eval()
    report = ncet.diagnose(model, (4,), cut_trailing=True)
    assert report.ok, report
    assert op_types(report.graph)[-2:] == ["Linear", "Output"]
    assert report.graph.outputs == ("fc2",)
    assert report.cut and all(r.message.startswith("cut: trailing") for r in report.cut)
    assert ncet.check_exactness(model, report.graph, samples_per_scale=4).ok


def test_a_softmax_before_a_linear_is_not_cut_and_still_reported():
    model = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=1), nn.Linear(3, 2)).eval()
    report = ncet.diagnose(model, (4,), cut_trailing=True)
    assert not report.ok and not report.cut
    (error,) = report.errors
    assert (error.fx_name, error.code) == ("_1", "unsupported-module")
    with pytest.raises(U) as info:
        ncet.convert(model, (4,), cut_trailing=True)
    assert info.value.code == "unsupported-module" and info.value.node == "_1"


def test_an_activation_with_another_use_is_not_cut():
    """forward() returns the softmax and uses it again: it does not end every path."""
    model = Fn(lambda m, x: (lambda s: (s, s * 2))(F.softmax(x, dim=1)))
    report = ncet.diagnose(model, (4,), cut_trailing=True)
    assert not report.cut
    assert [e.code for e in report.errors] == ["unsupported-function"]


def test_a_tuple_output_keeps_its_structure():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            y = self.fc(x)
            return torch.sigmoid(y), y * 2

    model = Two().eval()
    ir = ncet.convert(model, (4,), cut_trailing=True)
    assert ir.outputs == ("fc", "mul") and ir.nodes[-1].attrs["tuple"] is True
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok


def test_dead_code_stays_mapped_when_trailing_activations_are_cut():
    class Dead(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            unused = x * 2  # noqa: F841 - FX keeps it; convert maps it, with or without a cut
            return torch.sigmoid(self.fc(x))

    model = Dead().eval()
    report = ncet.diagnose(model, (4,), cut_trailing=True)
    statuses = {r.fx_name: r.status for r in report.rows}
    assert statuses["mul"] == "mapped" and statuses["sigmoid"] == "cut"
    assert ncet.check_exactness(model, report.graph, samples_per_scale=4).ok


def test_a_model_that_is_only_an_activation_cuts_down_to_its_input():
    model = nn.Sequential(nn.Sigmoid()).eval()
    ir = ncet.convert(model, (4,), cut_trailing=True)
    assert op_types(ir) == ["Input", "Output"] and ir.outputs == ("input_1",)
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok


def test_a_softmax_over_the_batch_axis_is_not_cut():
    model = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=0)).eval()
    report = ncet.diagnose(model, (4,), cut_trailing=True)
    (error,) = report.errors
    assert (error.fx_name, error.code) == ("_1", "batch-axis")
    assert isinstance(error.error, ncet.SupportBoundaryError)


@pytest.mark.parametrize("name", ["1", "_1"])
def test_stop_at_a_node_in_the_middle(name):
    model = classifier(nn.Softmax(dim=1))
    report = ncet.diagnose(model, (4,), stop_at=name)
    assert report.ok, report
    assert op_types(report.graph) == ["Input", "Linear", "ReLU", "Output"]
    assert report.graph.outputs == ("_1",)
    assert [r.fx_name for r in report.cut] == ["_2", "_3"]
    assert all("after stop_at=" in r.message for r in report.cut)
    ex = ncet.check_exactness(model, report.graph, samples_per_scale=4)
    assert ex.ok and ex.outputs[0].name == "_1"


class AndRelu(nn.Module):
    """Returns a layer's output and its ReLU: stopping at the ReLU leaves nothing out."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        a = self.fc(x)
        return a, torch.relu(a)


def test_stop_at_the_last_operation_declares_an_empty_cut(tmp_path):
    torch.manual_seed(0)
    model = AndRelu().eval()
    ir = ncet.convert(model, (4,), stop_at="relu")
    assert ir.outputs == ("relu",)
    assert dict(ir.nodes[-1].attrs) == {"tuple": False, "cut": [], "stop_at": "relu",
                                        "cut_trailing": False}
    report = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert report.ok, report
    assert not report.traced_differs and report.outputs[0].name == "relu"
    assert "output at a cut" in report.entry("relu").note
    path = tmp_path / "stop.ncet"
    ncet.save(ir, path)  # the empty cut with its arguments saves, loads and certifies
    loaded = ncet.load(path)
    assert loaded.nodes[-1].attrs == ir.nodes[-1].attrs
    assert ncet.check_exactness(model, loaded, samples_per_scale=4).ok


def test_an_empty_cut_is_still_planned_again_on_the_model():
    """An empty cut declares the plan: dropping it returns what the model does not."""
    torch.manual_seed(0)
    model = AndRelu().eval()
    ir = ncet.convert(model, (4,), stop_at="relu")
    output = ir.nodes[-1]
    bare = dataclasses.replace(ir, nodes=(*ir.nodes[:-1], dataclasses.replace(
        output, attrs={"tuple": False})))
    with pytest.raises(ValueError, match="it returns 1 value"):
        ncet.check_exactness(model, bare, samples_per_scale=4)
    moved = dataclasses.replace(ir, nodes=(*ir.nodes[:-1], dataclasses.replace(
        output, attrs={**output.attrs, "stop_at": "fc"})))
    with pytest.raises(ValueError, match="leaves out 'relu'"):
        ncet.check_exactness(model, moved, samples_per_scale=4)


def test_cut_trailing_with_nothing_trailing_converts_the_whole_model():
    model = classifier()
    ir = ncet.convert(model, (4,), cut_trailing=True)
    assert dict(ir.nodes[-1].attrs) == {"tuple": False}  # no plan: the whole model's GraphIR
    assert hash_graphir(ir) == hash_graphir(ncet.convert(model, (4,)))
    report = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert report.ok and not report.cut


class Nested(nn.Module):
    def __init__(self, last: bool):
        super().__init__()
        self.fc, self.g, self.last = nn.Linear(4, 3), nn.Linear(4, 2), last

    def forward(self, x):
        y = self.fc(x)
        return (torch.softmax(y, 1) if self.last else y), (self.g(x),)


@pytest.mark.parametrize("last, kwargs", [
    (False, {}), (False, {"cut_trailing": True}), (True, {"cut_trailing": True}),
    (False, {"stop_at": "fc"}), (True, {"stop_at": "fc", "cut_trailing": True}),
])
def test_a_nested_output_is_rejected_with_or_without_a_cut(last, kwargs):
    model = Nested(last).eval()
    report = ncet.diagnose(model, (4,), **kwargs)
    assert [(e.fx_name, e.code) for e in report.errors] == [("output", "output-structure")]
    assert isinstance(report.errors[0].error, ncet.SupportBoundaryError)
    with pytest.raises(ncet.SupportBoundaryError, match=r"output-structure"):
        ncet.convert(model, (4,), **kwargs)


def test_stop_at_a_function_node_and_a_module_path():
    model = Net(nn.Sigmoid()).eval()
    report = ncet.diagnose(model, (4,), stop_at="relu")
    (fc2, last) = report.cut
    assert fc2.fx_name == "fc2" and fc2.location.startswith("test_cut.py:")  # its line
    ir = report.graph
    assert op_types(ir) == ["Input", "Linear", "ReLU", "Output"]
    ir = ncet.convert(model, (4,), stop_at="fc2", cut_trailing=True)
    assert ir.outputs == ("fc2",)
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok


@pytest.mark.parametrize("name, says", [
    ("fc3", "names no node of the traced graph"),
    ("x", "names an input or the output"),
    ("output", "names an input or the output"),
    ("fc1.weight", "names no node"),
])
def test_an_unknown_stop_at_is_a_clear_error(name, says):
    model = Net(nn.Sigmoid()).eval()
    with pytest.raises(ncet.TraceError) as info:
        ncet.convert(model, (4,), stop_at=name)
    assert info.value.code == "stop-at-node" and says in str(info.value)
    report = ncet.diagnose(model, (4,), stop_at=name)
    (row,) = report.rows
    assert row.code == "stop-at-node" and not report.ok


def test_an_unknown_stop_at_suggests_close_names():
    with pytest.raises(ncet.TraceError) as info:
        ncet.convert(Net(nn.Sigmoid()).eval(), (4,), stop_at="fc_2")
    assert "did you mean 'fc2'" in info.value.hint


def test_stop_at_must_be_a_name():
    with pytest.raises(TypeError, match="stop_at must be a node name"):
        ncet.convert(classifier(), (4,), stop_at=1)
    with pytest.raises(TypeError, match="cut_trailing must be True or False"):
        ncet.diagnose(classifier(), (4,), cut_trailing="yes")


def test_a_saved_cut_graph_is_checked_against_a_fresh_trace(tmp_path, monkeypatch):
    """Without the trace convert recorded (a loaded file, the cache off), the check traces
    the whole model again and reads the cut the GraphIR declares."""
    model = classifier(nn.LogSoftmax(dim=1))
    ir = ncet.convert(model, (4,), cut_trailing=True)
    ncet.save(ir, tmp_path / "cut.ncet")
    loaded = ncet.load(tmp_path / "cut.ncet")
    assert loaded.nodes[-1] == ir.nodes[-1] and ncet.compare(ir, loaded).same
    assert [name for name, _ in loaded.nodes[-1].attrs["cut"]] == ["_3"]
    assert hash_graphir(loaded) == hash_graphir(ir)
    monkeypatch.setattr(trace_cache, "TRACE_CACHE", False)
    report = ncet.check_exactness(model, loaded, samples_per_scale=4)
    assert report.ok and dict(report.cut) == {"_3": "trailing nn.LogSoftmax, cut_trailing=True"}


def test_convert_declares_the_cut_in_the_output_node():
    ir = ncet.convert(classifier(nn.Softmax(dim=1)), (4,), cut_trailing=True)
    assert ir.nodes[-1].attrs["cut"] == [["_3", "trailing nn.Softmax, cut_trailing=True"]]
    ir = ncet.convert(classifier(), (4,), stop_at="0")
    assert ir.nodes[-1].attrs["cut"] == [["_1", "after stop_at='0'"], ["_2", "after stop_at='0'"]]
    assert "cut" not in ncet.convert(classifier(), (4,)).nodes[-1].attrs  # the whole model
    # stop_at= the last node leaves nothing out, and still declares the plan that made it
    last = ncet.convert(classifier(), (4,), stop_at="2")
    assert dict(last.nodes[-1].attrs) == {"tuple": False, "cut": [], "stop_at": "2",
                                          "cut_trailing": False}
    assert ncet.check_exactness(classifier(), last, samples_per_scale=4).ok


def _without_cut(ir: GraphIR) -> GraphIR:
    out = ir.nodes[-1]
    attrs = {k: v for k, v in out.attrs.items() if k != "cut"}
    return GraphIR((*ir.nodes[:-1], dataclasses.replace(out, attrs=attrs)), ir.constants)


def test_a_graph_cut_short_without_declaring_it_is_refused():
    """A GraphIR that lacks the model's last nodes without declaring a cut is a GraphIR of
    another model (or state), not one cut short: refused, not certified against the values
    at whatever node it happens to end."""
    model = classifier()
    ir = ncet.convert(model, (4,), stop_at="1")
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok
    with pytest.raises(ValueError, match=r"does not match the model: no IR node for FX "
                                         r"node\(s\) _2 .*declares none"):
        ncet.check_exactness(model, _without_cut(ir), samples_per_scale=4)
    # so is one that declares a cut the model's graph does not have
    other = classifier(nn.Softmax(dim=1))
    cut = ncet.convert(other, (4,), cut_trailing=True)
    with pytest.raises(ValueError, match="declares that it leaves out '_3'"):
        ncet.check_exactness(classifier(), cut, samples_per_scale=4)
    # or declares less than it leaves out
    short = ncet.convert(model, (4,), stop_at="0")
    out = short.nodes[-1]
    fewer = GraphIR((*short.nodes[:-1], dataclasses.replace(
        out, attrs={**out.attrs, "cut": out.attrs["cut"][:1]})), short.constants)
    with pytest.raises(ValueError, match=r"no IR node for FX node\(s\) _2$"):
        ncet.check_exactness(model, fewer, samples_per_scale=4)


def test_the_summary_says_first_that_the_outputs_were_taken_at_the_cut():
    model = classifier(nn.Softmax(dim=1))
    report = ncet.check_exactness(model, ncet.convert(model, (4,), cut_trailing=True),
                                  samples_per_scale=4)
    first = report.summary().splitlines()[0]
    assert first.startswith("exact within the certified bounds")
    assert first.endswith("checked against the model's values at the cut, not its outputs: "
                          "'_3' cut (trailing nn.Softmax, cut_trailing=True)")
    assert escape(first) in exactness_section(report)  # the HTML report's finding
    assert escape(first) in report._repr_html_()
    record = exactness_record(report)
    assert record["cut"] == {"_3": "trailing nn.Softmax, cut_trailing=True"}
    assert record["summary"].splitlines()[0] == first
    whole = ncet.check_exactness(classifier(), ncet.convert(classifier(), (4,)),
                                 samples_per_scale=4)
    assert "cut" not in whole.summary().splitlines()[0] and whole.cut == {}


def test_a_wrong_cut_graph_is_caught():
    """The cut does not weaken the check: a GraphIR whose weights differ from the model's
    fails at the node."""
    model = classifier(nn.Softmax(dim=1))
    ir = ncet.convert(model, (4,), cut_trailing=True)
    with torch.no_grad():
        model[2].weight[0, 0] += 0.5
    report = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert not report.ok and report.first_violation.name == "_2"


def test_the_cli_cuts(tmp_path, monkeypatch):
    (tmp_path / "nets.py").write_text(
        "from torch import nn\n"
        "def net():\n"
        "    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3),\n"
        "                         nn.Softmax(dim=1)).eval()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for flags, status, says in [
            ((), 1, "unsupported-module"),
            (("--cut-trailing",), 0, "cut: 1 node(s) left out of the GraphIR: _3 (nn.Softmax"),
            (("--stop-at", "1"), 0, "after --stop-at '1'"),  # phrased for the command line
            (("--stop-at", "nope"), 1, "stop-at-node")]:
        out = io.StringIO()
        with redirect_stdout(out):
            code = main(["inspect", "nets.py:net", "--input-shape", "4", *flags])
        assert code == status and says in out.getvalue(), out.getvalue()
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["check", "nets.py:net", "--input-shape", "4", "--cut-trailing",
                     "--samples", "4", "-q"])
    assert code == 0, out.getvalue()
