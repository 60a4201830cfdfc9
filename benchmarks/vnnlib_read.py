"""VNN-LIB read speed (issue 33): ncet.read_vnnlib against alpha-beta-CROWN's read_vnnlib, side
by side in one run, on the corpus's largest properties.

Per file, medians of CPU time over --repeats runs, the calls compared run interleaved after a
warm-up:
  * `ncet.read_vnnlib` (the Property: every constant kept as written, exact);
  * the same, then every bound as an exact Fraction (`input_boxes`) and as the float64 the
    competition's scripts read (`input_boxes_as(rounding="nearest")`), the unsafe set too;
  * alpha-beta-CROWN's `read_vnnlib` (benchmarks/third_party/abcrown_read_vnnlib.py,
    BSD-3, unchanged), on a copy of the file in a temporary folder, its `.compiled` pickle
    cache deleted before each run: a first read, as a verifier meets a new property.
A generated property shaped like nn4sys's largest files (not in the corpus: about 19 MB of
disjuncts, each a box of 154 inputs and one output bound) is timed too (--synthetic-mb).
It also counts the bounds where alpha-beta-CROWN's floats differ from the float64 nearest
to the decimal written (it recomputes each bound as mean -+ half-width), and how many of
those make its box smaller.

The competition's own parser (Stanley Bak's vnnlib.py in the VNN-COMP results repositories'
SCORING/ folder) is not timed: those repositories carry no license, so it is not vendored.
alpha-beta-CROWN's read_vnnlib is derived from it (the same statement reader and
update_rv_tuple) and adds the cache.

Usage: python benchmarks/vnnlib_read.py [--largest 6] [--repeats 5] [--json out.json]
Ratios are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib.util
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # run as a script: benchmarks/ itself is on sys.path
    sys.path.insert(0, str(_ROOT))

import ncet  # noqa: E402

CORPUS = (_ROOT / ".." / "shared" / "vnncomp").resolve()
THIRD_PARTY = Path(__file__).resolve().parent / "third_party"


def abcrown_reader():
    """alpha-beta-CROWN's read_vnnlib, loaded from the vendored file with a stand-in for its
    config module (`arguments`, default settings) that is taken out of sys.modules again."""
    shim = types.ModuleType("arguments")
    shim.Config = {"debug": {"rescale_vnnlib_ptb": None}}
    saved = sys.modules.get("arguments")
    sys.modules["arguments"] = shim
    try:
        spec = importlib.util.spec_from_file_location(
            "abcrown_read_vnnlib", THIRD_PARTY / "abcrown_read_vnnlib.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules["arguments"]
        else:
            sys.modules["arguments"] = saved
    return module.read_vnnlib


def largest(n: int) -> list[Path]:
    files = sorted(CORPUS.rglob("*.vnnlib"), key=lambda p: (-p.stat().st_size, str(p)))
    return files[:n]


def nn4sys_like(megabytes: float, inputs: int = 154, seed: int = 0) -> str:
    """A property shaped like nn4sys's cardinality files (whose largest, about 19 MB, are not
    in the corpus): `(assert (or (and box (<= Y_0 c)) (and box (>= Y_0 c')) ...))`, one
    box per pair of disjuncts, every bound a 16-digit decimal, about `megabytes` long."""
    rng = np.random.default_rng(seed)
    head = [f"(declare-const X_{i} Real)" for i in range(inputs)] + ["(declare-const Y_0 Real)",
                                                                      "(assert (or"]
    lines, size = [], 0
    while size < megabytes * 1e6:
        low = rng.random(inputs)
        box = " ".join(f"(>= X_{i} {a:.16f}) (<= X_{i} {a + 1e-4:.16f})"
                       for i, a in enumerate(low))
        c = rng.random()
        for atom in (f"(<= Y_0 {c:.16f})", f"(>= Y_0 {c + 0.01:.16f})"):
            lines.append(f"  (and {box} {atom})")
            size += len(lines[-1]) + 1
    return "\n".join(head + lines + ["))", ""])


def _timed(call) -> float:
    """CPU seconds of one call (this process: the readers are single-threaded Python, and
    CPU time is less moved than wall time by the other jobs of a shared machine)."""
    gc.collect()
    start = time.process_time()
    call()
    return time.process_time() - start


def _ncet_with_views(path):
    prop = ncet.read_vnnlib(path)
    prop.input_boxes  # noqa: B018 - Fractions
    prop.input_boxes_as(rounding="nearest")
    if prop.separable:
        prop.unsafe  # noqa: B018
        prop.unsafe_as(rounding="nearest")
    return prop


def moved_bounds(prop, theirs) -> tuple[int, int]:
    """How many input bounds alpha-beta-CROWN reads as another float64 than the one nearest
    to the decimal written, and how many of those inward (its box smaller)."""
    ours = prop.input_boxes_as(rounding="nearest")
    moved = inward = 0
    for (lower, upper), (box, _) in zip(ours, theirs):
        box = np.asarray(box, dtype=np.float64)
        moved += int((box[:, 0] != lower).sum() + (box[:, 1] != upper).sum())
        inward += int((box[:, 0] > lower).sum() + (box[:, 1] < upper).sum())
    return moved, inward


def measure(path: Path, repeats: int, read_abcrown, scratch: Path) -> dict:
    copy = scratch / path.name
    if path != copy:
        shutil.copyfile(path, copy)
    cache = Path(str(copy) + ".compiled")

    def abcrown():
        cache.unlink(missing_ok=True)
        with contextlib.redirect_stdout(io.StringIO()):
            return read_abcrown(str(copy))

    calls = {"ncet_s": lambda: ncet.read_vnnlib(path),
             "ncet_views_s": lambda: _ncet_with_views(path),
             "abcrown_s": abcrown}
    for call in calls.values():  # warm-up
        call()
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            times[name].append(_timed(call))
    name = str(path.relative_to(CORPUS)) if path.is_relative_to(CORPUS) else path.name
    row = {"file": name, "bytes": path.stat().st_size,
           **{name: statistics.median(t) for name, t in times.items()}}
    row["abcrown_over_ncet"] = row["abcrown_s"] / row["ncet_s"]
    row["abcrown_over_ncet_views"] = row["abcrown_s"] / row["ncet_views_s"]
    prop = ncet.read_vnnlib(path)
    row["inputs"], row["outputs"] = prop.num_inputs, prop.num_outputs
    row["abcrown_moved_bounds"], row["abcrown_inward_bounds"] = moved_bounds(prop, abcrown())
    cache.unlink(missing_ok=True)
    return row


def machine() -> dict:
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), cpu)
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = "unknown"
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "cpu": cpu, "nproc": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "load_average": os.getloadavg(), "git_head": head}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--largest", type=int, default=6,
                        help="time the N largest corpus properties (default 6: the two YOLO "
                             "files, the two CCTSDB-YOLO files, two traffic-sign files)")
    parser.add_argument("--files", default="",
                        help="comma-separated corpus-relative paths instead of --largest")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--synthetic-mb", type=float, default=19,
                        help="also time a generated nn4sys-like file of this size (MB; 0: "
                             "none)")
    parser.add_argument("--json", default="", help="also write the results there")
    args = parser.parse_args(argv)
    files = ([CORPUS / f for f in args.files.split(",") if f] if args.files
             else largest(args.largest))
    read_abcrown = abcrown_reader()
    info = machine()
    with tempfile.TemporaryDirectory() as scratch:
        if args.synthetic_mb > 0:
            synthetic = Path(scratch) / f"nn4sys_like_{args.synthetic_mb:g}MB.vnnlib"
            synthetic.write_text(nn4sys_like(args.synthetic_mb))
            files = [*files, synthetic]
        rows = [measure(path, args.repeats, read_abcrown, Path(scratch)) for path in files]
    print(f"date {info['date']}  cpu {info['cpu']}  nproc {info['nproc']}  "
          f"python {info['python']}  git {info['git_head']}  repeats {args.repeats}")
    print("| file | MB | inputs | ncet s | ncet+views s | abCROWN s | abCROWN/ncet | "
          "abCROWN/(ncet+views) | bounds abCROWN moves (inward) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['file']} | {r['bytes'] / 1e6:.2f} | {r['inputs']} | {r['ncet_s']:.3f} | "
              f"{r['ncet_views_s']:.3f} | {r['abcrown_s']:.3f} | {r['abcrown_over_ncet']:.1f} | "
              f"{r['abcrown_over_ncet_views']:.1f} | {r['abcrown_moved_bounds']} "
              f"({r['abcrown_inward_bounds']}) |")
    print("The competition's parser (SCORING/vnnlib.py) is not timed: its repositories carry "
          "no license.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "settings": {"repeats": args.repeats}, "rows": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
