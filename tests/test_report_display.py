"""ConversionReport's notebook display (`_repr_html_`, `to_pandas(styled=True)`) and
conversion errors raised from the user's frame (`ncet.errors.from_caller`, NCET_DEBUG)."""

from __future__ import annotations

import os
import pickle
import traceback

import pytest
import torch
from torch import nn

import ncet
from ncet.errors import DEBUG_VARIABLE
from ncet.examples import load_example

NCET_DIR = os.path.dirname(ncet.__file__)


class Sine(nn.Module):
    def forward(self, x):
        return torch.sin(x)


class Branching(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: FX cannot trace it
            return x
        return -x


class TrainingDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x)


class EscapedName(nn.Module):
    """A module path with characters that must not reach the page as markup."""

    def __init__(self):
        super().__init__()
        self.add_module("a<b>&c", nn.Linear(4, 4))

    def forward(self, x):
        return torch.sin(getattr(self, "a<b>&c")(x))


def diagnosed(example: str) -> ncet.ConversionReport:
    model, shapes = load_example(example)
    return ncet.diagnose(model, *shapes)


# --- the display -----------------------------------------------------------------------------

def test_repr_html_of_a_converting_model():
    report = diagnosed("lenet")
    page = report._repr_html_()
    assert 'class="ncet-verdict ok"' in page and ">converts: " in page
    assert f"{len(report.graph.nodes)} GraphIR nodes" in page
    for op_type, count in report.op_type_counts().items():
        assert f"<code>{op_type}</code>&nbsp;&times;{count}" in page
    assert 'class="pill mapped"' in page
    assert '<div class="ncet-reason' not in page, "no problem boxes for a model that converts"
    assert "<th>fx_name</th>" not in page, "not the raw per-node table"


def test_repr_html_of_a_rejected_model_groups_problems_by_reason():
    report = diagnosed("many_problems")
    page = report._repr_html_()
    assert 'class="ncet-verdict bad"' in page
    assert f"rejected: {len(report.errors)} problem(s)" in page
    assert "<table>" in page
    codes = {r.code for r in report.errors}
    assert page.count('<div class="ncet-reason') == len(codes)
    for row in report.errors:
        assert f"<code>{row.code}</code></b>" in page
        assert f"<code>{row.fx_name}</code>" in page
        assert row.location in page
        assert row.hint and _escaped(row.hint) in page
    assert page.index("batch-norm-training") < page.index("unsupported-function"), \
        "groups in graph order of their first node"


def test_repr_html_escapes_names_and_source():
    report = ncet.diagnose(EscapedName(), (4,))
    assert not report.ok
    page = report._repr_html_()
    assert "a<b>&c" not in page
    assert "a&lt;b&gt;&amp;c" in page  # the Linear's spelling or path, and in the reason
    assert "<code>torch.sin</code>" in page


def test_repr_html_caps_rows_per_reason():
    from ncet.frontend import report as module

    model = nn.Sequential(*[TrainingDropout() for _ in range(module.SHOWN_PER_REASON + 3)])
    report = ncet.diagnose(model.train(), (4,))
    page = report._repr_html_()
    assert page.count('<tr class="problem">') == module.SHOWN_PER_REASON
    assert "and 3 more node(s)" in page


def test_plain_repr_is_unchanged_text():
    report = diagnosed("many_problems")
    text = repr(report)
    assert text.splitlines()[0] == report.summary()
    assert "<" not in text.splitlines()[1]


@pytest.mark.parametrize("example", ["lenet", "many_problems"])
def test_styled_dataframe_is_a_styler_of_the_plain_one(example):
    from pandas.io.formats.style import Styler

    report = diagnosed(example)
    plain = report.to_pandas()
    assert list(plain.columns) == list(ncet.frontend.report.ROW_COLUMNS)
    styled = report.to_pandas(styled=True)
    assert isinstance(styled, Styler)
    assert styled.data.equals(plain)
    page = styled.to_html()
    assert 'class="pill mapped"' in page
    assert "white-space: nowrap" in page
    if not report.ok:
        assert "rgba(220,38,38,0.10)" in page.replace(" ", "")
        assert 'class="pill unsupported"' in page and 'class="pill boundary"' in page


def test_styled_dataframe_escapes_html():
    styled = ncet.diagnose(EscapedName(), (4,)).to_pandas(styled=True)
    page = styled.to_html()
    assert "a<b>&c" not in page and "a&lt;b&gt;&amp;c" in page


# --- tracebacks from the user's frame ---------------------------------------------------------

def _frames(error: BaseException) -> list[traceback.FrameSummary]:
    return traceback.extract_tb(error.__traceback__)


def _assert_from_here(error: BaseException) -> None:
    """The traceback is this file's frames only: the first is where the error was caught,
    the last the line that called NCET."""
    frames = _frames(error)
    assert frames and frames[0].filename == __file__, frames
    inside = [f for f in frames if f.filename.startswith(NCET_DIR)]
    assert not inside, f"NCET frames before the message: {inside}"
    assert error.__cause__ is None and error.__suppress_context__
    assert "Traceback" not in "".join(traceback.format_exception(error))[len("Traceback"):], \
        "one traceback: no chained cause printed"


def _convert(model, *shapes):
    with pytest.raises(ncet.ConversionError) as info:
        ncet.convert(model, *shapes)
    return info.value


@pytest.mark.parametrize("model, cls, code", [
    pytest.param(Sine(), ncet.UnsupportedOperatorError, "unsupported-function", id="unsupported"),
    pytest.param(TrainingDropout().train(), ncet.UnsupportedOperatorError, "dropout-training",
                 id="dropout"),
    pytest.param(Branching(), ncet.TraceError, "trace-failed", id="trace-failed"),
    pytest.param(nn.Flatten(0), ncet.SupportBoundaryError, "batch-axis", id="boundary"),
])
def test_convert_raises_from_the_callers_frame(model, cls, code, monkeypatch):
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    error = _convert(model, (4,))
    assert type(error) is cls and error.code == code
    _assert_from_here(error)
    internal = traceback.extract_tb(error.internal_traceback)
    assert any(f.filename.startswith(NCET_DIR) for f in internal), "kept for debugging"
    assert _frames(error)[-1].line == "ncet.convert(model, *shapes)", \
        "the last frame before the message is the user's call"


def test_trace_error_keeps_its_cause_for_debugging(monkeypatch):
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    error = _convert(Branching(), (4,))
    assert isinstance(error.internal_cause, torch.fx.proxy.TraceError)
    text = error.debug_traceback()
    assert "direct cause" in text and "ncet/frontend/trace.py" in text
    assert text.rstrip().endswith(str(error).rstrip())


def test_message_and_attributes_are_those_of_the_error_raised_inside(monkeypatch):
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    stripped = _convert(Sine(), (4,))
    monkeypatch.setenv(DEBUG_VARIABLE, "1")
    full = _convert(Sine(), (4,))
    assert type(stripped) is type(full) and str(stripped) == str(full)
    assert (stripped.code, stripped.node, stripped.spelling, stripped.hint) == \
        (full.code, full.node, full.spelling, full.hint)


@pytest.mark.parametrize("model", [Sine(), Branching()], ids=["unsupported", "trace-failed"])
def test_ncet_debug_keeps_the_internal_frames(model, monkeypatch):
    monkeypatch.setenv(DEBUG_VARIABLE, "1")
    error = _convert(model, (4,))
    frames = _frames(error)
    assert frames[0].filename == __file__
    assert any(f.filename.startswith(NCET_DIR) for f in frames[1:])
    assert error.internal_traceback is None
    if isinstance(error, ncet.TraceError):
        assert error.__cause__ is not None


def test_raise_first_raises_from_the_callers_frame(monkeypatch):
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    report = diagnosed("many_problems")
    for _ in range(2):  # a stored error raised twice stays clean
        with pytest.raises(ncet.SupportBoundaryError) as info:
            report.raise_first()
        assert info.value is report.errors[0].error
        _assert_from_here(info.value)
    assert traceback.extract_tb(info.value.internal_traceback)


def test_raise_first_of_a_trace_failure(monkeypatch):
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    report = ncet.diagnose(Branching(), (4,))
    with pytest.raises(ncet.TraceError) as info:
        report.raise_first()
    _assert_from_here(info.value)


def test_nested_entry_points_take_frames_off_once(monkeypatch):
    """An entry point calling another (check_exactness converts when given no IR) keeps the
    whole internal story on the error, and the caller still sees only their own frame."""
    from ncet.errors import from_caller

    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)

    @from_caller
    def outer():
        return ncet.convert(Sine(), (4,))

    with pytest.raises(ncet.UnsupportedOperatorError) as info:
        outer()
    _assert_from_here(info.value)
    names = [f.name for f in traceback.extract_tb(info.value.internal_traceback)]
    assert "outer" in names and "canonicalize" in names


def test_argument_errors_and_bugs_keep_their_traceback():
    with pytest.raises(ValueError) as info:
        ncet.convert(Sine(), (0,))
    assert any(f.filename.startswith(NCET_DIR) for f in _frames(info.value))


def test_errors_still_pickle_without_their_debugging_state(monkeypatch):
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    from ncet.errors import from_caller

    @from_caller
    def load():
        raise ncet.GraphIRFormatError("truncated file")

    with pytest.raises(ncet.GraphIRFormatError) as info:
        load()
    assert info.value.internal_traceback is not None
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == "truncated file" and again.internal_traceback is None


def _escaped(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_a_conversion_error_pickles_with_its_code_and_attributes():
    """Subclasses take other arguments than the message: unpickling must not call them
    with the message alone (multiprocessing, pytest-xdist)."""
    class Sine(nn.Module):
        def forward(self, x):
            return torch.sin(x)

    with pytest.raises(ncet.ConversionError) as info:
        ncet.convert(Sine(), (3,))
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is type(info.value) and str(again) == str(info.value)
    assert (again.code, again.node, again.hint) == \
        (info.value.code, info.value.node, info.value.hint)
