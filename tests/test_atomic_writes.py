"""Writes are atomic: `save`, `ncet convert -o` and `ncet report -o` replace their target whole
or not at all (docs/reliability.md). A write that fails, or a writer killed midway, leaves the
previous file as it was; concurrent writers leave one complete file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

import ncet
from ncet.examples import load_example
from ncet.format import file as ncet_io
from ncet.format.atomic import atomic_writer


def graph(name: str) -> ncet.GraphIR:
    model, shapes = load_example(name)
    return ncet.convert(model, *shapes)


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_failed_save_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "net.ncet"
    ncet.save(graph("mlp"), path)
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ncet_io, "aligned", broken)  # called after the header is written
    with pytest.raises(OSError, match="No space left"):
        ncet.save(graph("lenet"), path)
    assert path.read_bytes() == before and leftovers(tmp_path) == []
    monkeypatch.undo()
    ncet.save(graph("lenet"), path)
    assert ncet.load(path).nodes == graph("lenet").nodes


def test_the_writer_keeps_the_permission_bits_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "report.html"
    path.write_text("old")
    os.chmod(path, 0o640)
    with atomic_writer(path) as f:
        f.write(b"new")
    assert path.read_text() == "new" and (path.stat().st_mode & 0o777) == 0o640


def test_an_exception_inside_the_writer_removes_its_temporary_file(tmp_path):
    path = tmp_path / "out.bin"
    with pytest.raises(RuntimeError), atomic_writer(path) as f:
        f.write(b"partial")
        raise RuntimeError("interrupted")
    assert not path.exists() and leftovers(tmp_path) == []


KILLED_WRITER = """
import os, sys, time, torch, ncet
from torch import nn
real = os.fsync
def stall(fd):  # every byte is in the temporary file; the rename has not happened
    print("written", flush=True)
    time.sleep(60)
os.fsync = stall
model = nn.Sequential(nn.Linear(64, 64)).eval()
ncet.save(ncet.convert(model, (64,)), sys.argv[1])
"""


def test_a_writer_killed_midway_leaves_the_previous_file(tmp_path):
    path = tmp_path / "net.ncet"
    ncet.save(graph("mlp"), path)
    before = path.read_bytes()
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert path.read_bytes() == before
    assert ncet.load(path).nodes == graph("mlp").nodes


CONCURRENT_WRITER = """
import sys, ncet
from ncet.examples import load_example
model, shapes = load_example(sys.argv[2])
ir = ncet.convert(model, *shapes)
for _ in range(int(sys.argv[3])):
    ncet.save(ir, sys.argv[1])
"""


def test_concurrent_writers_never_mix_their_files(tmp_path):
    path = tmp_path / "net.ncet"
    expected = {}
    for name in ("mlp", "lenet"):
        ncet.save(graph(name), tmp_path / f"{name}.ncet")
        expected[name] = (tmp_path / f"{name}.ncet").read_bytes()
    ncet.save(graph("mlp"), path)
    writers = [subprocess.Popen([sys.executable, "-c", CONCURRENT_WRITER, str(path), name,
                                 "40"]) for name in ("mlp", "lenet")]
    deadline = time.monotonic() + 120
    while any(w.poll() is None for w in writers) and time.monotonic() < deadline:
        data = path.read_bytes()
        assert data in expected.values(), "a reader saw a file that is neither writer's"
    for w in writers:
        assert w.wait(timeout=120) == 0
    assert path.read_bytes() in expected.values() and leftovers(tmp_path) == []


def test_a_failed_ncet_report_leaves_the_previous_report(tmp_path, monkeypatch, capsys):
    from ncet.__main__ import main
    from ncet.cli import commands

    out = tmp_path / "report.html"
    out.write_text("previous report")
    real = commands.atomic_writer

    @contextlib.contextmanager
    def failing(path):
        with real(path) as f:  # the disk fails halfway through the page
            f.write(b"<html>half a page")
            raise OSError(5, "Input/output error")
            yield f

    monkeypatch.setattr(commands, "atomic_writer", failing)
    try:
        status = main(["report", "mlp", "-o", str(out), "-q", "--samples", "2"])
    except SystemExit as exit_:
        status = exit_.code
    assert status == 2 and "cannot write" in capsys.readouterr().err
    assert out.read_text() == "previous report" and leftovers(tmp_path) == []
