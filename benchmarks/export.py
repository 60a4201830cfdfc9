"""Export speed (issue 19, item 7): NCET's ONNX export against torch.onnx.export, in one run.

Measures, on benchmarks/scale.py's depth-scalable models, as medians of CPU time on one
torch thread (scale.py's `medians`, the calls compared run interleaved after a warm-up):
  * `ncet.convert` + `ncet.to_onnx` together (writing the file) against `torch.onnx.export`
    with its defaults (the dynamo exporter in torch 2.13) and against its TorchScript path
    (`dynamo=False`), on the same model at --export-nodes FX nodes (target: >= 30x and
    >= 2x faster); both exporters' console output is silenced;
  * `to_onnx` alone, microseconds per FX node at --sizes up to 20,000 nodes, with the share
    of it spent hashing the GraphIR for `metadata_props`, the sha256 of the bytes `ncet.save`
    writes (the stamp before `hash_graphir`) timed beside it, `ncet.convert` of the same
    model right after (the machine's pace in the same run), and the fitted exponent k of
    time ~ nodes^k over the sizes >= 1,000 nodes (target: <= 20 us per node, k <= 1.1);
  * `ncet.check_onnx` against one onnxruntime forward of the exported file (graph
    optimizations off, the session built and run once) + one float64 `ncet.evaluate` of the
    same samples (target: <= 3x), and against `check_exactness` of the PyTorch model on
    them, when `ncet.check_onnx` exists: on small-layer models (scale.py's families at
    --check-nodes, the bundled residual_cnn; per-node overhead dominates) and on real
    networks (benchmarks/cnn_check.py's CIFAR ResNet-18 and VGG-11-BN, exported by to_onnx;
    the convolutions dominate) at --cnn-samples, --cnn-repeats; on the MLP, also against
    its least work (`minimal_check_onnx`: onnxruntime's forward with every value exposed and
    the certificate's arithmetic as straight-line code), which bounds what any check_onnx
    can reach there.

Usage: python benchmarks/export.py [--quick] [--sizes 1000,20000] [--json out.json]
Ratios are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import json
import os
import platform
import sys
import tempfile
import warnings

import torch
import torch.fx

import ncet
from ncet.format.file import file_sha256
from ncet.frontend.canonicalize import cyclic_gc_paused

if __package__:  # imported as benchmarks.export (the tests)
    from . import cnn_check, eager_floor
    from .scale import FAMILIES, build, fit_exponent, inputs, medians
else:  # run as a script (python benchmarks/export.py): benchmarks/ itself is on sys.path
    import cnn_check
    import eager_floor
    from scale import FAMILIES, build, fit_exponent, inputs, medians

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SIZES = (300, 1000, 3000, 10000, 20000)
QUICK_SIZES = (40, 80)
CHECK_MODELS = ("mlp", "resnet", "residual_cnn", "resnet18_cifar", "vgg11_bn_cifar")
"""Models of the check_onnx row: scale.py's families at --check-nodes, bundled examples, and
cnn_check.py's networks."""
REAL_NETWORKS = frozenset(cnn_check.MODELS)
"""The check models that are real networks (the rest have small layers)."""


@contextlib.contextmanager
def silenced():
    """Nothing reaches the console: Python's streams, file descriptors 1 and 2 (the dynamo
    exporter's progress lines, torch's logging handlers) and warnings go to /dev/null."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as sink, warnings.catch_warnings(), \
            contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def fx_nodes(model) -> int:
    return len(torch.fx.symbolic_trace(model).graph.nodes)


def onnx_nodes(path: str) -> int:
    import onnx

    return len(onnx.load(path, load_external_data=False).graph.node)


# --- (a), (b): convert + to_onnx against torch.onnx.export -----------------------------------
def exporters(model, shape, repeats: int) -> dict:
    """convert + to_onnx, torch.onnx.export (defaults) and torch.onnx.export(dynamo=False)
    of the same model, each writing its file; the exporters trace at batch 2."""
    x = inputs(shape, 2)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {k: os.path.join(tmp, f"{k}.onnx") for k in ("ncet", "dynamo", "torchscript")}

        def dynamo():
            with silenced():
                torch.onnx.export(model, (x,), paths["dynamo"])

        def torchscript():
            with silenced():
                torch.onnx.export(model, (x,), paths["torchscript"], dynamo=False)

        t = medians({"ncet": lambda: ncet.to_onnx(ncet.convert(model, shape), paths["ncet"]),
                     "dynamo": dynamo, "torchscript": torchscript}, repeats, min_seconds=0)
        sizes = {k: onnx_nodes(p) for k, p in paths.items()}
    return {"ncet_s": t["ncet"], "dynamo_s": t["dynamo"], "torchscript_s": t["torchscript"],
            "ncet_wall_s": t["ncet/wall"], "dynamo_wall_s": t["dynamo/wall"],
            "torchscript_wall_s": t["torchscript/wall"],
            "dynamo_over_ncet": t["dynamo"] / t["ncet"],
            "torchscript_over_ncet": t["torchscript"] / t["ncet"],
            **{f"onnx_nodes/{k}": v for k, v in sizes.items()}}


# --- (c): to_onnx alone ----------------------------------------------------------------------
def _graphir_hash():
    """The GraphIR hash to_onnx stamps into metadata_props (`hash_graphir`, the constants' bytes
    read as to_onnx reads them), if it is still there."""
    from ncet.onnx import model

    return getattr(model, "graphir_sha256", None)


def to_onnx_row(model, shape, repeats: int) -> dict:
    ir = ncet.convert(model, shape)
    nodes = fx_nodes(model)
    fns = {"to_onnx": lambda: ncet.to_onnx(ir)}
    digest = _graphir_hash()
    if digest is not None:
        fns["hash"] = lambda: digest(ir)
    def save_sha256():  # the stamp before hash_graphir, timed as to_onnx timed it
        with cyclic_gc_paused():
            file_sha256(ir)

    fns["save_sha256"] = save_sha256
    t = medians(fns, repeats)
    # the machine's pace, right after: not interleaved, as convert leaves cyclic garbage (its
    # traced graph) that the collector would free inside the next call timed
    gc.collect()
    t["convert"] = medians({"convert": lambda: ncet.convert(model, shape)}, repeats)["convert"]
    gc.collect()
    row = {"nodes": nodes, "to_onnx_s": t["to_onnx"],
           "to_onnx_us_per_node": 1e6 * t["to_onnx"] / nodes,
           "convert_s": t["convert"], "to_onnx_over_convert": t["to_onnx"] / t["convert"],
           "save_sha256_s": t["save_sha256"],
           "save_sha256_us_per_node": 1e6 * t["save_sha256"] / nodes}
    if digest is not None:
        row.update({"hash_s": t["hash"], "hash_us_per_node": 1e6 * t["hash"] / nodes})
    return row


# --- (d): check_onnx against its floor -------------------------------------------------------
def check_model(name: str, check_nodes: int, mlp_width: int):
    if name in FAMILIES:
        return build(name, check_nodes, mlp_width)
    if name in REAL_NETWORKS:
        return cnn_check.build(name)
    from ncet.examples import EXAMPLES

    example = EXAMPLES[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = example.build().eval()
    (shape,) = example.input_shapes
    return model, tuple(shape)


def check_row(name: str, check_nodes: int, mlp_width: int, samples: int, repeats: int) -> dict:
    """check_onnx on `samples` inputs against one onnxruntime forward (its session built
    with graph optimizations off, as check_onnx runs the file) + one float64 evaluate."""
    import onnxruntime as ort

    model, shape = check_model(name, check_nodes, mlp_width)
    ir = ncet.convert(model, shape)
    exported = ncet.to_onnx(ir)
    data = exported.SerializeToString()
    x = inputs(shape, samples)
    feed_name = exported.graph.input[0].name
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = torch.get_num_threads()
    sessions = []

    def session():
        sessions.append(ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]))

    def forward():
        sessions[-1].run(None, {feed_name: x.numpy()})

    def floor():
        session()
        forward()
        ncet.evaluate(ir, x)

    # onnxruntime on as many threads as torch in both (check_onnx's own default is
    # onnxruntime's, every core)
    threads = ({"threads": torch.get_num_threads()}
               if "threads" in inspect.signature(ncet.check_onnx).parameters else {})
    reports = []
    calls = {"floor": floor, "session": session, "forward": forward,
             "evaluate": lambda: ncet.evaluate(ir, x),
             "check": lambda: reports.append(ncet.check_onnx(ir, exported, x, **threads)),
             "check_exactness": lambda: ncet.check_exactness(model, ir, x)}
    if name == "mlp":
        calls["minimal"] = minimal_check_onnx(model, ir, exported, x)
    t = medians(calls, repeats)
    report = reports[-1]
    minimal = t.get("minimal")
    return {"model": name, "kind": "real network" if name in REAL_NETWORKS else "small layers",
            "nodes": fx_nodes(model), "samples": samples, "repeats": repeats,
            "floor_s": t["floor"], "session_s": t["session"], "forward_s": t["forward"],
            "evaluate_s": t["evaluate"], "check_s": t["check"],
            "check_over_floor": t["check"] / t["floor"],
            "check_over_forward_and_evaluate": t["check"] / (t["forward"] + t["evaluate"]),
            "check_exactness_s": t["check_exactness"],
            "check_over_check_exactness": t["check"] / t["check_exactness"],
            "minimal_s": minimal,
            "minimal_over_floor": None if minimal is None else minimal / t["floor"],
            "check_over_minimal": None if minimal is None else t["check"] / minimal,
            "ok": bool(report.ok), "verdict": str(report).splitlines()[0]}


def minimal_check_onnx(model, ir: ncet.GraphIR, exported, x: torch.Tensor):
    """check_onnx's least work on scale.py's MLP, as a call: onnxruntime's session with every
    value exposed, one forward, and the certificate's arithmetic on those values as
    straight-line code (eager_floor.minimal_check; tests/test_benchmarks.py holds its ratios
    equal to check_onnx's report). Above 3 x the floor, no check_onnx meets the target."""
    from ncet.onnx.runtime import onnxruntime_runner

    steps = eager_floor.prepare(model, ir)

    def minimal():
        values, _ = onnxruntime_runner(ir, exported, torch.get_num_threads())([x])
        return eager_floor.minimal_check(model, steps, x,
                                         [values[node.name] for _, node, *_ in steps])
    return minimal


# --- the run ---------------------------------------------------------------------------------
def machine() -> dict:
    """cnn_check's machine record, plus what this benchmark also depends on."""
    import onnx
    import onnxruntime

    try:
        import onnxscript
        onnxscript_version = onnxscript.__version__
    except ImportError:
        onnxscript_version = None
    return {**cnn_check.machine(), "processor": platform.processor(),
            "load_average": os.getloadavg(), "python": platform.python_version(),
            "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
            "onnxscript": onnxscript_version}


def run(args) -> dict:
    sizes = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    result = {"machine": machine(),
              "settings": {"families": list(args.families), "export_nodes": args.export_nodes,
                           "sizes": list(sizes), "repeats": args.repeats,
                           "export_repeats": args.export_repeats,
                           "check_models": list(args.check_models),
                           "check_nodes": args.check_nodes, "samples": args.samples,
                           "cnn_samples": args.cnn_samples, "cnn_repeats": args.cnn_repeats,
                           "mlp_width": args.mlp_width, "threads": args.threads},
              "exporters": [], "to_onnx": [], "fits": {}, "check_onnx": []}
    for family in args.families:
        # warm-up: every exporter once on a small model (imports, registries, caches)
        model, shape = build(family, min(40, args.export_nodes), args.mlp_width)
        exporters(model, shape, 1)
        to_onnx_row(model, shape, 1)
        model, shape = build(family, args.export_nodes, args.mlp_width)
        row = {"model": family, "nodes": fx_nodes(model),
               **exporters(model, shape, args.export_repeats)}
        result["exporters"].append(row)
        _progress(f"{family} {row['nodes']} nodes: ncet {row['ncet_s']:.3f} s, dynamo "
                  f"{row['dynamo_s']:.2f} s, torchscript {row['torchscript_s']:.2f} s")
        rows = []
        for size in sizes:
            model, shape = build(family, size, args.mlp_width)
            rows.append({"model": family, **to_onnx_row(model, shape, args.repeats)})
            _progress(f"{family} {rows[-1]['nodes']} nodes: to_onnx "
                      f"{rows[-1]['to_onnx_s']:.3f} s")
        result["to_onnx"] += rows
        result["fits"][family] = {key: fit_exponent(rows, key)
                                  for key in ("to_onnx_s", "hash_s") if key in rows[0]}
    if not hasattr(ncet, "check_onnx"):
        result["check_onnx"] = "not available"
    else:
        for name in args.check_models:
            real = name in REAL_NETWORKS
            result["check_onnx"].append(check_row(
                name, args.check_nodes, args.mlp_width,
                args.cnn_samples if real else args.samples,
                args.cnn_repeats if real else args.repeats))
            _progress(f"check_onnx {name}: {result['check_onnx'][-1]['check_s']:.3f} s")
    return result


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_tables(result: dict) -> None:
    m, s = result["machine"], result["settings"]
    print(f"date {m['date']}; machine {m['cpu']} (platform.processor() "
          f"{m['processor']!r}), nproc {m['nproc']}, torch threads {m['torch_threads']}, "
          f"load {', '.join(f'{v:.1f}' for v in m['load_average'])}; torch {m['torch']}, "
          f"onnx {m['onnx']}, onnxruntime {m['onnxruntime']}, onnxscript {m['onnxscript']}; "
          f"git {m['git_head']}")
    print(f"\nconvert + to_onnx against torch.onnx.export (CPU s, medians of "
          f"{s['export_repeats']} interleaved runs; each writes its file; ratios > 1: NCET "
          "is faster)")
    print(f"{'model':<7}{'nodes':>7}{'ncet s':>9}{'dynamo s':>10}{'dyn/ncet':>10}"
          f"{'TS s':>8}{'TS/ncet':>9}{'onnx nodes ncet/dynamo/TS':>28}")
    for r in result["exporters"]:
        counts = "/".join(str(r[f"onnx_nodes/{k}"]) for k in ("ncet", "dynamo", "torchscript"))
        print(f"{r['model']:<7}{r['nodes']:>7}{r['ncet_s']:>9.3f}{r['dynamo_s']:>10.2f}"
              f"{r['dynamo_over_ncet']:>10.1f}{r['torchscript_s']:>8.2f}"
              f"{r['torchscript_over_ncet']:>9.1f}{counts:>28}")
    print("\nto_onnx alone (CPU s, medians), us per FX node; hash: the GraphIR hash inside "
          "it; save sha256: the sha256 of the bytes ncet.save writes (file_sha256, timed in the "
          "same run for scale)")
    print(f"{'model':<7}{'nodes':>7}{'to_onnx s':>11}{'us/node':>9}{'hash us/node':>14}"
          f"{'save sha256 us/node':>21}{'convert s':>11}{'to_onnx/convert':>17}")
    for r in result["to_onnx"]:
        hash_cell = f"{r['hash_us_per_node']:>14.1f}" if "hash_s" in r else f"{'-':>14}"
        print(f"{r['model']:<7}{r['nodes']:>7}{r['to_onnx_s']:>11.3f}"
              f"{r['to_onnx_us_per_node']:>9.1f}{hash_cell}{r['save_sha256_us_per_node']:>21.1f}"
              f"{r['convert_s']:>11.3f}{r['to_onnx_over_convert']:>17.2f}")
    print("fitted k (time ~ nodes^k over sizes >= 1,000 nodes):")
    for family, fits in result["fits"].items():
        print(f"  {family:<7}" + "  ".join(f"{key.removesuffix('_s')}={_fmt(k)}"
                                           for key, k in fits.items()))
    print("\ncheck_onnx against one onnxruntime forward (session built, optimizations off) + "
          "one float64 evaluate; c_e: check_exactness of the PyTorch model on the same samples; "
          "min: check_onnx's arithmetic as straight-line code (the MLP only)")
    if result["check_onnx"] == "not available":
        print("  ncet.check_onnx: not available")
        return
    print(f"{'model':<15}{'kind':<14}{'nodes':>6}{'samples':>8}{'floor s':>9}{'session s':>10}"
          f"{'forward s':>10}{'eval s':>8}{'check s':>9}{'chk/floor':>10}"
          f"{'chk/(fwd+eval)':>15}{'c_e s':>8}{'chk/c_e':>8}{'min/floor':>10}{'chk/min':>8}"
          "  verdict")
    for r in result["check_onnx"]:
        print(f"{r['model']:<15}{r['kind']:<14}{r['nodes']:>6}{r['samples']:>8}"
              f"{r['floor_s']:>9.3f}"
              f"{r['session_s']:>10.3f}{r['forward_s']:>10.3f}{r['evaluate_s']:>8.3f}"
              f"{r['check_s']:>9.3f}{r['check_over_floor']:>10.2f}"
              f"{r['check_over_forward_and_evaluate']:>15.2f}{r['check_exactness_s']:>8.3f}"
              f"{r['check_over_check_exactness']:>8.2f}"
              f"{_fmt(r.get('minimal_over_floor')):>10}{_fmt(r.get('check_over_minimal')):>8}"
              f"  {r['verdict']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, one repeat: a smoke test, not a measurement")
    parser.add_argument("--families", type=lambda s: tuple(s.split(",")), default=FAMILIES,
                        help=f"model families, comma-separated (default {','.join(FAMILIES)})")
    parser.add_argument("--export-nodes", type=int, default=1000,
                        help="approximate FX nodes of the model exported by all three")
    parser.add_argument("--export-repeats", type=int, default=3,
                        help="interleaved runs of the three exporters (the dynamo exporter "
                             "takes 10-15 s at 1,000 nodes)")
    parser.add_argument("--sizes", type=lambda s: tuple(int(v) for v in s.split(",")),
                        help="approximate FX node counts of the to_onnx sweep, comma-separated "
                             f"(default {','.join(map(str, DEFAULT_SIZES))})")
    parser.add_argument("--repeats", type=int, default=3,
                        help="at least this many runs of to_onnx and of check_onnx (a fast "
                             "call repeats until 0.3 s were spent, at most 30 times)")
    parser.add_argument("--check-models", type=lambda s: tuple(s.split(",")),
                        default=CHECK_MODELS, help="models of the check_onnx row: scale.py "
                        "families and bundled examples (default "
                        f"{','.join(CHECK_MODELS)})")
    parser.add_argument("--check-nodes", type=int, default=300,
                        help="approximate FX nodes of the families checked with check_onnx "
                             "(default 300: at 1,000 the 64-wide MLP's end-to-end bounds "
                             "overflow float64 and check_exactness too leaves nodes unchecked)")
    parser.add_argument("--samples", type=int, default=256,
                        help="samples for check_onnx on the small-layer models")
    parser.add_argument("--cnn-samples", type=int, default=32,
                        help="samples for check_onnx on the real networks (default 32: a "
                             "ResNet-18 check takes about 7 s on one thread)")
    parser.add_argument("--cnn-repeats", type=int, default=2,
                        help="runs of each call on the real networks (default 2)")
    parser.add_argument("--mlp-width", type=int, default=64,
                        help="width of the mlp family's layers (default 64)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch (and onnxruntime) intra-op threads (default 1)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.repeats, args.export_repeats = 1, 1
        args.export_nodes = min(args.export_nodes, 60)
        args.check_nodes = min(args.check_nodes, 60)
        args.samples = min(args.samples, 16)
        args.cnn_samples, args.cnn_repeats = min(args.cnn_samples, 2), 1
    result = run(args)
    print_tables(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
