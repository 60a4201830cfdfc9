"""Tracing: leaf roots, source lines, shape propagation failures, the report's rows, and the
trace convert hands to check_exactness."""

from __future__ import annotations

import copy
import gc
import json
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from ncet.examples import load_example
from tests.test_tracing_hazards import CallCounter


def test_leaf_module_as_root_is_one_call():
    model = nn.Linear(4, 3)
    ir = ncet.convert(model, (4,))
    (linear,) = [n for n in ir.nodes if n.op_type not in ("Input", "Output")]
    assert linear.op_type == "Linear" and linear.source.fx_op == "call_module"
    assert linear.source.module_path == "" and linear.source.module_type == "nn.Linear"
    assert set(ir.constants) == {"weight", "bias"}
    assert torch.equal(ir.constants["weight"], model.weight)


def test_nodes_carry_the_models_source_line():
    class M(nn.Module):
        def forward(self, x):
            return F.relu(x)  # the line FX records

    ir = ncet.convert(M(), (3,))
    line = M.forward.__code__.co_firstlineno + 1
    assert ir.node("relu").source.location == f"test_trace.py:{line}"


def test_errors_and_rows_quote_the_source_line():
    class M(nn.Module):
        def forward(self, x):
            return torch.sin(x)  # not in the spelling table

    with pytest.raises(ncet.UnsupportedOperatorError) as info:
        ncet.convert(M(), (3,))
    error = info.value
    line = M.forward.__code__.co_firstlineno + 1
    text = "return torch.sin(x)  # not in the spelling table"
    assert (error.location, error.source_text) == (f"test_trace.py:{line}", text)
    assert f"test_trace.py:{line} `{text}`" in str(error)
    (row,) = [r for r in ncet.diagnose(M(), (3,)).rows if r.fx_name == "sin"]
    assert (row.location, row.source_text, row.message) == (error.location, text, str(error))
    assert ncet.diagnose(M(), (3,)).rows[0].source_text == ""  # the placeholder has no line


def test_long_source_lines_are_cut_and_unreadable_ones_left_out():
    from ncet.frontend.locations import SOURCE_TEXT_CHARS

    class Long(nn.Module):
        def forward(self, x):
            return torch.sin(x) + x * 1.0 + x * 2.0 + x * 3.0 + x * 4.0 + x * 5.0 + x * 6.0 + x

    error = pytest.raises(ncet.UnsupportedOperatorError, ncet.convert, Long(), (3,)).value
    assert len(error.source_text) == SOURCE_TEXT_CHARS and error.source_text.endswith("…")
    assert error.source_text.startswith("return torch.sin(x) + x * 1.0")

    namespace = {"nn": nn, "torch": torch}
    exec(compile("class M(nn.Module):\n    def forward(self, x):\n"
                 "        return torch.sin(x)\n", "no-such-file.py", "exec"), namespace)
    error = pytest.raises(ncet.UnsupportedOperatorError, ncet.convert, namespace["M"](),
                          (3,)).value
    assert (error.location, error.source_text) == ("no-such-file.py:3", "")
    assert "no-such-file.py:3)" in str(error)  # the location alone, as before


def test_source_text_follows_an_edited_file(tmp_path, monkeypatch):
    # a model file edited and reloaded in a long session: the text is the file's new line
    import importlib
    import os

    source = ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n"
              "    def forward(self, x):\n        return torch.sin(x)  # {}\n")
    path = tmp_path / "edited_model.py"
    path.write_text(source.format("first"))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("edited_model")
    texts = []
    for version in ("first", "second"):
        if version == "second":
            path.write_text(source.format(version))
            stat = path.stat()  # a newer mtime, whatever the file system's resolution
            os.utime(path, (stat.st_atime, stat.st_mtime + 2))
            importlib.invalidate_caches()
            module = importlib.reload(module)
        error = pytest.raises(ncet.UnsupportedOperatorError, ncet.convert, module.M(), (3,))
        texts.append(error.value.source_text)
    assert texts == ["return torch.sin(x)  # first", "return torch.sin(x)  # second"]


def test_shape_propagation_failure_is_a_conversion_error():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(5, 2))
    with pytest.raises(ncet.TraceError) as info:
        ncet.convert(model, (4,))
    assert info.value.code == "shape-propagation" and info.value.node == "_1"
    assert "mat1 and mat2" in str(info.value)
    report = ncet.diagnose(model, (4,))
    assert [r.code for r in report.errors] == ["shape-propagation"]


def test_nodes_after_a_failure_are_skipped_not_reported():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(5, 2), nn.ReLU(), nn.Linear(2, 2))
    statuses = [r.status for r in ncet.diagnose(model, (4,)).rows]
    assert statuses == ["mapped", "mapped", "boundary", "skipped", "skipped", "mapped"]


def test_bad_input_shapes_are_a_value_error():
    with pytest.raises(ValueError, match="per-sample"):
        ncet.convert(nn.ReLU(), (3, -1))
    with pytest.raises(ValueError, match="below 2\\*\\*63"):
        ncet.convert(nn.ReLU(), (2**70,))
    with pytest.raises(ncet.TraceError, match="input-count"):
        ncet.convert(nn.ReLU())


@pytest.mark.parametrize(("dtype", "error", "says"), [
    ("float32", TypeError, "dtype must be a torch.dtype"),
    (5, TypeError, "dtype must be a torch.dtype"),
    (torch.quint8, ValueError, "example inputs cannot be made of it"),
], ids=["string", "int", "quantized"])
def test_a_dtype_that_is_not_one_is_named(dtype, error, says):
    """A mistyped dtype is the caller's error, not a problem of the model (diagnose raises
    it too, rather than reporting a row)."""
    with pytest.raises(error, match=says):
        ncet.convert(nn.ReLU(), (4,), dtype=dtype)
    with pytest.raises(error, match=says):
        ncet.diagnose(nn.ReLU(), (4,), dtype=dtype)


def test_integer_example_inputs_are_rejected_node_by_node():
    assert [(r.fx_name, r.code) for r in ncet.diagnose(nn.ReLU(), (4,),
                                                       dtype=torch.int64).errors] == [
        ("root", "dtype")]


@pytest.mark.parametrize("shape", [(2**40,), (2**62, 2**62), (2**31, 2**31)],
                         ids=["2^40 elements", "beyond int64", "2^62 elements"])
def test_example_inputs_too_large_to_make_are_a_conversion_error(shape):
    """convert raises a TraceError with a reason code; diagnose reports it, never raises."""
    with pytest.raises(ncet.TraceError) as info:
        ncet.convert(nn.ReLU(), shape)
    assert info.value.code == "shape-propagation"
    assert "example inputs" in str(info.value) and str(list(shape)) in str(info.value)
    assert [r.code for r in ncet.diagnose(nn.ReLU(), shape).errors] == ["shape-propagation"]


def nested(depth: int) -> nn.Module:
    model = nn.ReLU()
    for _ in range(depth):
        model = nn.Sequential(model)
    return model


def test_deep_nesting_converts_or_names_the_recursion_limit():
    """150 nested Sequentials convert; 220 run eagerly but take FX past Python's recursion
    limit, which the error names (not a location inside copy.py or NCET); diagnose reports
    the same, and does not raise even where the limit stops eager calls too."""
    assert [n.op_type for n in ncet.convert(nested(150), (3,)).nodes] == [
        "Input", "ReLU", "Output"]
    deep = nested(220)
    assert deep(torch.ones(2, 3)).shape == (2, 3)
    with pytest.raises(ncet.TraceError) as info:
        ncet.convert(deep, (3,))
    assert info.value.code == "trace-failed"
    assert "recursion limit" in str(info.value) and "nest 220 deep" in str(info.value)
    assert info.value.location == ""
    assert "setrecursionlimit" in info.value.hint
    assert [r.code for r in ncet.diagnose(nested(1200), (3,)).errors] == ["trace-failed"]


class _CallsItself(nn.Module):
    def forward(self, x):
        return self.forward(x + 1.0)  # recursion of the model's own, at this line


def test_recursion_of_the_models_own_is_located():
    with pytest.raises(ncet.TraceError) as info:
        ncet.convert(_CallsItself(), (3,))
    assert "recursion limit" in str(info.value) and "nest" not in str(info.value)
    assert info.value.location.startswith("test_trace.py:")
    assert info.value.source_text == "return self.forward(x + 1.0)  # recursion of the " \
                                     "model's own, at this line"


def test_multiple_inputs_and_outputs():
    class M(nn.Module):
        def forward(self, x, y):
            s = x + y
            return s, torch.relu(s - 1.0)

    ir = ncet.convert(M(), (4,), (4,))
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    out = ncet.evaluate(ir, x, y)
    assert isinstance(out, tuple) and len(out) == 2
    torch.testing.assert_close(out[1], torch.relu(x.double() + y.double() - 1.0))
    assert ir.outputs == ("add", "relu")
    assert [n.name for n in ir.inputs] == ["x", "y"]


def test_evaluate_checks_its_inputs():
    ir = ncet.convert(nn.Linear(4, 2), (4,))
    with pytest.raises(ValueError, match="per-sample shape"):
        ncet.evaluate(ir, torch.randn(3, 5))
    with pytest.raises(ValueError, match="takes 1 input"):
        ncet.evaluate(ir, torch.randn(3, 4), torch.randn(3, 4))


@pytest.mark.parametrize(("call", "error", "says"), [
    (lambda ir: ncet.evaluate(ir, torch.randn(3, 4).numpy()), TypeError, "torch.as_tensor"),
    (lambda ir: ncet.evaluate(ir, [[0.0] * 4]), TypeError, "not a tensor"),
    (lambda ir: ncet.evaluate(ir, torch.randn(3, 4), dtype="float64"), TypeError, "torch.dtype"),
    (lambda ir: ncet.evaluate(ir, torch.randn(3, 4), dtype=torch.int64), ValueError,
     "not a floating-point"),
    (lambda ir: ncet.evaluate(ir, torch.randn(3, 4, dtype=torch.complex64)), ValueError,
     "complex"),
    (lambda ir: ncet.evaluate("net.ncet", torch.randn(3, 4)), TypeError, "GraphIR"),
], ids=["numpy", "list", "dtype-string", "dtype-int64", "complex", "ir-string"])
def test_evaluate_names_the_argument_it_refuses(call, error, says):
    """Never a silent truncation (int64), a dropped imaginary part or a raw AttributeError."""
    ir = ncet.convert(nn.Linear(4, 2), (4,))
    with pytest.raises(error, match=says):
        call(ir)


def test_report_rows_and_dataframe():
    model, shapes = load_example("many_problems")
    report = ncet.diagnose(model, *shapes)
    graph_nodes = [n.name for n in torch.fx.symbolic_trace(model).graph.nodes]
    assert [r.fx_name for r in report.rows] == graph_nodes
    frame = report.to_pandas()
    assert list(frame["fx_name"]) == graph_nodes
    assert {"fx_op", "spelling", "module_path", "module_type", "op_type", "status", "code",
            "message", "hint", "shape", "location"} <= set(frame.columns)
    for row in report.errors:
        assert row.code and row.hint and row.location.startswith("examples.py:")
        assert row.fx_name in row.message
    assert "rejected: 7 problem(s)" in repr(report)
    assert "<table>" in report._repr_html_()


def test_graph_ir_views():
    model, shapes = load_example("lenet")
    ir = ncet.convert(model, *shapes)
    frame = ir.to_pandas()
    assert list(frame["name"]) == [n.name for n in ir.nodes]
    text = repr(ir)
    assert "conv1.weight" in text and "Conv2d(x;" in text
    assert ir._repr_html_().count("<tr>") == len(ir.nodes) + 1
    with pytest.raises(KeyError, match="no node"):
        ir.node("nope")


class _BranchOnValue(nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


class _BadArgument(nn.Module):
    def forward(self, x):
        return F.avg_pool2d(x, 2, divisor_override=2.5)  # a TypeError eagerly too


class _IntoTheStandardLibrary(nn.Module):
    def forward(self, x):
        return x + len(json.dumps(x))  # fails inside json/encoder.py: reported here


@pytest.mark.parametrize(("model", "hint", "text"), [
    (_BranchOnValue(), "remove data-dependent control flow", "return x if x.sum() > 0 else -x"),
    (_BadArgument(), "run the model eagerly on an example input",
     "return F.avg_pool2d(x, 2, divisor_override=2.5)  # a TypeError eagerly too"),
    (_IntoTheStandardLibrary(), "run the model eagerly on an example input",
     "return x + len(json.dumps(x))  # fails inside json/encoder.py: reported here"),
], ids=["control-flow", "failing-call", "failing-in-a-library"])
def test_trace_failed_hint_follows_the_cause(model, hint, text):
    """The hint fits the cause, and the error and diagnose's row point at the line FX could
    not trace (the innermost frame of the model's code)."""
    with pytest.raises(ncet.TraceError) as info:
        ncet.convert(model, (1, 4, 4))
    error = info.value
    assert error.code == "trace-failed"
    assert error.hint.startswith(hint)
    line = type(model).forward.__code__.co_firstlineno + 1
    assert (error.location, error.source_text) == (f"test_trace.py:{line}", text)
    assert str(error).startswith(f"model (test_trace.py:{line} `{text}`): ")
    (row,) = ncet.diagnose(model, (1, 4, 4)).rows
    assert (row.location, row.source_text, row.message) == (error.location, text, str(error))


@pytest.fixture
def traces(monkeypatch):
    """Count the calls of ncet.frontend.trace.trace_model (by convert and by check_exactness)."""
    import ncet.exactness.check
    import ncet.frontend.canonicalize
    import ncet.frontend.trace

    calls = []
    real = ncet.frontend.trace.trace_model

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(ncet.frontend.trace, "trace_model", counting)
    monkeypatch.setattr(ncet.frontend.canonicalize, "trace_model", counting)
    monkeypatch.setattr(ncet.exactness.check, "trace_model", counting)
    return calls


def test_check_exactness_reuses_the_trace_convert_made(traces, tmp_path):
    """convert hands its FX graph to check_exactness for the GraphIR it returned and the
    same model object; any other pair is traced afresh."""
    model, shapes = load_example("residual_cnn")
    ir = ncet.convert(model, *shapes)
    assert len(traces) == 1
    assert ncet.check_exactness(model, ir, samples_per_scale=2).ok
    assert len(traces) == 1  # reused
    x = torch.randn(4, *shapes[0], generator=torch.Generator().manual_seed(0))
    assert ncet.check_exactness(model, x).ok  # converts, then reuses that trace
    assert len(traces) == 2
    ncet.save(ir, tmp_path / "m.ncet")
    assert ncet.check_exactness(model, ncet.load(tmp_path / "m.ncet"), samples_per_scale=2).ok
    assert len(traces) == 3  # a loaded GraphIR: traced
    twin = copy.deepcopy(model)
    assert ncet.check_exactness(twin, ir, samples_per_scale=2).ok
    assert traces[-1] is twin  # another model object: traced


def test_a_model_that_changed_since_convert_is_traced_again(traces):
    model = CallCounter()  # forward() changes the Python state it reads
    ir = ncet.convert(model, (4,))
    report = ncet.check_exactness(model, ir, samples_per_scale=2)
    assert len(traces) == 2  # the recorded graph disagreed with eager model(x): retraced
    assert not report.ok and report.first_violation is not None  # found at its node
    assert report.first_violation.op_type == "ElementwiseAffine"


def test_a_recorded_trace_keeps_neither_model_nor_graph_alive():
    model, shapes = load_example("mlp")
    ir = ncet.convert(model, *shapes)
    model_ref, ir_ref = weakref.ref(model), weakref.ref(ir)
    del model
    gc.collect()
    assert model_ref() is None  # the GraphIR does not hold the model
    del ir
    gc.collect()
    assert ir_ref() is None


@pytest.mark.parametrize("name", ["mlp", "lenet", "residual_cnn", "sigmoid_mlp",
                                  "training_mode_cnn", "batch_mixing", "many_problems"])
def test_shapes_from_fake_tensors_give_the_same_conversion(name, monkeypatch, tmp_path):
    """A node that is slow at the first batch size gets its second-batch shape from fake
    tensors; forced for every node, diagnose and convert give what two real runs give."""
    import ncet.frontend.fake_shapes

    model, shapes = load_example(name)
    real = ncet.diagnose(model, *shapes)
    monkeypatch.setattr(ncet.frontend.fake_shapes, "SHAPE_ONLY_AFTER_SECONDS", -1.0)
    fake = ncet.diagnose(model, *shapes)
    assert fake.rows == real.rows
    if real.ok:
        ncet.save(real.graph, tmp_path / "real.ncet")
        ncet.save(fake.graph, tmp_path / "fake.ncet")
        assert (tmp_path / "real.ncet").read_bytes() == (tmp_path / "fake.ncet").read_bytes()


def test_shape_only_runs_only_the_slow_nodes(monkeypatch):
    import ncet.frontend.fake_shapes as fake_shapes

    calls = []
    real = fake_shapes.FakeShapes.output

    def counting(self, node, env, module):
        calls.append(node.name)
        return real(self, node, env, module)

    monkeypatch.setattr(fake_shapes.FakeShapes, "output", counting)
    model, shapes = load_example("mlp")
    # no node slower than the threshold: a second real run, no fake tensors (the threshold is
    # set out of reach, so a loaded machine cannot make a small layer "slow")
    monkeypatch.setattr(fake_shapes, "SHAPE_ONLY_AFTER_SECONDS", float("inf"))
    ncet.convert(model, *shapes)
    assert calls == []
    monkeypatch.setattr(fake_shapes, "SHAPE_ONLY_AFTER_SECONDS", -1.0)
    ir = ncet.convert(model, *shapes)
    assert len(calls) == len(ir.nodes) - len(ir.inputs) - 1  # every operator node
