"""The command line names its flags where a hint names a Python call or argument.

Two tables: every hint and reason text in ncet/frontend and ncet/onnx (read from the
source, so a new hint is covered the day it is written) that names a call or argument of
the API is phrased by `ncet.cli.phrasing` without it, naming the command's flag instead;
and models that raise those hints, run through `ncet`, print the flag (and the Python API
keeps its own wording).
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
from pathlib import Path

import pytest
from torch import nn

import ncet
from ncet.cli import main
from ncet.cli.phrasing import CLI_PHRASES, cli_phrased, cli_report

PACKAGE = Path(ncet.__file__).resolve().parent

ERROR_CALLS = {"Rejection", "TraceError", "UnsupportedOperatorError", "SupportBoundaryError",
               "ConversionError", "make_error", "refuse", "ExportError", "ImportRejection",
               "ONNXImportError"}
"""The calls whose string arguments are messages and hints users read."""


def _api_arguments() -> tuple[str, ...]:
    """The keyword arguments of the entry points the command drives."""
    names = set()
    for function in (ncet.convert, ncet.diagnose, ncet.to_onnx):
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD) \
                    and parameter.name not in ("model", "ir", "path"):
                names.add(parameter.name)
    return tuple(sorted(names))


API_ARGUMENTS = tuple(n for n in _api_arguments() if n not in ("dtype",))
"""(`dtype=` is left out: hints also name torch's own dtype= argument of the model's code,
as in `x.mean(dtype=...)`, and the command has no --dtype.)"""
API_MARKERS = re.compile(
    r"\bmodel\.eval\(\)|\b(?:convert|diagnose|to_onnx|check_exactness|check_onnx)\(|"
    + "|".join(rf"\b{name}=" for name in API_ARGUMENTS))
"""What a text names of the Python API: model.eval(), an entry point's call, or one of its
keyword arguments (`rewrite=`, `dtype=`, `batch=`, `profile=`, `opset=`, ...)."""


def _text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with "{}" for each placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _strings(tree: ast.AST) -> list[str]:
    return [t for n in ast.walk(tree) if (t := _text(n)) is not None]


def user_texts() -> list[tuple[str, str]]:
    """(file:line, text) of every string in an error call's arguments, or assigned to a name
    with "hint" in it, in ncet/frontend and ncet/onnx."""
    found = []
    for folder in ("frontend", "onnx"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                parts: list[ast.AST] = []
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                    if name in ERROR_CALLS:
                        parts = [*node.args, *(k.value for k in node.keywords)]
                elif isinstance(node, ast.Assign) and any(
                        "hint" in getattr(t, "id", "").lower() for t in node.targets):
                    parts = [node.value]
                for part in parts:
                    where = f"{path.relative_to(PACKAGE)}:{node.lineno}"
                    found += [(where, text) for text in _strings(part)]
    return found


NAMING_THE_API = [(where, text) for where, text in user_texts() if API_MARKERS.search(text)]


def test_the_scan_finds_the_hints_that_name_the_api():
    texts = [text for _, text in NAMING_THE_API]
    assert "rewrite" in API_ARGUMENTS and "batch" in API_ARGUMENTS
    for known in ("call model.eval() before converting",
                  "check the per-sample input shapes given to convert()"):
        assert known in texts
    assert any("convert(model, (3, 32, 32))" in t for t in texts)
    assert any("rewrite=True" in t for t in texts)
    assert any("profile='canonical'" in t for t in texts)


@pytest.mark.parametrize("where, text", NAMING_THE_API, ids=[w for w, _ in NAMING_THE_API])
def test_each_hint_naming_the_api_names_a_flag_on_the_command_line(where, text):
    phrased = cli_phrased(text)
    assert not API_MARKERS.search(phrased), f"{where}: {phrased!r}"
    assert re.search(r"--[a-z]", phrased), f"{where}: no flag in {phrased!r}"


@pytest.mark.parametrize("pattern, _", CLI_PHRASES)
def test_every_phrasing_is_used(pattern, _):
    """No dead rows: each phrasing matches some hint or error text of the package."""
    cut = ncet.diagnose(nn.Sequential(nn.Linear(4, 3), nn.Softmax(1)), (4,),
                        cut_trailing=True)
    texts = [t for _, t in user_texts()] + [r.message for r in cut.rows] + [
        "the verifier profile fixes the batch to 1; give batch=None or batch=1, not 3"]
    assert any(re.search(pattern, t) for t in texts), pattern


MODELS = textwrap.dedent('''
    import torch
    import torch.nn.functional as F
    from torch import nn


    def batch_norm():
        return nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))


    def dropout():
        return nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))


    class FunctionalDropout(nn.Module):
        def forward(self, x):
            return F.dropout(x, 0.5)


    class TwoInputs(nn.Module):
        def forward(self, x, y):
            return x - y


    def conv():
        return nn.Conv2d(3, 4, 3)


    def linear():
        return nn.Linear(4, 4)


    class InPlace(nn.Module):
        def forward(self, x):
            y = x * 2.0
            return y.relu_()


    class InPlaceReadAfter(nn.Module):
        def forward(self, x):
            y = x * 2.0
            z = y.relu_()
            return y + z


    class Flatten(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 2)

        def forward(self, x):
            return self.fc(x.view(x.size(0), -1))


    def matrix():
        return nn.Sequential(nn.Linear(4, 4)).eval()
''')


@pytest.fixture
def models(tmp_path, monkeypatch):
    (tmp_path / "phrasing_models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def ncet_says(capsys, *argv: str) -> str:
    try:
        main(list(argv))
    except SystemExit:
        pass
    captured = capsys.readouterr()
    return captured.out + captured.err


CASES = [
    # (TARGET, its arguments, what the command says, the API's wording it no longer says)
    ("batch_norm", ("--input-shape", "4"), "Add --eval, which puts the model in eval mode",
     "model.eval()"),
    ("dropout", ("--input-shape", "4"), "Add --eval.", "model.eval()"),
    ("FunctionalDropout", ("--input-shape", "4"),
     "Pass training=False, or training=self.training and add --eval", "model.eval()"),
    ("TwoInputs", ("--input-shape", "4"), "Give one --input-shape per forward() argument, "
     "e.g. --input-shape 3,32,32", "convert("),
    ("conv", ("--input-shape", "1,3,8,8"), "(e.g. --input-shape 3,32,32 for batches of shape "
     "(N, 3, 32, 32))", "convert("),
    ("linear", ("--input-shape", "5"), "Check the per-sample shapes given with --input-shape",
     "convert()"),
    ("InPlace", ("--input-shape", "4"), "or add --rewrite, which makes it out of place here",
     "rewrite=True"),
    ("InPlaceReadAfter", ("--input-shape", "4", "--rewrite"),
     "and --rewrite cannot make it out of place", "rewrite=True"),
    ("Flatten", ("--input-shape", "2,4"), "or add --rewrite, which makes", "rewrite=True"),
]


@pytest.mark.parametrize("target, arguments, said, api", CASES, ids=[c[0] for c in CASES])
def test_the_command_names_its_flags(models, capsys, target, arguments, said, api):
    text = ncet_says(capsys, "inspect", f"phrasing_models.py:{target}", *arguments)
    assert said in text
    assert api not in text


def test_stop_at_and_cut_trailing_are_named_as_flags(models, capsys):
    text = ncet_says(capsys, "inspect", "phrasing_models.py:linear", "--input-shape", "4",
                     "--stop-at", "fc")
    assert "--stop-at 'fc' names no node" in text and "stop_at" not in text
    assert "Give --stop-at a node name as the mapping table's node column shows it" in text
    cut = cli_report(ncet.diagnose(nn.Sequential(nn.Linear(4, 3), nn.Softmax(1)), (4,),
                                   cut_trailing=True))
    assert cut.rows[-2].message == "cut: trailing nn.Softmax, --cut-trailing; not part of " \
        "the GraphIR"


def test_the_json_and_the_html_report_name_the_flags_too(models, capsys):
    ncet_says(capsys, "inspect", "phrasing_models.py:batch_norm", "--input-shape", "4",
              "--json")
    json_text = ncet_says(capsys, "inspect", "phrasing_models.py:batch_norm", "--input-shape",
                          "4", "--json")
    rows = json.loads(json_text)["conversion"]["rows"]
    hints = [r["hint"] for r in rows if r["hint"]]
    assert hints and all("--eval" in h and "model.eval()" not in h for h in hints)
    ncet_says(capsys, "report", "phrasing_models.py:batch_norm", "--input-shape", "4", "-o",
              "report.html")
    page = (models / "report.html").read_text()
    assert "Add --eval" in page and "model.eval()" not in page


def test_the_python_api_keeps_its_own_wording(models, monkeypatch):
    monkeypatch.syspath_prepend(str(models))
    import phrasing_models

    report = ncet.diagnose(phrasing_models.batch_norm(), (4,))
    assert report.errors[0].hint == "call model.eval() before converting"
    assert isinstance(report.errors[0].error, ncet.SupportBoundaryError)


def test_an_export_refusal_names_the_profile_flag(models, capsys):
    text = ncet_says(capsys, "export", "phrasing_models.py:matrix", "--input-shape", "2,4",
                     "-o", "m.onnx", "--profile", "verifier")
    assert "export with --profile canonical" in text and "profile=" not in text


def test_a_batch_the_profile_does_not_take_names_the_batch_flag(models, capsys):
    text = ncet_says(capsys, "export", "phrasing_models.py:linear", "--input-shape", "4",
                     "-o", "m.onnx", "--profile", "verifier", "--batch", "3")
    assert "give no --batch or --batch 1, not 3" in text and "batch=" not in text


# --- ncet diff A B with different inputs --------------------------------------------------


def test_diff_takes_an_input_shape_per_side(models, capsys):
    code = main(["diff", "phrasing_models.py:linear", "phrasing_models.py:conv",
                 "--input-shape-a", "4", "--input-shape-b", "3,8,8"])
    out = capsys.readouterr().out
    assert code == 1 and "--- phrasing_models.py:linear" in out


def test_diff_with_one_shape_for_two_models_names_the_side_flag(models, capsys):
    text = ncet_says(capsys, "diff", "phrasing_models.py:linear",
                     "phrasing_models.py:TwoInputs", "--input-shape", "4")
    assert "Give one --input-shape-b per forward() argument, e.g. --input-shape-b 3,32,32" \
        in text and "convert(" not in text


def test_diff_refuses_a_side_shape_for_a_file(models, capsys):
    ncet.save(ncet.convert(ncet.examples.load_example("mlp")[0], (16,)), models / "m.ncet")
    code = main(["diff", "m.ncet", "mlp", "--input-shape-a", "16"])
    assert code == 2
    assert "--input-shape-a is for a TARGET" in capsys.readouterr().err


def test_diff_help_documents_the_side_shapes(capsys):
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--input-shape-a SHAPE" in text and "--input-shape-b SHAPE" in text
    assert "replaces --input-shape for B" in text
