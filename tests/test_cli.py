"""The installed `ncet` console script, run as a subprocess: every command and exit status."""

from __future__ import annotations

import argparse
import io
import json
import math
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import ncet
from ncet import check_exactness
from ncet.cli import commands, main, progress
from ncet.cli.parser import build_parser, input_shape
from ncet.cli.phrasing import cli_report
from ncet.cli.progress import ProgressBar
from ncet.cli.records import dumps
from ncet.examples import load_example


def _installed_script() -> str:
    beside = Path(sys.executable).parent / "ncet"
    found = str(beside) if beside.exists() else shutil.which("ncet")
    assert found, "the ncet console script is not installed: pip install -e '.[test]'"
    return found


NCET = _installed_script()

MODELS = textwrap.dedent('''
    """Models for the command-line tests."""
    import torch
    from torch import nn


    class Aliasing(nn.Module):
        """Converts, but eager and traced execution differ: y += 1 mutates the alias z."""

        def forward(self, x):
            y = x * 1.0
            z = y
            y += 1.0
            return z * 2.0


    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x, y):
            return torch.relu(self.fc(x - y))


    def build():
        """A freshly built model, so in training mode: its dropout is rejected without --eval."""
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))


    def needs_arguments(width):
        return nn.Linear(width, width)


    def not_a_model():
        return 42
''')


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the installed script; never raises on a non-zero exit status."""
    return subprocess.run([NCET, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def run_json(*args: str, cwd: Path | None = None) -> tuple[int, dict]:
    result = run(*args, "--json", cwd=cwd)
    return result.returncode, json.loads(result.stdout)


def call(capsys, *args: str) -> tuple[int, str, str]:
    """Run the command in this process (cheaper than a subprocess, for error messages)."""
    try:
        status = main(list(args))
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def models(tmp_path, monkeypatch) -> Path:
    """A model file in a fresh folder, made the working directory; whatever loading a target
    adds to sys.path and sys.modules is undone afterwards."""
    (tmp_path / "models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("_ncet_target_") or name in ("models", "broken"):
            del sys.modules[name]


# --- help and usage --------------------------------------------------------------------------


def test_help_lists_every_command_and_the_exit_statuses():
    result = run("--help")
    assert result.returncode == 0, result.stderr
    for command in ("demo", "inspect", "check", "convert", "show", "report"):
        assert f"    {command}" in result.stdout
    assert "exit status" in result.stdout and "--input-shape 3,32,32" in result.stdout


@pytest.mark.parametrize("command", ["demo", "inspect", "check", "convert", "show", "report"])
def test_every_command_has_help_with_examples(command, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([command, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert f"usage: ncet {command}" in text and "examples:" in text and "--json" in text


def test_python_dash_m_runs_the_same_command():
    result = subprocess.run([sys.executable, "-m", "ncet", "--version"], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.startswith("ncet ")


def test_no_command_is_a_usage_error(capsys):
    status, _, err = call(capsys)
    assert status == 2 and "usage: ncet" in err


def test_a_bad_input_shape_says_what_to_type():
    result = run("inspect", "mlp", "--input-shape", "3x32x32")
    assert result.returncode == 2
    assert "'3x32x32' is not a per-sample shape" in result.stderr
    assert "--input-shape 3,32,32" in result.stderr


@pytest.mark.parametrize("text, shape", [("16", (16,)), ("3,32,32", (3, 32, 32)),
                                         (" 3, 32 ", (3, 32)), ("(3, 4)", (3, 4)), ("5,", (5,))])
def test_input_shapes_parse(text, shape):
    assert input_shape(text) == shape


@pytest.mark.parametrize("text", ["", "3x32", "3,,4", "0,3", "-1", "3.5", "a,b", "[]"])
def test_malformed_input_shapes_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="e.g. --input-shape 3,32,32"):
        input_shape(text)


def test_an_unimportable_target_names_the_module_and_the_reason(tmp_path):
    result = run("inspect", "nosuch.models:Net", "--input-shape", "3", cwd=tmp_path)
    assert result.returncode == 2
    assert "cannot import module 'nosuch.models'" in result.stderr
    assert "No module named 'nosuch'" in result.stderr


@pytest.mark.parametrize("target, expected", [
    ("models.py:missing", "has no attribute 'missing'; it has Aliasing, TwoInputs, build"),
    ("models.py:needs_arguments", "with no arguments failed: TypeError"),
    ("models.py:not_a_model", "returned an object of type int, not an nn.Module"),
    ("gone.py:build", "there is no file 'gone.py'"),
    ("residual", "neither package.module:factory, path/to/file.py:factory nor a bundled"),
    ("models.py:", "names no factory after the colon"),
])
def test_targets_that_cannot_be_loaded_are_usage_errors(models, capsys, target, expected):
    status, _, err = call(capsys, "inspect", target, "--input-shape", "16")
    assert status == 2 and expected in err


def test_a_file_that_fails_to_import_shows_the_error(models, capsys):
    (models / "broken.py").write_text("def build(:\n    pass\n")
    status, _, err = call(capsys, "inspect", "broken.py:build", "--input-shape", "4")
    assert status == 2 and "SyntaxError" in err


def test_a_target_without_shapes_asks_for_them(models, capsys):
    status, _, err = call(capsys, "inspect", "models.py:build")
    assert status == 2 and "give one --input-shape per forward() argument" in err


# --- demo and inspect ------------------------------------------------------------------------


def test_demo_converts_and_evaluates():
    result = run("demo", "mlp")
    assert result.returncode == 0, result.stderr
    assert "8 FX nodes (8 mapped); converts" in result.stdout
    assert "max |evaluate(ir) - model(x)| in float64 on 8 inputs: 0" in result.stdout


def test_demo_of_a_rejected_example_fails_with_json():
    status, doc = run_json("demo", "sigmoid_mlp")
    assert status == 1 and doc["command"] == "demo" and not doc["ok"]
    assert [p["code"] for p in doc["conversion"]["problems"]] == ["unsupported-function"]
    assert doc["evaluate"] is None


def test_inspect_prints_the_table_and_ends_with_the_verdict():
    result = run("inspect", "residual_cnn")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["node", "fx", "op"]
    assert any(line.startswith("block1_conv1 ") for line in lines)
    assert lines[-1] == "residual_cnn: 33 FX nodes (32 mapped, 1 lifted); converts"


def test_inspect_lists_every_problem_of_a_rejected_model():
    model, shapes = load_example("many_problems")
    expected = cli_report(ncet.diagnose(model, *shapes)).errors  # hints name the flags
    result = run("inspect", "many_problems")
    assert result.returncode == 1
    assert f"{len(expected)} problem(s):" in result.stdout
    for row in expected:
        assert f"- {row.message}" in result.stdout
    assert result.stdout.rstrip().endswith(f"rejected: {len(expected)} problem(s)")


def test_inspect_json_has_stable_keys():
    status, doc = run_json("inspect", "many_problems")
    assert status == 1
    assert set(doc) == {"schema_version", "ncet_version", "command", "target", "input_shapes",
                        "eval", "rewrite", "ok", "conversion"}
    assert doc["input_shapes"] == [[3, 8, 8]] and doc["ok"] is False
    conversion = doc["conversion"]
    assert set(conversion) == {"ok", "summary", "counts", "rows", "problems", "graph"}
    assert set(conversion["rows"][0]) == {"node", "fx_op", "spelling", "module_path",
                                          "module_type", "op_type", "status", "code",
                                          "message", "hint", "shape", "location",
                                          "source_text", "rewrite"}
    assert {p["code"] for p in conversion["problems"]} >= {"inplace", "dropout-training"}
    assert conversion["counts"]["unsupported"] == 4 and conversion["graph"] is None


def test_a_file_target_is_put_in_eval_mode_only_when_asked(models, capsys):
    status, out, _ = call(capsys, "inspect", "models.py:build", "--input-shape", "16")
    assert status == 1 and "[dropout-training]" in out
    status, doc = run_json("inspect", "models.py:build", "--input-shape", "16", "--eval",
                           cwd=models)
    assert status == 0 and doc["ok"] and doc["eval"] is True
    assert doc["conversion"]["graph"] == {"nodes": 6, "constants": 4}


def test_a_module_target_with_two_inputs(models, capsys):
    status, out, _ = call(capsys, "inspect", "models:TwoInputs", "--input-shape", "4",
                          "--input-shape", "4", "--json")
    assert status == 0, out
    assert json.loads(out)["input_shapes"] == [[4], [4]]


def test_too_few_input_shapes_is_reported_as_a_rejection(models, capsys):
    status, out, _ = call(capsys, "inspect", "models:TwoInputs", "--input-shape", "4")
    assert status == 1 and "[input-count]" in out


# --- check -----------------------------------------------------------------------------------


def test_check_shows_progress_and_certifies_an_exact_model():
    result = run("check", "mlp", "--samples", "4")
    assert result.returncode == 0, result.stderr
    assert "checking 8 nodes on 12 samples [" in result.stderr and "100%" in result.stderr
    assert "exact within the certified bounds on 12 samples" in result.stdout
    assert "layers_3  LeakyReLU" in result.stdout


@pytest.mark.parametrize("quiet", [False, True], ids=["progress-bar", "quiet"])
def test_check_runs_in_the_default_chunks(monkeypatch, capsys, quiet):
    # the progress bar moves as nodes are walked, so the check is not cut into small chunks
    # for it (chunks of 5 samples made a 300-node check 10-14x slower)
    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs)
        return check_exactness(*args, **kwargs)

    monkeypatch.setattr(commands, "check_exactness", recording)
    status, _, err = call(capsys, "check", "mlp", "--samples", "4", *(["-q"] if quiet else []))
    assert status == 0 and len(seen) == 1 and "chunk_size" not in seen[0]
    if quiet:
        assert seen[0]["progress"] is False and err == ""
    else:
        assert isinstance(seen[0]["progress"], ProgressBar) and "100%" in err


def test_progress_bar_writes_one_line_off_a_terminal():
    stream = io.StringIO()
    bar = ProgressBar("checking", stream)
    for done in range(0, 101, 5):
        bar(done, 100)
    bar(100, 100)  # a second "done" adds nothing
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("checking [" + "#" * 30 + "] 100%")


def test_progress_bar_off_a_terminal_writes_a_sparse_line_in_a_long_check(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    stream = io.StringIO()
    bar = ProgressBar("checking", stream)
    for done in range(0, 101, 5):  # 20 steps of 10 s: 200 s
        now[0] += 10.0
        bar(done, 100)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 + 200 // int(progress.QUIET_SECONDS)  # one per 30 s, and the end
    assert lines[0] == "checking [" + "#" * 3 + "." * 27 + "]  10% 30.0s"  # 30 s after start
    assert lines[-1].startswith("checking [" + "#" * 30 + "] 100% 210.0s")


def test_progress_bar_redraws_one_line_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    bar = ProgressBar("checking", stream)
    for done in range(0, 101, 5):
        bar(done, 100)
    assert stream.getvalue().count("\r") == 21 and stream.getvalue().count("\n") == 1


def test_check_json_reports_every_node(models, capsys):
    status, out, _ = call(capsys, "check", "models.py:build", "--input-shape", "16", "--eval",
                          "--samples", "2", "--quiet", "--json")
    doc = json.loads(out)
    assert status == 0 and doc["ok"]
    exactness = doc["exactness"]
    assert exactness["ok"] and exactness["first_violation"] is None
    assert exactness["samples"] == 6 and exactness["arithmetic"]["certified"] is True
    assert [n["node"] for n in exactness["nodes"]] == ["_0", "_1", "_2", "_3"]
    assert set(exactness["nodes"][0]["local"]) == {"max_error", "bound", "error_at_worst",
                                                   "ratio", "median_ratio", "ulps",
                                                   "violations"}
    node = exactness["nodes"][0]
    assert node["checked"] is True and node["suspicious"] is False
    assert node["sensitivity"] > 0 and node["suspicion"] >= 0
    assert exactness["unchecked"] == [] and exactness["suspicious"] == []
    assert exactness["outputs"][0]["violations"] == 0
    assert exactness["root_causes"] == [] and exactness["not_certified"] == []
    assert {n["status"] for n in exactness["nodes"]} <= {"certified", "vacuous"}
    assert exactness["outputs"][0]["status"] in ("certified", "vacuous")
    assert exactness["outputs"][0]["traced_differs"] is False


def test_check_fails_when_eager_execution_differs(models):
    status, doc = run_json("check", "models.py:Aliasing", "--input-shape", "4",
                           "--samples", "2", "-q", cwd=models)
    assert status == 1 and doc["conversion"]["ok"] and not doc["ok"]
    assert doc["exactness"]["traced_differs"] is True
    assert doc["exactness"]["outputs"][0]["traced_differs"] is True
    assert doc["exactness"]["outputs"][0]["violations"] > 0


def test_check_of_a_rejected_model_does_not_check(capsys):
    status, out, _ = call(capsys, "check", "sigmoid_mlp", "-q")
    assert status == 1 and "not checked for exactness: the model does not convert" in out


# --- convert and show ------------------------------------------------------------------------


def test_convert_then_show_round_trips(tmp_path):
    path = tmp_path / "mlp.ncet"
    result = run("convert", "mlp", "-o", str(path))
    assert result.returncode == 0, result.stderr
    assert f"wrote {path}: GraphIR with 8 nodes and 6 constants" in result.stdout
    model, shapes = load_example("mlp")
    expected = ncet.convert(model, *shapes)
    loaded = ncet.load(path)
    assert [repr(n) for n in loaded.nodes] == [repr(n) for n in expected.nodes]
    for name, tensor in expected.constants.items():
        assert torch.equal(loaded.constants[name], tensor)

    shown = run("show", str(path))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.rstrip("\n") == repr(loaded)

    status, doc = run_json("show", str(path))
    assert status == 0 and doc["ok"] and doc["error"] is None
    graph = doc["graph"]
    assert [n["name"] for n in graph["nodes"]] == [n.name for n in loaded.nodes]
    assert graph["inputs"] == ["x"] and graph["outputs"] == ["layers_5"]
    assert graph["nodes"][1]["attrs"] == {"weight": "layers.0.weight", "bias": "layers.0.bias"}
    assert graph["constants"][0]["shape"] == [32, 16]


def test_convert_of_a_rejected_model_writes_nothing(tmp_path):
    path = tmp_path / "out.ncet"
    status, doc = run_json("convert", "batch_mixing", "-o", str(path))
    assert status == 1 and doc["output"] is None and not path.exists()
    assert [p["code"] for p in doc["conversion"]["problems"]] == ["batch-not-preserved"]


def test_show_of_a_corrupted_file_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.ncet"
    model, shapes = load_example("mlp")
    ncet.save(ncet.convert(model, *shapes), path)
    blob = bytearray(path.read_bytes())
    blob[20:40] = b"x" * 20  # inside the JSON header
    path.write_bytes(bytes(blob))
    result = run("show", str(path))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"ncet show: error: {str(path)!r} is not a valid GraphIR")
    status, doc = run_json("show", str(path))
    assert status == 1 and doc["ok"] is False and doc["graph"] is None
    assert "is not a valid GraphIR file" in doc["error"]


def test_show_takes_the_meaning_checks_limits(tmp_path, capsys):
    """A limit below what the file's check needs refuses it, naming the flag that raises
    it; a limit above it shows the file, as the default does."""
    path = tmp_path / "lenet.ncet"
    model, shapes = load_example("lenet")
    ncet.save(ncet.convert(model, *shapes), path)
    status, out, err = call(capsys, "show", str(path), "--max-check-work", "1")
    assert status == 1 and out == "" and "work limit" in err and "--max-check-work N" in err
    assert err.count("\n") == 1  # one line
    status, out, err = call(capsys, "show", str(path), "--max-check-bytes", "1")
    assert status == 1 and "memory limit" in err and "--max-check-bytes N" in err
    status, out, _ = call(capsys, "show", str(path), "--max-check-bytes", str(2**40),
                          "--max-check-work", str(10**15))
    assert status == 0 and out == repr(ncet.load(path)) + "\n"
    status, _, err = call(capsys, "show", str(path), "--max-check-bytes", "0")
    assert status == 2 and "not a positive integer" in err


def test_show_of_a_missing_file_is_a_usage_error(tmp_path, capsys):
    status, _, err = call(capsys, "show", str(tmp_path / "none.ncet"))
    assert status == 2 and "no file" in err and "ncet convert TARGET -o model.ncet" in err


# --- report ----------------------------------------------------------------------------------


def test_report_writes_one_file_and_exits_by_the_verdict(tmp_path):
    path = tmp_path / "report.html"
    status, doc = run_json("report", "sigmoid_mlp", "-o", str(path))
    assert status == 1 and doc["exactness"] is None
    assert doc["output"]["path"] == str(path) and path.stat().st_size == doc["output"]["bytes"]
    assert "unsupported-function" in path.read_text()


# --- JSON and imports ------------------------------------------------------------------------


def test_json_output_is_strict_even_for_infinite_ratios():
    text = dumps({"ratio": math.inf, "low": -math.inf, "odd": math.nan, "ok": [1.5, None]})
    assert json.loads(text) == {"ratio": "inf", "low": "-inf", "odd": "nan", "ok": [1.5, None]}


def test_importing_ncet_imports_neither_the_command_nor_matplotlib():
    code = ("import sys, ncet; import ncet.render.html, ncet.render.plots; "
            "print('matplotlib' in sys.modules, 'ncet.cli' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=600)
    assert result.stdout.split() == ["False", "False"], result.stderr


# --- hostile text, exits and interrupts --------------------------------------------------------

HOSTILE_NAME = "\x1b[2J\x1b[Hall checks passed\r\x07\ud800"


def test_show_escapes_control_characters_and_unencodable_names(tmp_path, capsys):
    """A file's names reach the terminal escaped: no escape sequence, no crash on a lone
    surrogate (which JSON, and so load, accepts)."""
    import dataclasses

    model, shapes = load_example("mlp")
    ir = ncet.convert(model, *shapes)
    (linear,) = [n for n in ir.nodes if n.op_type == "Linear"][:1]
    old = linear.attrs["weight"]
    nodes = tuple(dataclasses.replace(n, attrs={**n.attrs, "weight": HOSTILE_NAME})
                  if n.name == linear.name else n for n in ir.nodes)
    constants = {HOSTILE_NAME if k == old else k: v for k, v in ir.constants.items()}
    path = tmp_path / "hostile.ncet"
    ncet.save(ncet.GraphIR(nodes, constants), path)
    status, out, err = call(capsys, "show", str(path))
    assert status == 0, err
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b[Hall checks passed\\x0d\\x07\\ud800" in out


def test_a_target_that_exits_is_a_usage_error_not_a_success(models, capsys):
    (models / "exits.py").write_text("import sys\nsys.exit(0)\n")
    status, out, err = call(capsys, "check", "exits.py:build", "--input-shape", "4")
    assert status == 2 and "called sys.exit(0)" in err and out == ""


def test_ctrl_c_exits_130_with_one_line(models, capsys):
    (models / "slow.py").write_text("def build():\n    raise KeyboardInterrupt\n")
    status, out, err = call(capsys, "check", "slow.py:build", "--input-shape", "4")
    assert status == 130 and err == "ncet: interrupted\n"


@pytest.mark.parametrize("args", [("--samples", "1000000000000"),
                                  ("--input-shape", "65536,65536,65536")])
def test_huge_values_are_usage_errors(args, capsys):
    status, _, err = call(capsys, "check", "mlp", *args)
    assert status == 2 and "more than" in err and "Traceback" not in err


@pytest.mark.parametrize("seed", ["-1", "18446744073709551616", "1.5"])
def test_a_seed_out_of_range_is_a_usage_error(seed, capsys):
    status, _, err = call(capsys, "check", "mlp", "--seed", seed)
    assert status == 2 and "is not a seed" in err and "Traceback" not in err
