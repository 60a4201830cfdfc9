"""How benchmarks/onnx_import.py times an import: calls in rounds of runs in a row
(`blocked_medians`), and the share of each of the importer's parts (`STAGES`) in a call
(`stage_shares`, each part wrapped for the call only)."""

from __future__ import annotations

import contextlib
import functools
import time

STAGES = ("read", "initializers", "constants", "emit", "shape inference", "walk")
"""Where an import's time goes: reading and parsing the file (`read_model`), the initializers
and Constant tensors as numpy arrays (`numpy_helper.to_array`), the IR constants made from
them (`Importer.lift`, `Importer.derived`), the IR nodes with their shapes (`Importer.emit`),
ONNX's shape inference (a diagnosis's stand-in shapes, `import_diagnosis.inferred`), and the rest:
the walk over the nodes, the rules, the report. A part missing from this version of the
importer counts in the rest."""


def _timed_parts():
    """(owner, attribute, stage) of each wrapped part that exists in this version."""
    from onnx import numpy_helper

    from ncet.onnx import import_diagnosis, importer

    parts = ((importer, "read_model", "read"), (numpy_helper, "to_array", "initializers"),
             (importer.Importer, "lift", "constants"),
             (importer.Importer, "derived", "constants"),
             (importer.Importer, "emit", "emit"),
             (import_diagnosis, "inferred", "shape inference"))
    return [(owner, name, stage) for owner, name, stage in parts if name in vars(owner)]


@contextlib.contextmanager
def timed_stages(seconds: dict[str, float]):
    """Wrap the importer's parts for the body only: each outermost call's wall seconds are
    added to `seconds[stage]` (a call inside another wrapped call counts in the outer one)."""
    depth = [0]

    def timed(function, stage):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if depth[0]:
                return function(*args, **kwargs)
            depth[0] += 1
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[stage] += time.perf_counter() - started
                depth[0] -= 1
        return wrapper

    parts = _timed_parts()
    originals = [(owner, name, vars(owner)[name]) for owner, name, _ in parts]
    try:
        for owner, name, stage in parts:
            setattr(owner, name, timed(vars(owner)[name], stage))
        yield seconds
    finally:
        for owner, name, function in originals:
            setattr(owner, name, function)


def stage_shares(call, runs: int = 5) -> dict[str, float]:
    """Each stage's share of `call`'s wall time: the median over `runs` of each stage's
    seconds, as a share of their sum (medians per stage, so one preempted run on a shared
    machine does not show as a slow stage)."""
    runs_seconds = []
    for _ in range(runs):
        seconds = dict.fromkeys(STAGES, 0.0)
        with timed_stages(seconds):
            t0 = time.perf_counter()
            call()
            total = time.perf_counter() - t0
        seconds["walk"] = max(0.0, total - sum(seconds.values()))
        runs_seconds.append(seconds)
    median = {s: sorted(r[s] for r in runs_seconds)[runs // 2] for s in STAGES}
    total = sum(median.values()) or 1.0
    return {s: v / total for s, v in median.items()}


def blocked_medians(fns: dict, rounds: int, block: int = 3, lead: int = 2) -> dict[str, float]:
    """Median CPU seconds of each function (and its median wall seconds under "<name>/wall"):
    `rounds` rounds, in each of which every function runs `lead` + `block` times in a row and
    the last `block` runs are timed.

    Not interleaved call by call (scale.py's `medians`): creating an onnxruntime session
    slows the next calls of this process down for a while (by 0.1-0.4 ms, a third of a small
    network's import, on the build machine), so a call timed right after one would pay for
    the session; the `lead` calls absorb that, and the rounds still share the machine's drift
    between the calls compared.
    """
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    wall: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for k in range(lead + block):
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                if k >= lead:
                    cpu[name].append(time.process_time() - c0)
                    wall[name].append(time.perf_counter() - t0)
    result = {name: _median(ts) for name, ts in cpu.items()}
    result.update({f"{name}/wall": _median(ts) for name, ts in wall.items()})
    return result


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
