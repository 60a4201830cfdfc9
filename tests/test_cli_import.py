"""`ncet import FILE.onnx`: the per-node mapping of an ONNX file, its batch axis, every
refused node, and the certificate against onnxruntime running the original file; `--json`,
the exit statuses, unreadable and hostile files (issue 32)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ncet
from ncet.onnx.onnx_file import READING_REASONS
from tests.corpus import corpus_root
from tests.test_cli import call

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

FAKE = "exact within the certified bounds on 96 samples"
"""What a hostile node name would like to print as a line of its own."""

DOC_KEYS = {"schema_version", "ncet_version", "command", "path", "ok", "error", "onnx",
            "batch_mode", "conversion", "exactness", "output", "simplification", "export",
            "lint", "onnx_exactness"}
ROW_KEYS = {"node", "onnx_op", "kind", "index", "op_type", "status", "code", "message", "hint",
            "shape", "location"}


def _save(tmp_path, nodes, initializers, *, name="net.onnx", batch="N", features=4,
          outputs=("y",), opset=17):
    """An ONNX file of `nodes` reading x [batch, features], written to tmp_path."""
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [batch, features])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _weights(seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w1": rng.standard_normal((3, 4)).astype(np.float32),
            "b1": rng.standard_normal(3).astype(np.float32),
            "w2": rng.standard_normal((2, 3)).astype(np.float32)}


def mlp(tmp_path, *, names=("fc1", "act", "fc2"), seed=0, **options):
    """Gemm -> Relu -> Gemm (no bias), a symbolic batch axis unless `batch` says otherwise."""
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name=names[0], transB=1),
             helper.make_node("Relu", ["h"], ["r"], name=names[1]),
             helper.make_node("Gemm", ["r", "w2"], ["y"], name=names[2], transB=1)]
    return _save(tmp_path, nodes, _weights(seed), **options)


def refused(tmp_path):
    """Gemm -> Sigmoid -> Gemm -> Softmax, with Relu between: two nodes outside."""
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
             helper.make_node("Sigmoid", ["h"], ["s"], name="squash"),
             helper.make_node("Gemm", ["s", "w2"], ["z"], name="fc2", transB=1),
             helper.make_node("Softmax", ["z"], ["y"], name="probabilities", axis=1)]
    return _save(tmp_path, nodes, _weights(), name="refused.onnx")


def doc_of(capsys, *args) -> tuple[int, dict, str]:
    status, out, err = call(capsys, "import", *args, "--json")
    return status, json.loads(out), err


# --- the mapping and the certificate ------------------------------------------------------------


def test_import_prints_the_mapping_then_the_certificate(tmp_path, capsys):
    path = mlp(tmp_path)
    status, out, err = call(capsys, "import", str(path), "--samples", "4")
    assert status == 0, out + err
    lines = out.splitlines()
    assert lines[0].split() == ["node", "onnx", "op", "index", "op_type", "status", "shape"]
    rows = {line.split()[0]: line.split() for line in lines[1:5]}
    assert rows["x"][:6] == ["x", "graph", "input", "input", "0", "Input"]
    assert rows["fc1"][:4] == ["fc1", "Gemm", "0", "Linear"]
    assert rows["act"][:4] == ["act", "Relu", "1", "ReLU"] and rows["act"][-1] == "[3]"
    assert rows["fc2"][:5] == ["fc2", "Gemm", "2", "Linear", "mapped"]
    report = ncet.diagnose_onnx(path)
    assert f"batch axis: {report.notes[0]}" in lines and "symbolic" in report.notes[0]
    assert f"{path}: 4 {report.unit} (4 mapped); imports to" in out
    check = ncet.check_onnx(report.graph, path, samples_per_scale=4)
    assert check.ok
    assert f"onnxruntime running {path} against the GraphIR:" in lines
    assert check.summary().splitlines()[0] in lines  # onnxruntime as the oracle, seed 0
    nodes = len(report.graph.nodes)
    assert f"checking {nodes} nodes in onnxruntime on 12 samples" in err  # the progress


def test_quiet_hides_the_progress_and_no_check_skips_the_certificate(tmp_path, capsys):
    path = mlp(tmp_path)
    status, out, err = call(capsys, "import", str(path), "--samples", "2", "-q")
    assert status == 0 and err == "" and "exact within the certified bounds" in out
    status, out, err = call(capsys, "import", str(path), "--no-check")
    assert status == 0 and err == ""
    assert "onnxruntime running" not in out
    assert out.splitlines()[-1].startswith("not certified: --no-check")


def test_json_has_the_rows_the_notes_and_the_certificate(tmp_path, capsys):
    path = mlp(tmp_path)
    status, doc, _ = doc_of(capsys, str(path), "--samples", "3", "--seed", "7")
    assert status == 0 and set(doc) == DOC_KEYS
    assert doc["command"] == "import" and doc["path"] == str(path) and doc["ok"] is True
    assert doc["error"] is None and doc["output"] is None and doc["batch_mode"] == "symbolic"
    assert doc["onnx"] == {"ir_version": 8, "opsets": {"ai.onnx": 17}, "producer": "",
                           "nodes": 3, "inputs": ["x"], "outputs": ["y"], "initializers": 3}
    conversion = doc["conversion"]
    assert set(conversion) == {"ok", "summary", "notes", "counts", "rows", "problems", "graph"}
    assert conversion["notes"] == list(ncet.diagnose_onnx(path).notes)
    assert all(set(row) == ROW_KEYS for row in conversion["rows"])
    assert [(r["node"], r["onnx_op"], r["kind"], r["index"], r["op_type"], r["status"])
            for r in conversion["rows"]] == [
        ("x", "graph input", "input", 0, "Input", "mapped"),
        ("fc1", "Gemm", "node", 0, "Linear", "mapped"),
        ("act", "Relu", "node", 1, "ReLU", "mapped"),
        ("fc2", "Gemm", "node", 2, "Linear", "mapped")]
    assert conversion["problems"] == [] and conversion["counts"]["mapped"] == 4
    exactness = doc["exactness"]
    assert exactness["ok"] is True and exactness["samples"] == 9  # 3 per scale, 3 scales
    assert "seed 7" in exactness["inputs"] and "onnxruntime" in exactness["inputs"]
    assert 0 < exactness["worst_ratio"] <= 1
    assert exactness["worst_ratio"] == max(
        r for n in exactness["nodes"] for r in (n["local"]["ratio"], n["end_to_end"]["ratio"]))


def test_json_without_the_check_has_no_certificate(tmp_path, capsys):
    status, doc, err = doc_of(capsys, str(mlp(tmp_path)), "--no-check")
    assert status == 0 and doc["ok"] is True and doc["exactness"] is None and err == ""


def test_a_fixed_batch_of_one_is_read_as_the_batch_axis(tmp_path, capsys):
    path = mlp(tmp_path, batch=1)
    status, doc, _ = doc_of(capsys, str(path), "--samples", "2", "-q")
    assert status == 0 and doc["batch_mode"] == "fixed"
    assert "size 1" in doc["conversion"]["notes"][0] and doc["exactness"]["ok"]


def test_output_saves_the_imported_graphir(tmp_path, capsys):
    path, saved = mlp(tmp_path), tmp_path / "net.ncet"
    status, out, _ = call(capsys, "import", str(path), "--no-check", "-o", str(saved))
    assert status == 0 and f"wrote {saved}: GraphIR with" in out
    assert ncet.compare(ncet.load(saved), ncet.from_onnx(path)).same
    status, doc, _ = doc_of(capsys, str(path), "--no-check", "-o", str(saved))
    assert doc["output"] == {"path": str(saved), "bytes": saved.stat().st_size,
                             "nodes": len(ncet.load(saved).nodes),
                             "constants": len(ncet.load(saved).constants)}


def test_an_export_of_ncet_imports_and_is_certified(tmp_path, capsys):
    model, shapes = ncet.examples.load_example("mlp")
    ir = ncet.convert(model, *shapes)
    path = tmp_path / "mlp.onnx"
    ncet.to_onnx(ir, path)
    status, doc, _ = doc_of(capsys, str(path), "--samples", "2", "-q")
    assert status == 0 and doc["ok"] and doc["exactness"]["ok"]
    assert doc["batch_mode"] == "symbolic"


def test_export_rewrites_the_file_as_ncet_exports_it(tmp_path, capsys):
    path, out_path = mlp(tmp_path), tmp_path / "verifier.onnx"
    args = [str(path), "--samples", "2", "-q", "--export", str(out_path), "--profile",
            "verifier", "--batch", "1", "--lint", "eran", "--check"]
    status, out, err = call(capsys, "import", *args)
    lint = ncet.lint_onnx(out_path, "eran")
    assert [f.node for f in lint.findings] == ["y/Gemm/2"]  # fc2 has no bias: ERAN refuses
    assert status == 1, out + err  # a lint finding: exit status 1, the file still written
    assert f"wrote {out_path}: ONNX opset 18, verifier profile" in out
    assert "y/Gemm/2 (Gemm) [net.onnx node 2]: rejects" in out
    ir = ncet.from_onnx(path)
    assert ncet.check_onnx(ir, out_path, samples_per_scale=2).ok
    status, doc, _ = doc_of(capsys, *args)
    assert status == 1 and not doc["ok"] and doc["exactness"]["ok"]
    assert doc["export"]["path"] == str(out_path) and doc["export"]["profile"] == "verifier"
    assert doc["export"]["batch_axis"] == 1 and doc["lint"]["eran"]["ok"] is False
    assert doc["onnx_exactness"]["ok"] is True
    status, doc, _ = doc_of(capsys, *args[:-3], "--lint", "marabou", "--check")
    assert doc["lint"]["marabou"]["ok"] is ncet.lint_onnx(out_path, "marabou").ok
    assert status == (0 if doc["lint"]["marabou"]["ok"] else 1)


def test_without_export_there_is_no_export(tmp_path, capsys):
    status, doc, _ = doc_of(capsys, str(mlp(tmp_path)), "--no-check")
    assert doc["export"] is None and doc["lint"] == {} and doc["onnx_exactness"] is None


@pytest.mark.parametrize("options, expected", [
    (["--profile", "verifier"], "add --export FILE"),
    (["--lint", "eran"], "add --export FILE"),
    (["--export", "x.onnx", "--profile", "nosuch"], "is not an export profile"),
    (["--export", "x.onnx", "--lint", "nosuch"], "is not a tool NCET lints for"),
])
def test_export_options_are_checked_before_reading(tmp_path, capsys, options, expected):
    status, out, err = call(capsys, "import", str(mlp(tmp_path)), *options)
    assert status == 2 and out == "" and expected in err


# --- refused files ------------------------------------------------------------------------------


def test_a_refused_file_lists_every_offending_node(tmp_path, capsys):
    path = refused(tmp_path)
    expected = ncet.diagnose_onnx(path).errors
    assert [r.fx_name for r in expected] == ["squash", "probabilities"]
    status, out, err = call(capsys, "import", str(path))
    assert status == 1, err
    assert f"{len(expected)} problem(s):" in out
    for row in expected:
        assert f"- {row.message}" in out
        assert f"[{row.code}]" in row.message and row.hint and row.hint[:1].upper() + \
            row.hint[1:] in row.message
    assert "squash" in out and "unsupported:onnx-unsupported-op" in out
    assert out.splitlines()[-1] == "not certified: the file does not import to GraphIR"
    assert "checking" not in err  # nothing was run


def test_a_refused_file_in_json_and_nothing_written(tmp_path, capsys):
    path, saved = refused(tmp_path), tmp_path / "net.ncet"
    status, doc, _ = doc_of(capsys, str(path), "-o", str(saved))
    assert status == 1 and doc["ok"] is False and doc["exactness"] is None
    assert doc["output"] is None and not saved.exists()
    problems = doc["conversion"]["problems"]
    assert [(p["node"], p["onnx_op"], p["index"], p["code"]) for p in problems] == [
        ("squash", "Sigmoid", 1, "onnx-unsupported-op"),
        ("probabilities", "Softmax", 3, "onnx-unsupported-op")]
    assert all(p["hint"] for p in problems) and doc["conversion"]["graph"] is None
    exported = tmp_path / "net.onnx"
    status, out, _ = call(capsys, "import", str(path), "-o", str(saved), "--export",
                          str(exported))
    assert status == 1 and f"nothing written to {saved}" in out
    assert f"nothing written to {exported}" in out and not exported.exists()


def test_a_certificate_that_fails_is_exit_status_1(tmp_path, capsys, monkeypatch):
    """The GraphIR imported from one file, checked against another whose weights differ: the
    certificate finds the constants that differ from the file's (check_onnx's own verdict)."""
    path, other = mlp(tmp_path), mlp(tmp_path, seed=1, name="other.onnx")
    check = ncet.check_onnx
    monkeypatch.setattr(ncet, "check_onnx", lambda ir, _, **kw: check(ir, other, **kw))
    status, out, _ = call(capsys, "import", str(path), "--samples", "2", "-q")
    assert status == 1
    assert "VIOLATION at node 'h' (Linear, onnx Gemm, net.onnx node 0): constant 'b1' " \
        "differs from the file's value" in out.splitlines()
    status, doc, _ = doc_of(capsys, str(path), "--samples", "2", "-q")
    assert status == 1 and doc["ok"] is False and doc["conversion"]["ok"] is True
    assert doc["exactness"]["ok"] is False and doc["exactness"]["first_violation"] == "h"


def test_a_file_onnxruntime_cannot_load_is_not_certified(tmp_path, capsys):
    path = mlp(tmp_path, opset=99)  # NCET reads it; onnxruntime knows no opset 99
    status, out, err = call(capsys, "import", str(path), "--samples", "2", "-q")
    assert status == 1, out + err
    assert "not certified:" in out and "[onnx-unloadable]" in out
    status, doc, _ = doc_of(capsys, str(path), "--samples", "2", "-q")
    assert status == 1 and doc["error"]["code"] == "onnx-unloadable"
    assert doc["conversion"]["ok"] is True and doc["exactness"] is None


# --- files that cannot be read ------------------------------------------------------------------


def test_a_file_that_does_not_parse_is_one_line_on_stderr(tmp_path, capsys):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x08\x07garbage that is no protobuf \xff\xff\xff")
    status, out, err = call(capsys, "import", str(path))
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("ncet import: error: ")
    assert "[onnx-unparsable]" in err and "Traceback" not in err
    status, doc, _ = doc_of(capsys, str(path))
    assert status == 1 and doc["ok"] is False and set(doc) == DOC_KEYS
    assert doc["error"]["code"] == "onnx-unparsable" and doc["conversion"] is None


def test_external_data_outside_the_folder_is_refused_before_reading(tmp_path, capsys):
    path = mlp(tmp_path)
    model = onnx.load(path)
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "../../../../etc/passwd"), ("length", "48")):
        weight.external_data.add(key=key, value=value)
    onnx.save(model, path)
    status, out, err = call(capsys, "import", str(path))
    assert status == 1 and out == "" and err.count("\n") == 1, err
    assert "[onnx-external-data-path]" in err and "Traceback" not in err
    assert "onnx-external-data" in READING_REASONS


def _hostile(tmp_path, what: str):
    """A file built to break a reader: declared sizes beyond memory, a cycle, an operand no
    one defines, a weight whose bytes do not fill its shape, zero bytes."""
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    if what == "empty":
        path = tmp_path / "empty.onnx"
        path.write_bytes(b"")
        return path
    if what == "huge input":
        path = _save(tmp_path, relu, {}, features=2**62)
        return path
    if what == "huge input, several axes":
        model = onnx.load(_save(tmp_path, relu, {}))
        dims = model.graph.input[0].type.tensor_type.shape.dim
        dims[1].dim_value = 2**40
        dims.add().dim_value = 2**40
        onnx.save(model, tmp_path / "huge.onnx")
        return tmp_path / "huge.onnx"
    if what == "cycle":
        nodes = [helper.make_node("Add", ["x", "b"], ["a"]),
                 helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Relu", ["a"], ["y"])]
        return _save(tmp_path, nodes, {})
    if what == "undefined operand":
        return _save(tmp_path, [helper.make_node("Add", ["x", "nowhere"], ["y"])], {})
    assert what == "short weight"
    path = mlp(tmp_path)
    model = onnx.load(path)
    model.graph.initializer[0].raw_data = b"\0" * 5
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("what", ["empty", "huge input", "huge input, several axes", "cycle",
                                  "undefined operand", "short weight"])
def test_a_hostile_file_fails_without_a_traceback(tmp_path, capsys, what):
    path = _hostile(tmp_path, what)
    status, out, err = call(capsys, "import", str(path), "--samples", "1", "-q")
    assert status == 1, out + err
    assert "Traceback" not in out + err and err.count("\n") <= 1
    assert err.startswith("ncet import: error: ") or "not certified:" in out, out + err
    status, doc, _ = doc_of(capsys, str(path), "--samples", "1", "-q")
    assert status == 1 and doc["ok"] is False and set(doc) == DOC_KEYS


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_a_path_that_is_no_file_is_a_usage_error(tmp_path, capsys, what):
    path = tmp_path / "nothing.onnx" if what == "missing" else tmp_path
    status, out, err = call(capsys, "import", str(path))
    assert status == 2 and out == ""
    assert ("no file" if what == "missing" else "is a folder") in err
    assert "ncet import net.onnx" in err


def test_an_unwritable_output_is_a_usage_error(tmp_path, capsys):
    status, _, err = call(capsys, "import", str(mlp(tmp_path)), "--no-check", "-o",
                          str(tmp_path / "no" / "such" / "folder" / "net.ncet"))
    assert status == 2 and "cannot write" in err


# --- names from the file ------------------------------------------------------------------------


def test_node_names_print_on_one_line(tmp_path, capsys):
    hostile = f"r\n{FAKE}\u2028{FAKE}\x1b[2J"
    path = mlp(tmp_path, names=("fc1", hostile, "fc2"))
    status, out, err = call(capsys, "import", str(path), "--samples", "2", "-q")
    assert status == 0, out + err
    assert not any(line.startswith(FAKE) for line in out.splitlines())
    assert "\u2028" not in out and "\x1b" not in out
    assert f"r\\x0a{FAKE}\\u2028{FAKE}\\x1b[2J" in out
    status, doc, _ = doc_of(capsys, str(path), "--no-check")
    assert hostile in [r["node"] for r in doc["conversion"]["rows"]]  # JSON: the true name


def test_value_names_print_on_one_line_in_the_certificate(tmp_path, capsys):
    """The IR nodes are named after the ONNX values, so the certificate's table holds them."""
    value = f"h\n{FAKE}"
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], [value], name="fc1", transB=1),
             helper.make_node("Relu", [value], ["y"], name="act")]
    path = _save(tmp_path, nodes, {k: v for k, v in _weights().items() if k != "w2"})
    status, out, err = call(capsys, "import", str(path), "--samples", "2", "-q", "--export",
                            str(tmp_path / "out.onnx"), "--check")
    assert status == 0, out + err
    assert "onnxruntime against the GraphIR:" in out  # the export's check names them too
    assert not any(line.startswith(FAKE) for line in out.splitlines())
    assert out.count(f"h\\x0a{FAKE}") >= 2


# --- the command line ---------------------------------------------------------------------------


def test_help_lists_import_with_examples(capsys):
    status, out, _ = call(capsys, "--help")
    assert status == 0 and "    import" in out
    status, out, _ = call(capsys, "import", "--help")
    assert status == 0 and "usage: ncet import" in out
    for flag in ("--no-check", "--samples", "--seed", "--json", "-o FILE", "--export FILE",
                 "--profile", "examples:"):
        assert flag in out


# --- the VNN-COMP corpus ------------------------------------------------------------------------


def test_acasxu_imports_and_is_certified(capsys):
    path = corpus_root() / "acasxu" / "onnx" / "ACASXU_run2a_1_1_batch_2000.onnx"
    status, doc, _ = doc_of(capsys, str(path), "--samples", "2", "-q")
    assert status == 0, doc["conversion"]["problems"]
    assert doc["batch_mode"] == "fixed" and doc["exactness"]["ok"]
    rows = doc["conversion"]["rows"]
    assert [r["onnx_op"] for r in rows[:3]] == ["graph input", "Sub", "Flatten"]
    assert sum(r["op_type"] == "Linear" and r["onnx_op"] == "MatMul" for r in rows) == 7
    assert doc["exactness"]["worst_ratio"] <= 1


def test_a_network_without_a_batch_axis_runs_one_sample_at_a_time(capsys):
    path = corpus_root() / "test" / "test_nano.onnx"
    status, doc, _ = doc_of(capsys, str(path), "--samples", "2", "-q")
    assert status == 0 and doc["batch_mode"] == "none" and doc["exactness"]["ok"]
    assert doc["conversion"]["notes"] == list(ncet.diagnose_onnx(path).notes)
    assert "no batch axis" in doc["conversion"]["notes"][0]


def test_a_sigmoid_network_of_the_corpus_is_refused_node_by_node(capsys):
    path = corpus_root() / "eran" / "nets" / "ffnnSIGMOID__Point_6x200.onnx"
    expected = [(r.fx_name, r.code) for r in ncet.diagnose_onnx(path).errors]
    assert len(expected) == 6
    status, out, _ = call(capsys, "import", str(path))
    assert status == 1 and "6 problem(s):" in out
    for name, code in expected:
        assert f"- node '{name}' (onnx Sigmoid" in out and f"[{code}]" in out
    status, doc, _ = doc_of(capsys, str(path))
    assert [(p["node"], p["code"]) for p in doc["conversion"]["problems"]] == expected


# --- ONNX files given to the other commands -----------------------------------------------------


def test_diff_reads_an_onnx_side_as_import_does(tmp_path, capsys):
    path, saved = mlp(tmp_path), tmp_path / "net.ncet"
    assert call(capsys, "import", str(path), "--no-check", "-o", str(saved))[0] == 0
    status, out, err = call(capsys, "diff", str(saved), str(path))
    assert status == 0 and "the GraphIRs are the same" in out, out + err
    status, out, _ = call(capsys, "diff", str(path), str(mlp(tmp_path, seed=1, name="b.onnx")))
    assert status == 1 and "the GraphIRs differ" in out
    status, _, err = call(capsys, "diff", str(path), str(saved), "--input-shape-a", "4")
    assert status == 2 and "leave --input-shape-a out" in err


def test_diff_of_a_refused_onnx_file_lists_its_problems(tmp_path, capsys):
    path = refused(tmp_path)
    status, _, err = call(capsys, "diff", str(path), str(mlp(tmp_path)))
    assert status == 2 and "nothing to compare" in err
    for row in ncet.diagnose_onnx(path).errors:
        assert f"- {row.message}" in err
    status, _, err = call(capsys, "diff", str(tmp_path / "missing.onnx"), str(path))
    assert status == 2 and "no file" in err


@pytest.mark.parametrize("command", ["inspect", "check", "convert"])
def test_an_onnx_target_points_to_import(tmp_path, capsys, command):
    path = mlp(tmp_path)
    extra = ["-o", str(tmp_path / "x.ncet")] if command == "convert" else []
    status, _, err = call(capsys, command, str(path), *extra)
    assert status == 2 and f"ncet import {path}" in err and "is an ONNX file" in err


def test_show_of_an_onnx_file_points_to_import(tmp_path, capsys):
    path = mlp(tmp_path)
    status, _, err = call(capsys, "show", str(path))
    assert status == 1 and f"type `ncet import {path}`" in err
