"""ONNX import speed (issue 32): `ncet.from_onnx` against its peers, per VNN-COMP corpus
network, in one run.

For every network of the corpus (`../shared/vnncomp` beside the repository, as
tests/corpus.py finds it; `--corpus` to point elsewhere), as medians of CPU time on one torch
thread after a warm-up, in --rounds rounds of each call 2 + 3 times in a row, the last 3 timed
(`blocked_medians`):
  * `ncet.from_onnx(path)`, from the path as a user calls it (reading and parsing the file
    included); on a network outside the boundary, `ncet.diagnose_onnx(path)` instead (every
    node judged at once), and the row says "refused";
  * `onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])` with its default
    options (the target: from_onnx / session <= 1), and with graph optimizations off
    (ORT_DISABLE_ALL, as check_onnx builds its sessions);
  * `onnx2torch.convert(path)` where it succeeds, else its exception's class (with
    tests/torchvision_stub on sys.path when torchvision is not installed: onnx2torch imports it
    for ops no corpus network uses);
  * where the import's time goes, by stage, from the wall time of each outermost call of the
    importer's parts (`STAGES`; the rest is the walk over the nodes and the rules).
With --check, also `ncet.check_onnx(ir, path)` of each network that imports, at each of
--check-samples samples per scale, against its floor: the session (optimizations off), one
forward of the same inputs and one float64 `ncet.evaluate`.

Usage: python benchmarks/onnx_import.py [--networks acasxu,oval21] [--rounds 5]
       [--check] [--json out.json]
Ratios are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import torch

import ncet

if __package__:  # imported as benchmarks.onnx_import (the tests)
    from .cnn_check import machine as base_machine
    from .import_timing import STAGES, blocked_medians, stage_shares
else:  # run as a script: benchmarks/ itself is on sys.path
    from cnn_check import machine as base_machine
    from import_timing import STAGES, blocked_medians, stage_shares

_ROOT = Path(__file__).resolve().parent.parent
CORPUS = (_ROOT / ".." / "shared" / "vnncomp").resolve()
"""Where tests/corpus.py finds the corpus: beside the repository, never inside it."""
STUB = _ROOT / "tests" / "torchvision_stub"

# --- the corpus ------------------------------------------------------------------------------
def corpus_networks(root: Path, only: tuple[str, ...] = ()) -> list[str]:
    """Every network of the corpus (relative paths, sorted), or those whose path contains one
    of `only`."""
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*.onnx"))
    return [n for n in names if not only or any(part in n for part in only)]


def onnx_nodes(path: str) -> int:
    import onnx

    return len(onnx.load(path, load_external_data=False).graph.node)


# --- the peers -------------------------------------------------------------------------------
def load_onnx2torch():
    """onnx2torch, or None when it is not installed (with tests/torchvision_stub when the real
    torchvision is absent, as tests/test_export_consumers.py imports it)."""
    if importlib.util.find_spec("onnx2torch") is None:
        return None
    stubbed = importlib.util.find_spec("torchvision") is None
    if stubbed:
        sys.path.insert(0, str(STUB))
    try:
        return importlib.import_module("onnx2torch")
    finally:  # the stub leaves sys.path and sys.modules: onnx2torch keeps what it imported
        if stubbed:
            sys.path.remove(str(STUB))
            for name in [m for m in sys.modules
                         if m == "torchvision" or m.startswith("torchvision.")]:
                del sys.modules[name]


def ort_session(optimized: bool):
    import onnxruntime as ort

    if optimized:
        return lambda path: ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return lambda path: ort.InferenceSession(path, options,
                                             providers=["CPUExecutionProvider"])


def _failure(call) -> str | None:
    """None when `call()` succeeds, else its exception's class name."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except Exception as exc:  # noqa: BLE001 - a peer's failure is a result, not an error
        return type(exc).__name__
    return None


def _quiet(call):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    return run


def network_row(root: Path, name: str, rounds: int, onnx2torch, profile: bool) -> dict:
    """One network: from_onnx (or diagnose_onnx when it is refused), both onnxruntime
    sessions, onnx2torch, each once as a warm-up and then timed in rounds
    (`blocked_medians`)."""
    path = str(root / name)
    report = ncet.diagnose_onnx(path)
    if report.graph is not None:
        outcome, ours = "imported", lambda: ncet.from_onnx(path)
    else:
        outcome, ours = "refused", lambda: ncet.diagnose_onnx(path)
    calls = {"ncet": ours, "ort": functools.partial(ort_session(True), path),
             "ort_noopt": functools.partial(ort_session(False), path)}
    peer = "not installed" if onnx2torch is None else \
        _failure(functools.partial(onnx2torch.convert, path))
    if onnx2torch is not None and peer is None:
        calls["onnx2torch"] = _quiet(functools.partial(onnx2torch.convert, path))
    for call in calls.values():  # the warm-up
        call()
    t = blocked_medians(calls, rounds)
    row = {"network": name, "nodes": onnx_nodes(path), "bytes": os.path.getsize(path),
           "outcome": outcome, "refusals": sorted({r.code for r in report.rows if r.code}),
           "ncet_s": t["ncet"], "ort_s": t["ort"], "ort_noopt_s": t["ort_noopt"],
           "ncet_over_ort": t["ncet"] / t["ort"],
           "ncet_over_ort_noopt": t["ncet"] / t["ort_noopt"],
           "ncet_wall_s": t["ncet/wall"], "ort_wall_s": t["ort/wall"],
           "ncet_over_ort_wall": t["ncet/wall"] / t["ort/wall"],
           "onnx2torch_s": t.get("onnx2torch"), "onnx2torch_failure": peer,
           "ncet_over_onnx2torch": t["ncet"] / t["onnx2torch"] if "onnx2torch" in t else None}
    if profile:
        row["stages"] = stage_shares(ours)
    return row


# --- check_onnx ------------------------------------------------------------------------------
def check_row(root: Path, name: str, samples_per_scale: int) -> dict:
    """check_onnx of an imported network at `samples_per_scale`, once, against its floor: the
    session (optimizations off), one forward of the same inputs (one sample at a time when
    the file's batch is fixed) and one float64 evaluate."""
    import numpy as np

    from ncet.exactness.check import generate_inputs
    from ncet.onnx.importer import import_model

    path = str(root / name)
    ir = ncet.from_onnx(path)
    _, model, mode = import_model(path, strict=True)
    inputs, _ = generate_inputs(ir, samples_per_scale)
    feeds = [v.name for v in model.graph.input
             if v.name not in {i.name for i in model.graph.initializer}]

    def floor():
        session = ort_session(False)(path)
        if mode == "symbolic":
            session.run(None, {n: x.numpy() for n, x in zip(feeds, inputs)})
        else:
            for k in range(len(inputs[0])):
                session.run(None, {n: np.ascontiguousarray(x[k:k + 1].numpy() if
                                                           mode == "fixed" else x[k].numpy())
                                   for n, x in zip(feeds, inputs)})
        ncet.evaluate(ir, *(x.double() for x in inputs))

    c0 = time.process_time()
    report = ncet.check_onnx(ir, path, samples_per_scale=samples_per_scale)
    check_s = time.process_time() - c0
    c0 = time.process_time()
    floor()
    floor_s = time.process_time() - c0
    return {"network": name, "samples_per_scale": samples_per_scale,
            "samples": len(inputs[0]), "batch": mode, "check_s": check_s, "floor_s": floor_s,
            "check_over_floor": check_s / floor_s, "ok": bool(report.ok),
            "verdict": str(report).splitlines()[0]}


# --- the run ---------------------------------------------------------------------------------
def machine() -> dict:
    import onnx
    import onnxruntime

    try:
        from importlib.metadata import version
        o2t = version("onnx2torch")
    except Exception:  # noqa: BLE001 - not installed
        o2t = None
    return {**base_machine(), "load_average": os.getloadavg(), "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "onnx2torch": o2t}


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summary(rows: list[dict]) -> dict:
    """Per peer: how many networks meet from_onnx / peer <= 1, the geometric mean ratio (all,
    and the imported networks alone), and the worst network."""
    out = {}
    for key in ("ncet_over_ort", "ncet_over_ort_wall", "ncet_over_ort_noopt",
                "ncet_over_onnx2torch"):
        timed = [r for r in rows if r[key] is not None]
        worst = max(timed, key=lambda r: r[key], default=None)
        out[key] = {"networks": len(timed), "met": sum(r[key] <= 1 for r in timed),
                    "geomean": geometric_mean([r[key] for r in timed]),
                    "geomean_imported": geometric_mean(
                        [r[key] for r in timed if r["outcome"] == "imported"]),
                    "worst": None if worst is None else [worst["network"], worst[key]]}
    return out


def run(args, root: Path) -> dict:
    names = corpus_networks(root, args.networks)
    onnx2torch = load_onnx2torch()
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)  # its warnings on old files, not its options
    result = {"machine": machine(),
              "settings": {"corpus": str(root), "networks": len(names),
                           "rounds": args.rounds, "threads": args.threads,
                           "check_samples": list(args.check_samples) if args.check else []},
              "rows": [], "checks": []}
    for name in names:
        row = network_row(root, name, args.rounds, onnx2torch, not args.no_stages)
        result["rows"].append(row)
        _progress(f"{name}: from_onnx {1e3 * row['ncet_s']:.1f} ms, session "
                  f"{1e3 * row['ort_s']:.1f} ms ({row['ncet_over_ort']:.2f})")
    result["summary"] = summary(result["rows"])
    if args.check:
        for row in result["rows"]:
            if row["outcome"] != "imported":
                continue
            for k in args.check_samples:
                result["checks"].append(check_row(root, row["network"], k))
                _progress(f"check_onnx {row['network']} at {k} per scale: "
                          f"{result['checks'][-1]['check_s']:.2f} s")
    return result


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{1e3 * seconds:.1f}"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


COLUMNS = ("network", "ONNX nodes", "outcome", "from_onnx ms", "session ms",
           "from_onnx / session", "session no-opt ms", "from_onnx / no-opt", "onnx2torch ms",
           "from_onnx / onnx2torch")


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join(":---" if c in ("network", "outcome") else "---:"
                            for c in COLUMNS) + "|"]
    for r in rows:
        peer = _ms(r["onnx2torch_s"]) if r["onnx2torch_failure"] is None \
            else r["onnx2torch_failure"]
        cells = (r["network"], str(r["nodes"]), r["outcome"], _ms(r["ncet_s"]), _ms(r["ort_s"]),
                 _ratio(r["ncet_over_ort"]), _ms(r["ort_noopt_s"]),
                 _ratio(r["ncet_over_ort_noopt"]), peer, _ratio(r["ncet_over_onnx2torch"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


PEERS = {"ncet_over_ort": "onnxruntime's session (default options)",
         "ncet_over_ort_wall": "onnxruntime's session (default options), in wall time",
         "ncet_over_ort_noopt": "onnxruntime's session (graph optimizations off)",
         "ncet_over_onnx2torch": "onnx2torch.convert (where it succeeds)"}


def print_tables(result: dict) -> None:
    m, s = result["machine"], result["settings"]
    print(f"date {m['date']}; machine {m['cpu']}, nproc {m['nproc']}, torch threads "
          f"{m['torch_threads']}, load {', '.join(f'{v:.1f}' for v in m['load_average'])}; "
          f"torch {m['torch']}, onnx {m['onnx']}, onnxruntime {m['onnxruntime']}, onnx2torch "
          f"{m['onnx2torch']}; git {m['git_head']}")
    print(f"\nfrom_onnx (diagnose_onnx when refused) against its peers, {s['networks']} "
          f"networks of {s['corpus']} (CPU ms on one torch thread, medians of "
          f"{3 * s['rounds']} runs after a warm-up, in {s['rounds']} rounds of 3 in a row after "
          "2 untimed; ratios < 1: from_onnx is faster; target from_onnx / session <= 1)\n")
    print(table(result["rows"]))
    print()
    for key, what in PEERS.items():
        v = result["summary"][key]
        if not v["networks"]:
            print(f"against {what}: no network timed")
            continue
        print(f"against {what}: {v['met']} of {v['networks']} networks at <= 1; geometric "
              f"mean {_ratio(v['geomean'])} ({_ratio(v['geomean_imported'])} over the "
              f"networks that import); worst {v['worst'][0]} at {v['worst'][1]:.2f}")
    staged = [r for r in result["rows"] if "stages" in r]
    if staged:
        print("\nwhere from_onnx's time goes (each part wrapped, the median of its wall "
              "seconds over 5 runs, as a share of their sum):")
        print(f"{'network':<58}" + "".join(f"{s:>17}" for s in STAGES))
        for r in staged:
            print(f"{r['network'][:57]:<58}" +
                  "".join(f"{100 * r['stages'][s]:>16.0f}%" for s in STAGES))
        mean = {s: sum(r["stages"][s] for r in staged) / len(staged) for s in STAGES}
        print(f"{'mean':<58}" + "".join(f"{100 * mean[s]:>16.0f}%" for s in STAGES))
    if result["checks"]:
        print("\ncheck_onnx of each network that imports, once, against its floor (the "
              "session with optimizations off, one forward of the same inputs, one float64 "
              "evaluate), CPU s")
        print(f"{'network':<58}{'per scale':>10}{'samples':>8}{'batch':>9}{'check s':>9}"
              f"{'floor s':>9}{'chk/floor':>10}  verdict")
        for c in result["checks"]:
            print(f"{c['network'][:57]:<58}{c['samples_per_scale']:>10}{c['samples']:>8}"
                  f"{c['batch']:>9}{c['check_s']:>9.3f}{c['floor_s']:>9.3f}"
                  f"{c['check_over_floor']:>10.1f}  {c['verdict']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS,
                        help=f"the VNN-COMP corpus folder (default {CORPUS})")
    parser.add_argument("--networks", type=lambda s: tuple(s.split(",")), default=(),
                        help="only the networks whose path (relative to the corpus) contains "
                             "one of these, comma-separated (default: all)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds of timed runs (default 5): in each, every call runs 2 "
                             "times untimed and 3 times timed, in a row")
    parser.add_argument("--no-stages", action="store_true",
                        help="skip the breakdown of from_onnx's time by stage")
    parser.add_argument("--check", action="store_true",
                        help="also time check_onnx on every network that imports")
    parser.add_argument("--check-samples", type=lambda s: tuple(int(v) for v in s.split(",")),
                        default=(1, 32), help="samples per scale of check_onnx, "
                        "comma-separated (default 1,32)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1; onnxruntime's sessions keep "
                             "their default options)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    root = args.corpus.resolve()
    if not root.is_dir() or not any(root.rglob("*.onnx")):
        print(f"the VNN-COMP corpus is not at {root}: it belongs beside the repository at "
              "../shared/vnncomp (see its README.md), or give --corpus PATH", file=sys.stderr)
        return 2
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        result = run(args, root)
    finally:  # called in-process by tests: leave the thread count as it was
        torch.set_num_threads(threads)
    if not result["rows"]:
        print(f"no corpus network matches {','.join(args.networks)}", file=sys.stderr)
        return 2
    print_tables(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
