"""`ncet export --simplify` and `ncet import FILE --export OUT --simplify` (issue 35), run in
this process: the simplified graph written once its certificate holds (the same bytes as
`ncet.to_onnx(ir, simplify=True)`), the changes and the certified verdict printed, the
lint for ERAN left with nothing to report on a network with BatchNorm and an input
normalisation, --check against the simplified graph, --json, the refusal when the
certificate does not hold, and the option combinations that are usage errors."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from pathlib import Path

import onnx
import pytest
import torch

import ncet
from ncet.cli.parser import build_parser
from ncet.passes.export import METADATA_KEY
from tests.test_cli import call
from tests.test_simplify import _no_eps

pytest.importorskip("onnxruntime")

MODELS = textwrap.dedent('''
    """A network with an input normalisation and BatchNorm, which ERAN mis-handles as
    written (its BatchNormalization is replaced by its input)."""
    import torch
    from torch import nn

    from tests.test_simplify import Normalised
    from tests.zoo_models import seeded


    def normalised_bn():
        return seeded(lambda: Normalised(nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 8),
            nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)), 3), 0)


    def tiny_variances():
        """BatchNorm's eps moves the scale by a few per cent: a fold without it is wrong."""
        model = normalised_bn()
        with torch.no_grad():
            model.body[1].running_var.copy_(torch.tensor([2e-4, 5e-4, 1e-3, 3e-4]))
        return model
''')

TARGET = ("simplify_models.py:normalised_bn", "--input-shape", "3,6,6")
SHAPE = (3, 6, 6)
TOOLS = ("eran", "marabou", "abcrown", "nnv")


@pytest.fixture
def models(tmp_path, monkeypatch) -> Path:
    """The model file in a fresh folder, made the working directory (the repository root
    stays on sys.path, for `tests.`)."""
    (tmp_path / "simplify_models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(Path(__file__).parents[1]), *sys.path])
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("_ncet_target_") or name == "simplify_models":
            del sys.modules[name]


def _graph(factory: str = "normalised_bn") -> ncet.GraphIR:
    sys.path.insert(0, ".")
    try:
        import simplify_models
    finally:
        sys.path.remove(".")
    return ncet.convert(getattr(simplify_models, factory)(), SHAPE)


def _lint_args(tools=TOOLS) -> list[str]:
    return [a for tool in tools for a in ("--lint", tool)]


def _expected_rows(report) -> dict[str, tuple[int, int, int, int]]:
    """Per pass: changes, nodes removed, nodes added, constants computed (the library's
    report summed, the table's oracle)."""
    rows: dict[str, list[int]] = {}
    for change in report.applied:
        row = rows.setdefault(change.pass_name, [0, 0, 0, 0])
        for i, n in enumerate((1, len(change.removed), len(change.added),
                               len(change.constants))):
            row[i] += n
    return {name: tuple(row) for name, row in rows.items()}


def _uncertified(monkeypatch) -> list:
    """ncet.simplify made to return its real graph with a report whose certificate does not
    hold; the calls are counted."""
    real = ncet.simplify
    calls = []

    def simplify(ir, *args, **kwargs):
        calls.append(ir)
        graph, report = real(ir, *args, **kwargs)
        return graph, dataclasses.replace(report, ok=False, notes=("a seeded refusal",))

    monkeypatch.setattr(ncet, "simplify", simplify)
    return calls


# --- the file, the lint and the printed report ----------------------------------------------


@pytest.mark.parametrize("profile", ["verifier", "canonical"])
def test_the_simplified_file_is_certified_and_leaves_the_lint_nothing_to_report(
        models, capsys, profile):
    path = models / "net.onnx"
    status, out, err = call(capsys, "export", *TARGET, "-o", str(path), "--profile", profile,
                            "--simplify", *_lint_args())
    assert status == 0, out + err
    ir = _graph()
    expected = ncet.to_onnx(ir, profile=profile, simplify=True)
    assert path.read_bytes() == expected.SerializeToString()
    for tool in TOOLS:
        assert not ncet.lint_onnx(path, tool).findings, tool
    props = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert props["ncet.profile"] == profile
    assert props[METADATA_KEY].startswith("CERTIFIED by ncet.simplify")
    _, report = ncet.simplify(ir)
    lines = out.splitlines()
    assert lines[1] == f"simplify: {report.nodes_before} operator nodes -> " \
                       f"{report.nodes_after}"
    assert lines[2].split() == ["pass", "changes", "nodes", "removed", "nodes", "added",
                                "constants", "computed"]
    rows = _expected_rows(report)
    assert {"fold_batchnorm", "fold_input_normalisation"} <= set(rows)
    for i, (name, counts) in enumerate(rows.items()):
        assert lines[3 + i].split() == [name, *map(str, counts)]
    verdict = lines[3 + len(rows)]
    assert verdict == report.verdict() and verdict.startswith("CERTIFIED: ")
    assert "(certified)" in verdict and f"{report.max_bound:.3g}" in verdict
    assert lines[4 + len(rows)].startswith(f"wrote {path}: ONNX opset ")


def test_without_simplify_the_lint_for_eran_finds_the_batchnorm(models, capsys):
    path = models / "net.onnx"
    status, out, _ = call(capsys, "export", *TARGET, "-o", str(path), "--profile",
                          "verifier", "--lint", "eran")
    assert status == 1 and "BatchNormalization" in out and "simplify:" not in out
    assert ncet.lint_onnx(path, "eran").findings


def test_check_certifies_the_file_against_the_simplified_graph(models, capsys):
    path = models / "net.onnx"
    status, out, err = call(capsys, "export", *TARGET, "-o", str(path), "--profile",
                            "verifier", "--simplify", "--check", "--samples", "2", "-q",
                            "--json")
    assert status == 0, err
    doc = json.loads(out)
    simplified, _ = ncet.simplify(_graph())
    check = doc["onnx_exactness"]
    assert check["ok"] is True
    assert [n["node"] for n in check["nodes"]] == [
        n.name for n in simplified.nodes if n.op_type not in ("Input", "Output")]
    assert ncet.check_onnx(simplified, path, samples_per_scale=2).ok


def test_json_holds_the_simplification_report(models, capsys):
    path = models / "net.onnx"
    status, out, _ = call(capsys, "export", *TARGET, "-o", str(path), "--profile", "verifier",
                          "--simplify", "--lint", "eran", "--json")
    assert status == 0
    doc = json.loads(out)
    assert set(doc) == {"schema_version", "ncet_version", "command", "target", "input_shapes",
                        "eval", "rewrite", "ok", "conversion", "simplification", "export",
                        "lint", "onnx_exactness"}
    _, report = ncet.simplify(_graph())
    assert doc["simplification"] == json.loads(json.dumps(report.to_dict()))
    assert doc["simplification"]["ok"] is True
    assert doc["lint"]["eran"]["findings"] == []
    assert doc["export"]["metadata"][METADATA_KEY].startswith("CERTIFIED by ncet.simplify")
    status, out, _ = call(capsys, "export", *TARGET, "-o", str(path), "--json")
    assert status == 0 and json.loads(out)["simplification"] is None


# --- the refusal ----------------------------------------------------------------------------


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_an_uncertified_simplification_is_refused_in_one_line(models, capsys, monkeypatch,
                                                              json_output):
    path = models / "net.onnx"
    path.write_bytes(b"the previous file")
    calls = _uncertified(monkeypatch)
    status, out, err = call(capsys, "export", *TARGET, "-o", str(path), "--simplify",
                            *(["--json"] if json_output else []))
    assert status == 1 and len(calls) == 1
    assert err.splitlines() == [
        f"ncet export: error: the simplification is not certified, so nothing is written to "
        f"{path} (NOT CERTIFIED: a seeded refusal); export without --simplify"]
    assert path.read_bytes() == b"the previous file"
    if json_output:
        doc = json.loads(out)
        assert doc["ok"] is False and doc["conversion"]["ok"] is True
        assert doc["simplification"]["ok"] is False
        assert doc["simplification"]["verdict"] == "NOT CERTIFIED: a seeded refusal"
        assert doc["export"] is None and doc["lint"] == {} and doc["onnx_exactness"] is None
    else:
        assert out == ""


def test_a_wrong_fold_is_refused_naming_the_pass(models, capsys, monkeypatch):
    monkeypatch.setattr("ncet.passes.affine_forms.batchnorm_scale", _no_eps)
    path = models / "net.onnx"
    status, out, err = call(capsys, "export", "simplify_models.py:tiny_variances",
                            "--input-shape", "3,6,6", "-o", str(path), "--simplify")
    assert status == 1 and out == "" and not path.exists()
    (line,) = err.splitlines()
    assert "not certified" in line and "VIOLATION" in line and "fold_batchnorm" in line
    status, out, _ = call(capsys, "export", "simplify_models.py:tiny_variances",
                          "--input-shape", "3,6,6", "-o", str(path), "--simplify", "--json")
    violation = json.loads(out)["simplification"]["violation"]
    assert status == 1 and violation["passes"] == ["fold_batchnorm"] and not path.exists()
    assert violation["difference"] > violation["bound"]


# --- ncet import FILE --export OUT --simplify -----------------------------------------------


def test_import_exports_the_simplified_graph(models, capsys):
    source, out_path = models / "net.onnx", models / "net.verifier.onnx"
    ncet.to_onnx(_graph(), source)
    status, out, err = call(capsys, "import", str(source), "--no-check", "--export",
                            str(out_path), "--profile", "verifier", "--simplify",
                            *_lint_args())
    assert status == 0, out + err
    imported = ncet.from_onnx(str(source))
    _, report = ncet.simplify(imported)
    assert out_path.read_bytes() == ncet.to_onnx(imported, profile="verifier",
                                                 simplify=True).SerializeToString()
    for tool in TOOLS:
        assert not ncet.lint_onnx(out_path, tool).findings, tool
    assert f"\n{report.verdict()}\n\nwrote {out_path}: ONNX opset" in out
    status, out, _ = call(capsys, "import", str(source), "--no-check", "--export",
                          str(out_path), "--simplify", "--json")
    doc = json.loads(out)
    assert status == 0 and doc["simplification"] == json.loads(json.dumps(report.to_dict()))


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_import_refuses_an_uncertified_simplification(models, capsys, monkeypatch,
                                                      json_output):
    source, out_path = models / "net.onnx", models / "out.onnx"
    ncet.to_onnx(_graph(), source)
    _uncertified(monkeypatch)
    status, out, err = call(capsys, "import", str(source), "--no-check", "--export",
                            str(out_path), "--simplify", *(["--json"] if json_output else []))
    assert status == 1 and not out_path.exists()
    (line,) = err.splitlines()
    assert line.startswith("ncet import: error: the simplification is not certified")
    if json_output:
        doc = json.loads(out)
        assert doc["ok"] is False and doc["conversion"]["ok"] is True
        assert doc["simplification"]["ok"] is False and doc["export"] is None
    else:
        assert out.rstrip().endswith(f"nothing written to {out_path}")


# --- usage -----------------------------------------------------------------------------------


BAD_COMBINATIONS = [
    (("import", "{tmp}/net.onnx", "--simplify"),
     "--simplify shape(s) the ONNX file --export writes: add --export FILE"),
    (("import", "{tmp}/net.onnx", "--simplify", "--profile", "verifier"),
     "--profile, --simplify shape(s) the ONNX file --export writes"),
    (("report", "mlp", "-o", "{tmp}/r.html", "--export", "--simplify"),
     "unrecognized arguments: --simplify"),  # argparse's, from the top parser: "ncet: error"
    (("export", "mlp", "-o", "{tmp}/m.onnx", "--simplify", "--profile", "nope"),
     "--profile 'nope' is not an export profile"),
    (("export", "mlp", "-o", "{tmp}/m.onnx", "--simplify", "--lint", "nosuch"),
     "--lint 'nosuch' is not a tool NCET lints for"),
    (("export", "mlp", "-o", "{tmp}/m.onnx", "--simplify=yes"),
     "ignored explicit argument 'yes'"),
    (("import", "{tmp}/net.onnx", "--export", "{tmp}/m.onnx", "--simplify", "--opset", "5"),
     "opset must be an int from 18"),  # found before simplifying
    (("export", "mlp", "-o", "{tmp}/m.onnx", "--simplify", "--profile", "verifier", "--batch",
      "5"), "the verifier profile fixes the batch to 1"),
]


@pytest.mark.parametrize("args, expected", BAD_COMBINATIONS,
                         ids=[" ".join(a[2:]) for a, _ in BAD_COMBINATIONS])
def test_a_bad_combination_is_one_line_and_status_2(models, capsys, monkeypatch, args,
                                                    expected):
    ncet.to_onnx(ncet.convert(torch.nn.Linear(2, 2), (2,)), models / "net.onnx")
    calls = _uncertified(monkeypatch)
    status, out, err = call(capsys, *(a.replace("{tmp}", str(models)) for a in args))
    assert status == 2 and out == "" and "Traceback" not in err
    last = err.rstrip("\n").splitlines()[-1]
    prefix = "ncet: error: " if args[0] == "report" else f"ncet {args[0]}: error: "
    assert last.startswith(prefix) and expected in last, err
    assert calls == [] and not (models / "m.onnx").exists()


@pytest.mark.parametrize("command, has_it", [("export", True), ("import", True),
                                             ("report", False)])
def test_the_help_says_which_commands_take_simplify(capsys, command, has_it):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("--simplify" in text) is has_it
    if has_it:
        assert "docs/simplification.md" in text and "nothing written" in text


def test_a_network_with_nothing_to_simplify_says_no_change(tmp_path, capsys):
    from ncet.examples import load_example

    model, shapes = load_example("lenet")
    _, report = ncet.simplify(ncet.convert(model, *shapes))
    assert not report.applied and report.ok
    status, out, _ = call(capsys, "export", "lenet", "-o", str(tmp_path / "m.onnx"),
                          "--simplify")
    lines = out.splitlines()
    assert status == 0 and lines[1:3] == [
        f"simplify: {report.nodes_before} operator nodes -> {report.nodes_after} (no change)",
        report.verdict()]
