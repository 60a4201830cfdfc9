"""Whole suites (`ncet.run_suite`, `ncet suite run`, docs/suites.md): one row per instance
over the corpus's ACAS Xu and mnist_fc instances, each stage's answer the same as the API's
own call; resumable (a second run computes nothing, an interrupted one only what is
missing); a refused input, a crash and a timeout are rows; a worker killed mid-run is
replaced and every row still arrives."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("distributed")
pytest.importorskip("onnxruntime")

import ncet  # noqa: E402
from ncet.cli import main  # noqa: E402
from ncet.suites import COLUMNS, read_instances, read_table, witnesses_for, work  # noqa: E402
from ncet.suites.instances import Instance  # noqa: E402

from .corpus import corpus_root  # noqa: E402

ACAS = "acasxu/onnx/ACASXU_run2a_1_1_batch_2000.onnx"
MNIST = "mnist_fc/onnx/mnist-net_256x2.onnx"
SUBSET = (  # (network, property, published counterexamples for it in the corpus)
    (ACAS, "acasxu/vnnlib/prop_1.vnnlib", 0),
    (ACAS, "acasxu/vnnlib/prop_5.vnnlib", 1),
    (MNIST, "mnist_fc/vnnlib/prop_0_0.03.vnnlib", 0),
    (MNIST, "mnist_fc/vnnlib/prop_1_0.03.vnnlib", 4),
)
FAST = {"splits": 1, "samples": 4, "progress": False}
"""Small margins and certificates: the tests check the plumbing, the stages have their own."""
VERDICTS = {"counterexample", "float32-only", "tolerance-only", "not-a-counterexample",
            "undecided"}


@pytest.fixture(scope="module")
def corpus():
    return corpus_root()


@pytest.fixture(scope="module")
def subset(corpus):
    return [(str(corpus / n), str(corpus / p)) for n, p, _ in SUBSET]


@pytest.fixture(scope="module")
def subset_run(corpus, subset, tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "run.jsonl"
    table = ncet.run_suite(subset, out=out, results=corpus / "witnesses", **FAST)
    return table, out


def _count_calls(monkeypatch, tmp_path):
    """Count import_network and run_row calls in a file (tasks may run in another
    process's copy of the functions)."""
    log = tmp_path / "calls.log"
    for name in ("import_network", "run_row"):
        original = getattr(work, name)

        def counted(*args, _original=original, _name=name):
            with open(log, "a") as f:
                f.write(_name + "\n")
            return _original(*args)
        monkeypatch.setattr(work, name, counted)
    return lambda: log.read_text().split() if log.exists() else []


# --- the corpus ------------------------------------------------------------------------------


def test_one_row_per_instance_in_order_every_stage_done(subset_run, subset):
    table, _ = subset_run
    assert list(table.columns) == list(COLUMNS)
    assert [tuple(r) for r in table[["onnx", "vnnlib"]].values] == subset
    assert list(table["outcome"]) == ["ok"] * len(subset), table[["reason", "message"]]
    assert table["certified"].tolist() == [True] * len(subset)
    assert (table["worst_ratio"] <= 1).all()
    assert all(0 < e < math.inf for e in table["eps"])
    for stage in work.STAGES:
        assert (table[f"seconds_{stage}"] >= 0).all(), stage


def test_the_certificate_and_the_margin_are_the_apis_own(subset_run, corpus):
    table, _ = subset_run
    net, prop = corpus / ACAS, corpus / SUBSET[0][1]
    ir = ncet.from_onnx(net)
    assert ncet.check_onnx(ir, net, samples_per_scale=4).ok
    eps = float(ncet.float_margin(ir, ncet.read_vnnlib(prop), splits=1).eps.max())
    assert math.isclose(table["eps"][0], eps, rel_tol=1e-9)


def test_each_published_counterexample_is_judged_as_adjudicate_judges_it(subset_run, corpus):
    table, _ = subset_run
    assert table["witnesses"].tolist() == [n for _, _, n in SUBSET]
    for row, (_, _, n) in zip(table.itertuples(), SUBSET):
        assert len(row.verdicts) == n and set(row.verdicts.values()) <= VERDICTS
    (name, verdict), = table["verdicts"][1].items()
    witness = corpus / "witnesses" / "acasxu" / name
    assert ncet.adjudicate(corpus / ACAS, corpus / SUBSET[1][1], witness).verdict == verdict


def test_rows_are_on_disk_one_json_line_each(subset_run, subset):
    table, out = subset_run
    lines = out.read_text().splitlines()
    assert len(lines) == len(subset)
    assert {(json.loads(x)["onnx"], json.loads(x)["vnnlib"]) for x in lines} == set(subset)


# --- resuming ---------------------------------------------------------------------------------


def test_a_second_run_computes_nothing_and_returns_the_whole_table(subset_run, subset,
                                                                   monkeypatch, tmp_path):
    table, out = subset_run
    calls = _count_calls(monkeypatch, tmp_path)
    # no scheduler listens there: a run that tried to compute anything would fail
    again = ncet.run_suite(subset, out=out, client="tcp://127.0.0.1:9", **FAST)
    assert calls() == []
    assert again.drop(columns=["verdicts"]).equals(table.drop(columns=["verdicts"]))
    assert again["verdicts"].tolist() == table["verdicts"].tolist()


def test_an_interrupted_run_computes_only_the_rows_not_written(corpus, monkeypatch, tmp_path):
    rows = [(str(corpus / ACAS), str(corpus / p)) for p in
            ("acasxu/vnnlib/prop_1.vnnlib", "acasxu/vnnlib/prop_2.vnnlib",
             "acasxu/vnnlib/prop_3.vnnlib")]
    out = tmp_path / "run.jsonl"
    ncet.run_suite(rows[:2], out=out, **FAST)
    with open(out, "a") as f:  # the third row's line cut short by the interruption
        f.write('{"onnx": "' + rows[2][0][:10])
    calls = _count_calls(monkeypatch, tmp_path)
    table = ncet.run_suite(rows, out=out, **FAST)
    assert sorted(calls()) == ["import_network", "run_row"]
    assert list(table["outcome"]) == ["ok"] * 3
    assert len(read_table(out)) == 3 and out.read_text().count("\n") == 3


# --- rows that fail ---------------------------------------------------------------------------


def test_refused_inputs_and_crashes_are_rows_with_their_reason(corpus, tmp_path, monkeypatch):
    broken = tmp_path / "broken.vnnlib"
    broken.write_text("(declare-const X_0 Real)\n(assert (<= X_0 \n")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    prop = str(corpus / SUBSET[0][1])
    rows = [(str(corpus / ACAS), str(broken)), (str(garbage), prop),
            (str(corpus / ACAS), prop)]
    real = ncet.float_margin

    def crashing(*args, **kwargs):
        raise ZeroDivisionError("a crash inside the margin")
    monkeypatch.setattr(ncet, "float_margin", crashing)  # the in-process worker sees it
    table = ncet.run_suite(rows, **FAST)
    monkeypatch.setattr(ncet, "float_margin", real)
    assert list(table["outcome"]) == ["refused", "refused", "error"]
    assert table["stage"].tolist() == ["read", "import", "margin"]
    with pytest.raises(ncet.VNNLIBError) as read_error:
        ncet.read_vnnlib(broken)
    assert table["reason"][0] == read_error.value.code
    with pytest.raises(ValueError) as import_error:
        ncet.from_onnx(garbage)
    assert table["reason"][1] == import_error.value.code
    assert table["reason"][2] == "ZeroDivisionError"
    assert "a crash inside the margin" in table["message"][2]


def test_a_row_over_its_time_budget_is_a_timeout_row_and_redo_runs_it_again(corpus,
                                                                              tmp_path):
    row = Instance(str(corpus / ACAS), str(corpus / SUBSET[0][1]), timeout=1e-9)
    out = tmp_path / "run.jsonl"
    table = ncet.run_suite([row], out=out, **FAST)
    assert table["outcome"][0] == "timeout" and table["reason"][0] == "timeout"
    assert table["stage"][0] == "read" and table["eps"][0] is None
    assert ncet.run_suite([row], out=out, timeout=600, **FAST)["outcome"][0] == "timeout"
    again = ncet.run_suite([row], out=out, timeout=600, redo=("timeout",), **FAST)
    assert again["outcome"][0] == "ok"
    assert [r["outcome"] for r in read_table(out).values()] == ["ok"]
    assert out.read_text().count("\n") == 2


# --- a worker killed mid-run -----------------------------------------------------------------


def test_a_worker_killed_mid_run_is_replaced_and_every_row_arrives(corpus, tmp_path):
    from distributed import Client, LocalCluster

    props = [f"acasxu/vnnlib/prop_{i}.vnnlib" for i in (1, 2, 3)]
    rows = [(str(corpus / "acasxu/onnx" / f"ACASXU_run2a_1_{j}_batch_2000.onnx"),
             str(corpus / p)) for j in (1, 2) for p in props]
    out = tmp_path / "run.jsonl"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        result = {}
        run = threading.Thread(target=lambda: result.update(table=ncet.run_suite(
            rows, client=client, out=out, splits=16, samples=4, progress=False)))
        start = time.monotonic()
        run.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(client.processing().values()):
            time.sleep(0.05)
        busy = [w for w, tasks in client.processing().items() if tasks]
        assert busy, "no task ever ran"
        pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
        os.kill(pid, signal.SIGKILL)
        print(f"killed {busy[0]} after {time.monotonic() - start:.1f} s")
        run.join(300)
        assert not run.is_alive()
        print(f"run ended after {time.monotonic() - start:.1f} s")
        assert busy[0] not in client.scheduler_info()["workers"]
    table = result["table"]
    assert len(table) == len(rows) and list(table["outcome"]) == ["ok"] * len(rows)
    assert len(read_table(out)) == len(rows)


def test_a_row_running_far_past_its_budget_is_abandoned_and_its_worker_restarted(
        corpus, monkeypatch):
    from distributed import Client, LocalCluster

    from ncet.suites import runner

    monkeypatch.setattr(runner, "HARD_GRACE", 2.0)
    slow = Instance(str(corpus / ACAS), str(corpus / SUBSET[0][1]), timeout=1)  # 5 inputs
    fast = Instance(str(corpus / MNIST), str(corpus / SUBSET[2][1]))  # 784: never split
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        before = set(client.scheduler_info()["workers"])
        start = time.monotonic()
        # 20,000 pieces: minutes of margin, stopped only by the worker's restart
        table = ncet.run_suite([slow, fast], client=cluster.scheduler_address,
                               splits=20_000, samples=4, progress=False)  # by its address
        elapsed = time.monotonic() - start
        after = set(client.scheduler_info()["workers"])
    assert list(table["outcome"]) == ["timeout", "ok"]
    assert table["stage"][0] == "task" and "restarted" in table["message"][0]
    assert elapsed < 150 and before != after  # the margin alone would take minutes


# --- instances and witnesses ------------------------------------------------------------------


def test_instances_csv_paths_are_relative_to_its_folder(tmp_path):
    (tmp_path / "b").mkdir()
    csv = tmp_path / "b" / "instances.csv"
    csv.write_text("# a comment\nonnx/n.onnx,vnnlib/p.vnnlib,116\n\n"
                   "onnx/n.onnx,vnnlib/q.vnnlib.gz,30.5\nonnx/n.onnx,vnnlib/p.vnnlib,116\n")
    rows = read_instances(csv)
    assert [(r.onnx, r.vnnlib, r.timeout, r.benchmark) for r in rows] == [
        (str(tmp_path / "b/onnx/n.onnx"), str(tmp_path / "b/vnnlib/p.vnnlib"), 116.0, "b"),
        (str(tmp_path / "b/onnx/n.onnx"), str(tmp_path / "b/vnnlib/q.vnnlib.gz"), 30.5, "b")]
    assert rows[1].stem == "n_q"


@pytest.mark.parametrize("text", ["onnx/n.onnx\n", "onnx/n.onnx,p.vnnlib,soon\n",
                                  "onnx/n.onnx,p.vnnlib,-1\n"])
def test_a_malformed_instances_row_is_refused_with_its_line(tmp_path, text):
    csv = tmp_path / "instances.csv"
    csv.write_text(text)
    with pytest.raises(ValueError, match="line 1"):
        read_instances(csv)


def test_witnesses_are_matched_by_the_instances_file_stems(tmp_path):
    (tmp_path / "bench").mkdir()
    for name in ("2023__tool__net_prop_1.counterexample", "bench/2024__x__net_prop_1."
                 "counterexample", "2023__tool__net_prop_11.counterexample",
                 "2023__tool__othernet_prop_1.counterexample", "net_prop_1.counterexample"):
        (tmp_path / name).write_text("")
    row = Instance("/a/onnx/net.onnx", "/a/vnnlib/prop_1.vnnlib", None, "bench")
    assert [os.path.relpath(w, tmp_path) for w in witnesses_for(tmp_path, row)] == [
        "2023__tool__net_prop_1.counterexample", "bench/2024__x__net_prop_1.counterexample",
        "net_prop_1.counterexample"]


def test_an_out_file_that_is_not_a_suites_table_is_refused(tmp_path):
    out = tmp_path / "notes.jsonl"
    out.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="line 1: not a suite's result row"):
        ncet.run_suite([("n.onnx", "p.vnnlib")], out=out, progress=False)


def test_importing_ncet_imports_no_dask():
    code = ("import sys, ncet, ncet.suites; "
            "print([m for m in ('dask', 'distributed') if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- the command line -------------------------------------------------------------------------


def test_ncet_suite_run_prints_the_table_as_json_and_resumes(corpus, tmp_path, capsys):
    csv = tmp_path / "instances.csv"
    csv.write_text(f"{corpus / ACAS},{corpus / SUBSET[0][1]},116\n"
                   f"{corpus / ACAS},{tmp_path / 'missing.vnnlib'},116\n")
    out = tmp_path / "run.jsonl"
    argv = ["suite", "run", str(csv), "--out", str(out), "--splits", "1", "--samples", "4",
            "--json"]
    assert main(argv) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["command"] == "suite run" and document["ok"] is False
    assert [r["outcome"] for r in document["rows"]] == ["ok", "refused"]
    assert document["rows"][1]["stage"] == "read"
    assert main(argv[:-1] + ["-q"]) == 1
    text = capsys.readouterr().out
    assert "2 instances: 1 ok, 1 refused" in text and "missing.vnnlib" in text


def test_ncet_suite_run_refuses_a_missing_instances_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["suite", "run", str(tmp_path / "none.csv")])
    assert exit_.value.code == 2
    assert "no such file" in capsys.readouterr().err


def test_the_progress_bar_is_a_widget_in_a_notebook_and_text_elsewhere(monkeypatch, capsys):
    pytest.importorskip("ipywidgets")
    from ncet.suites import progress

    assert isinstance(progress.progress_bar(2), progress._Text)  # no kernel here
    monkeypatch.setattr(progress, "_in_kernel", lambda: True)
    bar = progress.progress_bar(2)
    for outcome in ("ok", "timeout"):
        bar.update({"outcome": outcome})
    bar.close()
    assert isinstance(bar, progress._Widget)
    assert bar.bar.value == 2 and bar.label.value == "2 / 2: 1 ok, 1 timeout"
    assert bar.bar.bar_style == "success"
