"""`ncet export` and the report's ONNX export section, run in this process: the file written,
the options reaching it, refusals and usage errors, --json, --lint and --check."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

import ncet
from ncet.cli.parser import LINT_TOOL_NAMES, build_parser
from ncet.examples import load_example
from ncet.onnx import DEFAULT_OPSET, PROFILES
from ncet.render.export_section import ExportFacts
from ncet.render.html import render_report, verdict
from tests.test_cli import call  # the command run in this process

MODELS = textwrap.dedent('''
    """Models for the export tests."""
    import torch
    from torch import nn


    def linear_bn():
        """ERAN replaces a BatchNormalization by its input: a Linear+BatchNorm1d vanishes."""
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU())
        with torch.no_grad():
            model[1].running_mean.uniform_(-1, 1)
            model[1].running_var.uniform_(0.5, 2)
        return model.eval()


    def plain():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).eval()


    def pool():
        """Converts, but ONNX AveragePool has no divisor_override: the export is refused."""
        return nn.Sequential(nn.AvgPool2d(2, divisor_override=3)).eval()
''')


def call_json(capsys, *args: str) -> tuple[int, dict]:
    status, out, err = call(capsys, *args, "--json")
    assert out, err
    return status, json.loads(out)


@pytest.fixture
def models(tmp_path, monkeypatch) -> Path:
    """A model file in a fresh folder, made the working directory."""
    (tmp_path / "export_models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("_ncet_target_") or name == "export_models":
            del sys.modules[name]


def batch_dim(model: onnx.ModelProto) -> int | str:
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    return dim.dim_value if dim.HasField("dim_value") else dim.dim_param


def section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start:page.index("</section>", start)]


def table_rows(html_text: str) -> list[list[str]]:
    """The body rows of the first table in `html_text`: each row's cells, tags removed."""
    body = html_text[html_text.index("<tbody>"):html_text.index("</tbody>")]
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]


# --- help ------------------------------------------------------------------------------------


def test_help_documents_the_options_exit_statuses_and_every_profile(capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["export", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "usage: ncet export" in text and "examples:" in text
    for option in ("-o FILE", "--profile P", "--batch N", "--opset K", "--lint TOOL",
                   "--check", "--json", "--rewrite", "--eval"):
        assert option in text, option
    for profile in PROFILES:
        assert profile in text, profile
    assert "the file is still written" in text and "Exit status 0" in text


def test_the_commands_help_lists_export_and_its_exit_status(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    assert "    export" in text and "ncet export mlp -o mlp.onnx" in text
    assert "the ONNX export is refused" in " ".join(text.split())


def test_the_help_names_the_linters_tools():
    from ncet.onnx.lint import LINT_TOOLS

    assert LINT_TOOL_NAMES == tuple(LINT_TOOLS)


def test_the_command_line_does_not_import_onnx_until_it_exports():
    code = ("import sys, ncet.cli; ncet.cli.build_parser(); "
            "print('onnx' in sys.modules, 'onnxruntime' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=600)
    assert result.stdout.split() == ["False", "False"], result.stderr


# --- the file --------------------------------------------------------------------------------


@pytest.mark.parametrize("target, options, profile, batch, opset", [
    ("mlp", (), "canonical", "N", DEFAULT_OPSET),
    ("mlp", ("--batch", "1"), "canonical", 1, DEFAULT_OPSET),
    ("mlp", ("--opset", "18"), "canonical", "N", 18),
    ("lenet", ("--profile", "verifier"), "verifier", 1, PROFILES["verifier"].default_opset),
    ("residual_cnn", ("--batch", "4", "--opset", "20"), "canonical", 4, 20),
    ("residual_cnn", ("--profile", "canonical", "--batch", "2"), "canonical", 2, DEFAULT_OPSET),
], ids=["defaults", "batch-1", "opset-18", "verifier", "batch-4-opset-20", "canonical-batch-2"])
def test_the_file_is_written_valid_and_as_asked(tmp_path, capsys, target, options, profile,
                                                batch, opset):
    path = tmp_path / "model.onnx"
    status, out, err = call(capsys, "export", target, "-o", str(path), *options)
    assert status == 0, out + err
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    props = {p.key: p.value for p in model.metadata_props}
    assert props["ncet.profile"] == profile
    assert props["ncet.version"] == ncet.__version__
    assert batch_dim(model) == batch
    assert [o.version for o in model.opset_import if o.domain == ""] == [opset]
    lines = out.splitlines()
    wording = f"fixed batch size {batch}" if isinstance(batch, int) else \
        f"symbolic batch size {batch}"
    assert "batch axis" not in out  # "batch axis 1" read as "the batch is axis 1"
    assert lines[0].startswith(f"{target}: ") and lines[0].endswith("converts")
    assert lines[1].startswith(f"wrote {path}: ONNX opset {opset}, {profile} profile, "
                               f"{wording}, {len(model.graph.node)} nodes")
    assert hashlib.sha256(path.read_bytes()).hexdigest() in lines[1]


def test_json_has_the_file_and_what_was_asked(tmp_path, capsys):
    path = tmp_path / "cnn.onnx"
    status, doc = call_json(capsys, "export", "residual_cnn", "-o", str(path), "--batch", "3")
    assert status == 0 and doc["ok"] is True and doc["command"] == "export"
    assert set(doc) == {"schema_version", "ncet_version", "command", "target", "input_shapes",
                        "eval", "rewrite", "ok", "conversion", "simplification", "export",
                        "lint", "onnx_exactness"}
    export = doc["export"]
    model = onnx.load(path)
    data = path.read_bytes()
    assert export == {
        "exported": True, "error": None, "path": str(path), "profile": "canonical",
        "batch": 3, "opset": DEFAULT_OPSET, "batch_axis": 3, "nodes": len(model.graph.node),
        "op_types": export["op_types"],
        "metadata": {p.key: p.value for p in model.metadata_props},
        "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    counted: dict[str, int] = {}
    for node in model.graph.node:
        counted[node.op_type] = counted.get(node.op_type, 0) + 1
    assert export["op_types"] == counted and "Conv" in counted
    assert doc["lint"] == {} and doc["onnx_exactness"] is None
    assert doc["conversion"]["ok"] is True


def test_rewrite_reaches_the_conversion(models, capsys):
    (models / "flat.py").write_text(textwrap.dedent('''
        from torch import nn


        class Flat(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(12, 2)

            def forward(self, x):
                return self.fc(x.view(x.size(0), -1))
    '''))
    path = models / "flat.onnx"
    status, _, _ = call(capsys, "export", "flat.py:Flat", "--input-shape", "3,4", "-o",
                        str(path))
    assert status == 1 and not path.exists()
    status, doc = call_json(capsys, "export", "flat.py:Flat", "--input-shape", "3,4", "-o",
                            str(path), "--rewrite")
    assert status == 0 and doc["rewrite"] is True and path.exists()
    assert "Shape" not in doc["export"]["op_types"]


# --- refusals and usage errors ----------------------------------------------------------------


def test_a_refused_export_writes_nothing_and_names_the_node(models, capsys):
    path = models / "pool.onnx"
    path.write_bytes(b"the previous file")
    status, out, _ = call(capsys, "export", "export_models.py:pool", "--input-shape", "1,4,4",
                          "-o", str(path))
    assert status == 1
    assert "1 problem(s):\n- cannot export node '_0' (AvgPool2d" in out
    assert "divisor_override" in out and "; export refused" in out
    assert out.rstrip().endswith(f"nothing written to {path}")
    assert path.read_bytes() == b"the previous file"
    status, doc = call_json(capsys, "export", "export_models.py:pool", "--input-shape",
                            "1,4,4", "-o", str(path))
    assert status == 1 and doc["ok"] is False and doc["conversion"]["ok"] is True
    assert doc["export"]["exported"] is False and "cannot export node '_0'" in \
        doc["export"]["error"]
    assert doc["export"]["bytes"] is None and doc["export"]["sha256"] is None


def test_a_rejected_model_writes_nothing(tmp_path, capsys):
    path = tmp_path / "s.onnx"
    status, out, _ = call(capsys, "export", "sigmoid_mlp", "-o", str(path))
    assert status == 1 and "[unsupported-function]" in out and not path.exists()
    assert out.rstrip().endswith(f"nothing written to {path}")
    status, doc = call_json(capsys, "export", "sigmoid_mlp", "-o", str(path))
    assert status == 1 and doc["export"] is None and doc["conversion"]["ok"] is False


@pytest.mark.parametrize("args, expected", [
    (("--profile", "nope"), "--profile 'nope' is not an export profile: choose one of"),
    (("--batch", "0"), "'0' is not a batch size"),
    (("--batch", "two"), "'two' is not a batch size"),
    (("--batch", "-1"), "'-1' is not a batch size"),
    (("--batch", str(2**64)), f"'{2**64}' is not a batch size"),
    (("--batch", "1000", "--check"), "give --samples 1000, or a smaller --batch"),
    (("--opset", "5"), "opset must be an int from 18"),
    (("--opset", "x"), "'x' is not an opset"),
    (("--lint", "nosuch"), "--lint 'nosuch' is not a tool NCET lints for"),
    (("--lint", "eran,marabou"), "repeat --lint for several tools"),
    (("-o", "/nonexistent/folder/m.onnx"), "cannot write '/nonexistent/folder/m.onnx'"),
    ((), "the following arguments are required: -o/--output"),
], ids=["profile", "batch-0", "batch-word", "batch-negative", "batch-huge",
        "batch-too-large-to-round-to", "opset-range", "opset-word", "lint-tool",
        "lint-commas", "unwritable", "no-output"])
def test_usage_errors_exit_2_and_say_what_to_type(tmp_path, capsys, args, expected):
    output = () if "-o" in args or not args else ("-o", str(tmp_path / "m.onnx"))
    status, out, err = call(capsys, "export", "mlp", *output, *args)
    assert status == 2 and expected in err and out == ""
    assert "Traceback" not in err and not (tmp_path / "m.onnx").exists()


def test_a_target_that_cannot_be_loaded_is_a_usage_error(tmp_path, capsys):
    status, _, err = call(capsys, "export", "residual", "-o", str(tmp_path / "m.onnx"))
    assert status == 2 and "neither package.module:factory" in err


# --- lint ------------------------------------------------------------------------------------


def test_lint_eran_finds_the_batchnorm_and_fails_but_writes(models, capsys):
    path = models / "bn.onnx"
    status, out, _ = call(capsys, "export", "export_models.py:linear_bn", "--input-shape", "4",
                          "-o", str(path), "--lint", "eran")
    assert status == 1
    onnx.checker.check_model(onnx.load(path), full_check=True)  # written all the same
    assert f"wrote {path}" in out
    lint = out[out.index("lint for eran"):]
    assert "1 finding" in lint and "(BatchNormalization)" in lint and "mishandles" in lint
    status, doc = call_json(capsys, "export", "export_models.py:linear_bn", "--input-shape",
                            "4", "-o", str(path), "--lint", "eran", "--lint", "eran")
    assert status == 1 and doc["ok"] is False and doc["export"]["exported"] is True
    assert list(doc["lint"]) == ["eran"]  # a tool given twice is linted once
    eran = doc["lint"]["eran"]
    assert eran["ok"] is False and eran["tool"] == "eran"
    assert [f["op_type"] for f in eran["findings"]] == ["BatchNormalization"]
    assert eran["findings"][0]["reason"] and eran["findings"][0]["source"]


def test_lint_json_is_the_linters_report_and_a_clean_file_passes(models, capsys):
    from ncet.onnx.lint import lint_onnx

    path = models / "plain.onnx"
    status, out, _ = call(capsys, "export", "export_models.py:plain", "--input-shape", "4",
                          "-o", str(path), "--profile", "verifier", "--lint", "abcrown",
                          "--lint", "marabou")
    assert status == 0, out
    expected = {tool: lint_onnx(onnx.load(path), tool) for tool in ("abcrown", "marabou")}
    assert all(report.ok for report in expected.values())
    for report in expected.values():
        assert str(report) in out
    status, doc = call_json(capsys, "export", "export_models.py:plain", "--input-shape", "4",
                            "-o", str(path), "--profile", "verifier", "--lint", "abcrown",
                            "--lint", "marabou")
    assert status == 0 and doc["ok"] is True
    assert doc["lint"] == {tool: r.to_dict() for tool, r in expected.items()}


# --- check -----------------------------------------------------------------------------------


def test_check_certifies_a_bundled_example(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    status, out, err = call(capsys, "export", "mlp", "-o", str(path), "--check",
                            "--samples", "2")
    assert status == 0, out + err
    assert "checking" in err and "ONNX nodes in onnxruntime on 6 samples" in err
    assert "onnxruntime against the GraphIR:" in out
    assert "exact within the certified bounds on 6 samples" in out
    status, doc = call_json(capsys, "export", "mlp", "-o", str(path), "--check",
                            "--samples", "2", "-q")
    assert status == 0 and doc["ok"] is True
    check = doc["onnx_exactness"]
    assert check["ok"] is True and check["first_violation"] is None and check["samples"] == 6
    assert check["nodes"] and set(check["nodes"][0]) >= {"node", "op_type", "local", "end_to_end"}


@pytest.mark.parametrize("command", ["export", "report"])
def test_check_with_a_fixed_batch_rounds_the_samples_up_to_whole_batches(tmp_path, capsys,
                                                                         command):
    """Issue 30: `ncet export mlp --batch 5 --check` printed a traceback (96 samples do not
    split into batches of 5)."""
    output = tmp_path / ("m.onnx" if command == "export" else "r.html")
    export = () if command == "export" else ("--export",)
    status, out, err = call(capsys, command, "mlp", "-o", str(output), *export, "--batch", "5",
                            "--check", "--samples", "2", "-q", "--json")
    doc = json.loads(out)
    assert status == 0 and doc["ok"] is True, err
    assert doc["onnx_exactness"]["samples"] == 15 and 15 % 5 == 0
    assert err == "ncet: --samples 2 rounded up to 5, so that the check's 3 x 5 samples split " \
                  "into the file's batches of 5\n"
    status, out, err = call(capsys, command, "mlp", "-o", str(output), *export, "--batch", "3",
                            "--check", "--samples", "2", "-q", "--json")
    assert status == 0 and json.loads(out)["onnx_exactness"]["samples"] == 6 and err == ""


def test_quiet_check_prints_nothing_on_stderr(tmp_path, capsys):
    status, _, err = call(capsys, "export", "mlp", "-o", str(tmp_path / "m.onnx"), "--check",
                          "--samples", "2", "-q")
    assert status == 0 and err == ""


# --- the report's export section --------------------------------------------------------------


def test_the_report_has_no_export_section_unless_asked(tmp_path, capsys):
    path = tmp_path / "r.html"
    status, doc = call_json(capsys, "report", "mlp", "-o", str(path), "--samples", "2", "-q")
    assert status == 0 and doc["export"] is None and doc["lint"] == {}
    page = path.read_text()
    assert 'id="export"' not in page and 'href="#export"' not in page


def test_the_report_export_section_has_the_fields(models, capsys):
    path = models / "r.html"
    status, out, _ = call(capsys, "report", "export_models.py:linear_bn", "--input-shape", "4",
                          "-o", str(path), "--samples", "2", "-q", "--export", "--profile",
                          "verifier", "--lint", "eran", "--check")
    assert status == 1, out  # eran's finding
    assert "ONNX file: " in out and "lint finding(s) for eran" in out
    page = path.read_text()
    assert 'href="#export"' in page
    export = section(page, "export")
    about = dict(re.findall(r"<tr><th>([^<]*)</th><td><code>([^<]*)</code></td></tr>", export))
    assert about["profile"] == "verifier"
    assert about["opset"] == str(PROFILES["verifier"].default_opset)
    assert about["batch"] == "fixed batch size 1" and "batch axis" not in export
    ir = ncet.convert(sys.modules["export_models"].linear_bn(), (4,))
    model = ncet.to_onnx(ir, profile="verifier")
    assert about["ONNX nodes"] == str(len(model.graph.node))
    assert about["sha256"] == hashlib.sha256(model.SerializeToString()).hexdigest()
    per_op = export[export.index("<h3>Nodes per ONNX op type"):]
    counts = {op: int(n) for op, n in table_rows(per_op)}
    assert sum(counts.values()) == len(model.graph.node) and counts["BatchNormalization"] == 1
    metadata = dict(table_rows(export[export.index("<h3>metadata_props"):]))
    assert metadata["ncet.profile"] == "verifier"
    assert set(metadata) == {p.key for p in model.metadata_props}
    lint = export[export.index('id="lint-eran"'):]
    findings = table_rows(lint)
    assert any(row[1] == "BatchNormalization" for row in findings)
    assert 'id="onnx-check"' in export and "exact within the certified bounds" in export


def test_the_report_json_has_the_export(models, capsys):
    path = models / "r.html"
    status, doc = call_json(capsys, "report", "export_models.py:plain", "--input-shape", "4",
                            "-o", str(path), "--samples", "2", "-q", "--export", "--check")
    assert status == 0 and doc["ok"] is True
    assert doc["export"]["exported"] is True and doc["export"]["path"] is None
    assert doc["export"]["profile"] == "canonical" and doc["export"]["batch_axis"] == "N"
    assert doc["onnx_exactness"]["ok"] is True and doc["exactness"]["ok"] is True


def test_export_options_without_export_are_a_usage_error(tmp_path, capsys):
    status, _, err = call(capsys, "report", "mlp", "-o", str(tmp_path / "r.html"),
                          "--lint", "eran", "--check")
    assert status == 2 and "--lint, --check shape(s) the report's ONNX export section" in err
    assert not (tmp_path / "r.html").exists()


def test_a_rejected_models_report_says_nothing_was_exported(tmp_path, capsys):
    path = tmp_path / "r.html"
    status, doc = call_json(capsys, "report", "sigmoid_mlp", "-o", str(path), "--export")
    assert status == 1 and doc["export"] is None
    assert "Not exported: the model does not convert" in section(path.read_text(), "export")


def test_a_refused_export_is_the_reports_verdict(models, capsys):
    path = models / "r.html"
    status, out, _ = call(capsys, "report", "export_models.py:pool", "--input-shape", "1,4,4",
                          "-o", str(path), "--samples", "2", "-q", "--export")
    assert status == 1 and "ONNX export refused (canonical profile)" in out
    page = path.read_text()
    assert '<div class="verdict bad" id="verdict">' in page
    assert "Refused by the canonical profile: cannot export node" in section(page, "export")


def test_verdict_adds_the_export_to_a_good_headline_only():
    report = ncet.diagnose(*_example("mlp"))
    asked = ExportFacts("canonical", None, DEFAULT_OPSET)
    assert verdict(report, None, asked) == (
        "ok", "converts (exactness not checked); exported to ONNX (canonical profile)")
    refused = ExportFacts("verifier", 1, DEFAULT_OPSET, error="cannot export node 'x'")
    assert verdict(report, None, refused)[0] == "bad"
    rejected = ncet.diagnose(*_example("sigmoid_mlp"))
    assert verdict(rejected, None, refused) == verdict(rejected, None)
    page = render_report(report, title="mlp", export=refused)
    assert "cannot export node &#x27;x&#x27;" in section(page, "export")


def _example(name: str) -> tuple:
    model, shapes = load_example(name)
    return (model, *shapes)
