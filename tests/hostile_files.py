"""The hostile GraphIR files of issue 21, and a harness that loads each in a fresh process.

Each file is built from the documented layout (docs/file-format.md) without ncet.format.file, so the
same files can be fed to any version of NCET. `measure` loads one (with `ncet.load`, or
through `ncet show`) in a child process and reports the outcome, the growth of the child's
peak resident memory over its resident memory just before the call, and the wall time;
a child that grows past a memory cap or runs past a timeout is stopped and reported so.

    python -m tests.hostile_files            # every file, load and show, one process each
    python tests/hostile_files.py --only large-pooling-window --timeout 120

Wall times are printed, never asserted (tests/test_hostile_files.py asserts the memory and
that refusals come before the meaning check runs).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAGIC = b"NCETIR\n\x00"
PREFIX = struct.Struct("<8sIQ")
MIB = 2**20
SPARSE_BYTES = 256 * MIB
"""The apparent size of the sparse file's one constant (its holes read as zeros)."""


# --- Building files from the documented layout -------------------------------------------------


def _source(name: str) -> dict:
    return {"fx_name": name, "fx_op": "call_module", "target": name, "module_path": name,
            "module_type": "", "location": "model.py:1"}


def node(name: str, op_type: str, inputs=(), attrs=None, shape=None, dtype="float32") -> dict:
    """One header node; an Output gets a null shape and an empty dtype."""
    if op_type == "Output":
        shape, dtype = None, ""
    return {"name": name, "op_type": op_type, "inputs": list(inputs), "attrs": attrs or {},
            "shape": shape, "dtype": dtype, "source": _source(name)}


def output(*inputs: str) -> dict:
    return node("output", "Output", inputs, {"tuple": False})


def source_free(nodes: list[dict]) -> list[dict]:
    """The same nodes with empty source fields (the smallest header per node)."""
    return [n | {"source": {k: "" for k in n["source"]}} for n in nodes]


def pack(nodes: list[dict], constants=(), data: bytes = b"") -> bytes:
    """A file: prefix, canonical header (sorted keys, no spaces, ASCII), padding, data."""
    header = {"format": "ncet-graphir", "version": 1, "nodes": nodes,
              "constants": list(constants)}
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return PREFIX.pack(MAGIC, 1, len(text)) + text + bytes(-(PREFIX.size + len(text)) % 8) + data


def constant(name: str, shape: list[int], dtype: str = "float32", offset: int = 0,
             itemsize: int = 4) -> dict:
    numel = 1
    for size in shape:
        numel *= size
    return {"name": name, "dtype": dtype, "shape": shape, "offset": offset,
            "nbytes": numel * itemsize}


def relu_on_input(shape: list[int], extra_constants=()) -> bytes:
    """Input -> ReLU -> Output at the given per-sample shape."""
    return pack([node("x", "Input", (), {"index": 0}, shape),
                 node("relu", "ReLU", ["x"], {}, shape), output("relu")], extra_constants)


def doubling_concats(count: int = 40) -> bytes:
    """A chain of Concats of the previous value with itself: the size doubles each time."""
    nodes = [node("x", "Input", (), {"index": 0}, [1])]
    for i in range(1, count + 1):
        nodes.append(node(f"cat{i}", "Concat", [nodes[-1]["name"]] * 2, {"axis": 0}, [2**i]))
    return pack(nodes + [output(nodes[-1]["name"])])


def pooling(size: int = 1024, window: int = 640) -> bytes:
    """One max pooling of a large window with stride 1: few bytes, much work."""
    out = size - window + 1
    return pack([node("x", "Input", (), {"index": 0}, [1, size, size]),
                 node("pool", "MaxPool2d", ["x"], {
                     "kernel_size": [window, window], "stride": [1, 1], "padding": [0, 0],
                     "dilation": [1, 1], "ceil_mode": False}, [1, out, out]),
                 output("pool")])


def conv_padding(pad: int = 12_000) -> bytes:
    """A 1x1 convolution with huge uneven padding: the padded input is huge, the file tiny."""
    height, width = 4 + 2 * pad + 1, 4 + 2 * pad
    weight = constant("w", [1, 1, 1, 1])
    return pack([node("x", "Input", (), {"index": 0}, [1, 4, 4]),
                 node("conv", "Conv2d", ["x"], {
                     "weight": "w", "bias": None, "stride": [1, 1],
                     "padding": [pad, pad + 1, pad, pad], "dilation": [1, 1], "groups": 1,
                     "padding_mode": "zeros"}, [1, height, width]),
                 output("conv")], [weight], struct.pack("<f", 1.0))


def adaptive_pool(side: int = 40_000) -> bytes:
    """An adaptive average pooling to a huge output from a 2x2 input."""
    return pack([node("x", "Input", (), {"index": 0}, [1, 2, 2]),
                 node("pool", "AdaptiveAvgPool2d", ["x"], {"output_size": [side, side]},
                      [1, side, side]),
                 output("pool")])


def broadcast(side: int = 20_000) -> bytes:
    """x [side, 1] plus its transpose [1, side]: broadcasting makes [side, side]."""
    return pack([node("x", "Input", (), {"index": 0}, [side, 1]),
                 node("t", "Transpose", ["x"], {"dim0": 0, "dim1": 1}, [1, side]),
                 node("add", "Add", ["x", "t"], {"alpha": 1.0}, [side, side]),
                 output("add")])


def node_heavy(count: int = 30_000) -> bytes:
    """A long chain of Identity nodes with empty sources: a large header that loads."""
    nodes = [node("x", "Input", (), {"index": 0}, [1])]
    nodes += [node(f"n{i}", "Identity", [nodes[-1]["name"] if i == 1 else f"n{i - 1}"], {}, [1])
              for i in range(1, count + 1)]
    return pack(source_free(nodes + [output(f"n{count}")]))


@dataclass(frozen=True, slots=True)
class Hostile:
    """One hostile file: how to build it, the finding of issue 21 it reproduces, and a stable
    part of the GraphIRFormatError message that refuses it (None: the file loads)."""

    name: str
    finding: str
    build: Callable[[], bytes]
    refusal: str | None
    sparse_tail: int = 0  # zero bytes appended as a hole (the file's data section)


def _sparse() -> bytes:
    entry = constant("zeros", [SPARSE_BYTES // 8], "float64", itemsize=8)
    return relu_on_input([4], [entry])


HOSTILE_FILES: tuple[Hostile, ...] = (
    Hostile("huge-input-shape", "2", lambda: relu_on_input([2**27]), "limit"),
    Hostile("doubling-concats", "2", doubling_concats, "limit"),
    Hostile("large-pooling-window", "2", pooling, "work"),
    Hostile("conv-huge-padding", "2", conv_padding, "limit"),
    Hostile("adaptive-pool-huge-output", "2", adaptive_pool, "limit"),
    Hostile("broadcast-blowup", "2", broadcast, "limit"),
    Hostile("empty-constant-0x2^62x2^62", "5",
            lambda: relu_on_input([4], [constant("c", [0, 2**62, 2**62])]), "lay out"),
    Hostile("input-2^40", "5", lambda: relu_on_input([2**40]), "limit"),
    Hostile("input-2^62", "5", lambda: relu_on_input([2**62]), "limit"),
    Hostile("input-2^31x2^31", "5", lambda: relu_on_input([2**31, 2**31]), "limit"),
    Hostile("sparse-256MiB-constant", "2", _sparse, None, sparse_tail=SPARSE_BYTES),
    Hostile("node-heavy-header", "2", node_heavy, None),
)
"""Every hostile file of findings 2 and 5, plus the other ways a small file could imply a large
allocation (padding, adaptive output sizes, broadcasting)."""

SHOWN = ("huge-input-shape", "large-pooling-window", "empty-constant-0x2^62x2^62",
         "input-2^40", "input-2^62", "input-2^31x2^31")
"""The files also fed to `ncet show` by the harness."""


def write(hostile: Hostile, folder: Path) -> Path:
    """Write the file into `folder`; a sparse tail is a hole, not written bytes."""
    path = folder / f"{hostile.name}.ncet"
    blob = hostile.build()
    with open(path, "wb") as f:
        f.write(blob)
        if hostile.sparse_tail:
            f.truncate(len(blob) + hostile.sparse_tail)
    return path


# --- Measuring in a child process --------------------------------------------------------------

_CHILD = r'''
import contextlib, json, os, sys, threading, time
paths, mode, cap = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
import ncet
from ncet.cli import main

def kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

def run(path):
    if mode == "load":
        ncet.load(path)
        return "loaded", ""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        status = main(["show", path])
    return f"show exit {status}", ""

run(paths[0])  # warm-up on a valid file: imports and first-call costs are not the file's
for path in paths[1:]:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current RSS
    base, start, done = kib("VmRSS"), time.perf_counter(), threading.Event()

    def watchdog():
        while not done.wait(0.005):
            if kib("VmRSS") - base > cap:
                print(json.dumps({"path": path, "outcome": "stopped at the memory cap",
                                  "message": "", "peak": kib("VmHWM") - base,
                                  "seconds": time.perf_counter() - start}), flush=True)
                os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        outcome, message = run(path)
    except ncet.GraphIRFormatError as error:
        outcome, message = "refused", str(error)
    except BaseException as error:  # what the findings call a raw exception
        outcome, message = f"raw {type(error).__name__}", str(error)
    seconds = time.perf_counter() - start
    done.set()
    print(json.dumps({"path": path, "outcome": outcome, "message": message[:300],
                      "peak": kib("VmHWM") - base, "seconds": seconds}), flush=True)
'''


@dataclass(frozen=True, slots=True)
class Measurement:
    """What loading one file cost in a child process."""

    name: str
    mode: str  # "load" or "show"
    size: int  # bytes, as os.stat reports them (a sparse file's apparent size)
    outcome: str
    message: str
    peak: int  # growth of peak RSS over RSS just before the call, in bytes
    seconds: float


def warm_up_file(folder: Path) -> Path:
    path = folder / "valid.ncet"
    path.write_bytes(relu_on_input([4]))
    return path


def measure(paths: list[Path], mode: str = "load", *, cap: int = 6 * 2**30,
            timeout: float = 600.0) -> list[Measurement]:
    """Load (or `ncet show`) each path in turn in one fresh child process.

    Args:
        paths: The files; the first one is the warm-up (a valid file) and is not reported.
        mode: "load" for `ncet.load(path)`, "show" for `ncet show PATH`.
        cap: Stop the child when its resident memory grows by more than this many bytes.
        timeout: Stop the child after this many seconds in all.

    Returns:
        One Measurement per reported path; a stopped child ends the list with that file.
    """
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(MIB))  # freed buffers leave the heap
    command = [sys.executable, "-c", _CHILD, json.dumps([str(p) for p in paths]), mode, str(cap)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=timeout)
        lines, error = done.stdout.splitlines(), done.stderr
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or b""
        lines = (out.decode() if isinstance(out, bytes) else out).splitlines()
        error = f"timeout after {time.perf_counter() - start:.0f} s"
    results = [json.loads(line) for line in lines if line.startswith("{")]
    reported = [_measurement(r, mode) for r in results]
    if len(reported) < len(paths) - 1 and (not results or "cap" not in results[-1]["outcome"]):
        path = paths[1 + len(reported)]
        reported.append(Measurement(path.stem, mode, path.stat().st_size, "stopped: " + (
            error.strip().splitlines()[-1] if error.strip() else "no output"), "", -1,
            time.perf_counter() - start))
    return reported


def _measurement(record: dict, mode: str) -> Measurement:
    path = Path(record["path"])
    return Measurement(path.stem, mode, path.stat().st_size, record["outcome"],
                       record["message"], record["peak"], record["seconds"])


def measure_each(hostiles, folder: Path, mode: str, **kwargs) -> list[Measurement]:
    """One fresh process per file (a file that exhausts memory stops only its own child)."""
    warm = warm_up_file(folder)
    return [m for h in hostiles for m in measure([warm, write(h, folder)], mode, **kwargs)]


def _human(n: int) -> str:
    if n < 0:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def table(rows: list[Measurement]) -> str:
    """A Markdown table: file, mode, size, outcome, peak RSS growth, time."""
    lines = ["| file | via | size | outcome | peak RSS growth | time |",
             "|---|---|---:|---|---:|---:|"]
    for m in rows:
        outcome = m.outcome if m.outcome != "refused" else \
            f"refused: {m.message.partition('file: ')[2][:70] or m.message[:70]}"
        seconds = f"{m.seconds:.2f} s" if m.seconds >= 1 else f"{1000 * m.seconds:.1f} ms"
        lines.append(f"| {m.name} | {m.mode} | {_human(m.size)} | {outcome} | {_human(m.peak)} "
                     f"| {seconds} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a file name (repeatable)")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per file")
    parser.add_argument("--cap-mib", type=int, default=6144, help="memory cap per child")
    parser.add_argument("--no-show", action="store_true", help="skip the `ncet show` rows")
    parser.add_argument("--json", help="also write the measurements to this file")
    args = parser.parse_args(argv)
    chosen = [h for h in HOSTILE_FILES if not args.only or h.name in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        folder, rows = Path(tmp), []
        for mode in ("load",) if args.no_show else ("load", "show"):
            hostiles = chosen if mode == "load" else [h for h in chosen if h.name in SHOWN]
            rows += measure_each(hostiles, folder, mode, cap=args.cap_mib * MIB,
                                 timeout=args.timeout)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(m) for m in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
