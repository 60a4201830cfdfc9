"""check_onnx: onnxruntime's execution of an exported file held to GraphIR's certified bounds,
node by node (docs/exactness.md §6), so that model -> GraphIR -> ONNX -> runtime is
certified link by link."""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Callable, Mapping

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import helper

from ..exactness.arithmetic import ArithmeticModel
from ..exactness.check import DEFAULT_SCALES
from ..exactness.report import VALUE_SAMPLE_SIZE, ExactnessReport
from ..exactness.runtime_check import check_runtime
from ..ir import GraphIR
from .builder import ELEMENT_TYPES, ExportError
from .file_comparison import fixed_batch, structural_faults
from .import_check import import_faults, is_import, one_sample_at_a_time
from .model import graphir_sha256
from .onnx_file import ONNXFileError, read_model

PROBE_ELEMENTS = 1 << 17
"""Elements per onnxruntime intra-op thread in the elementwise probes: enough for
onnxruntime to split them over its pool."""

GEMM_PROBE = (1024, 64)
"""Rows and columns of the Gemm probe's subnormal operand (times a 64 x 64 weight): 4M
multiply-adds, enough for MLAS to split the product over threads."""

ORT_ASSUMPTIONS = (
    "onnxruntime's CPU execution provider with graph optimizations off (ORT_DISABLE_ALL): "
    "each ONNX node runs as its own kernel, nothing is fused or constant-folded",
    "its kernels follow the declared arithmetic: correctly rounded basic operations, sums in "
    "any order with FMA, Gemm/MatMul/Conv as inner products (MLAS GEMM, im2col or direct "
    "kernels; no Winograd or FFT), BatchNormalization as x * (scale / sqrt(var + eps)) + "
    "(B - mean * that) (batch_norm.h), pooling and ReduceMean as a sum divided by the count "
    "or multiplied by its reciprocal",
)


def _probe_model(dtype: str, n: int) -> bytes:
    """x * y and x + y elementwise, and rows times w (a Gemm), as one ONNX model."""
    elem = ELEMENT_TYPES[dtype]
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "y"], ["product"]),
         helper.make_node("Add", ["x", "y"], ["sum"]),
         helper.make_node("Gemm", ["rows", "w"], ["dot"])],
        "ncet_probe",
        [helper.make_tensor_value_info(name, elem, shape)
         for name, shape in (("x", [n]), ("y", [n]), ("rows", list(GEMM_PROBE)),
                             ("w", [GEMM_PROBE[1], GEMM_PROBE[1]]))],
        [helper.make_tensor_value_info(k, elem, None) for k in ("product", "sum", "dot")])
    opset = helper.make_opsetid("", 18)
    return helper.make_model(graph, opset_imports=[opset],
                             ir_version=helper.find_min_ir_version_for([opset])
                             ).SerializeToString()


def _session(data: bytes, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.set_denormal_as_zero", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def probe_onnxruntime(threads: int = 0) -> list[str]:
    """What departs from IEEE 754 round to nearest with gradual underflow in onnxruntime's
    kernels: subnormal operands read as zero, subnormal results flushed, another rounding
    mode, a Gemm that flushes subnormal operands. Empty when none.

    The probes run in a session of their own with the check's options; they are large
    enough for onnxruntime to split them over its intra-op threads, though it does not
    promise every thread a share. Its threads are created by the calling thread and inherit
    its floating-point environment (pthread_create), which the probes' own share on the
    calling thread sees."""
    found = []
    shares = max(threads or os.cpu_count() or 1, 1)
    n = shares * PROBE_ELEMENTS
    for dtype in ("float32", "float64"):
        np_dtype = np.dtype(dtype)
        tiny = np.finfo(np_dtype).tiny
        session = _session(_probe_model(dtype, n), threads)

        def run(x, y, rows, w, session=session, np_dtype=np_dtype):
            feeds = {"x": np.asarray(x, np_dtype), "y": np.asarray(y, np_dtype),
                     "rows": np.asarray(rows, np_dtype), "w": np.asarray(w, np_dtype)}
            return session.run(None, feeds)

        rows = np.full(GEMM_PROBE, tiny / 4, np_dtype)  # subnormal; each dot: 1024 tiny
        w = np.full((GEMM_PROBE[1], GEMM_PROBE[1]), 64.0, np_dtype)
        sparse = np.ones(n, np_dtype)
        sub = sparse.copy()
        sub[::1024] = tiny / 2
        product, _, dot = run(sub, np.full(n, 3.0, np_dtype), rows, w)
        if (product[::1024] == 0).any():
            found.append(f"denormals-are-zero in onnxruntime: subnormal {dtype} operands read "
                         "as zero")
        normal = sparse.copy()
        normal[::1024] = tiny
        product, _, _ = run(normal, np.full(n, 0.5, np_dtype), rows, w)
        if (product[::1024] == 0).any():
            found.append(f"flush-to-zero in onnxruntime: subnormal {dtype} results stored as "
                         "zero")
        if (dot == 0).any():
            found.append(f"onnxruntime's {dtype} Gemm flushes subnormal operands to zero")
        e = 2.0 ** -60 if dtype == "float64" else 2.0 ** -30
        ones = np.tile(np.array([1.0, 1.0, -1.0, -1.0], np_dtype), n // 4)
        tiny_steps = np.tile(np.array([e, -e, e, -e], np_dtype), n // 4)
        _, total, _ = run(ones, tiny_steps, rows, w)
        if (total != ones).any():
            found.append(f"onnxruntime's {dtype} additions do not round to nearest")
    return found


def _calling_thread_environment() -> tuple[bool, ...]:
    """What the probes test, read on the calling thread in numpy (a few microseconds): per
    dtype, whether a subnormal operand reads as zero, a subnormal result is flushed, and
    1 +- e, -1 +- e fail to round back (another rounding mode). All False: IEEE 754 round
    to nearest with gradual underflow."""
    seen = []
    with np.errstate(all="ignore"):
        for kind, e in ((np.float32, 2.0 ** -30), (np.float64, 2.0 ** -60)):
            tiny, e, one = np.finfo(kind).tiny, kind(e), kind(1.0)
            seen += [kind(tiny / 2) * kind(3.0) == 0, kind(tiny) * kind(0.5) == 0,
                     one + e != one, one - e != one, -one + e != -one, -one - e != -one]
    return tuple(bool(v) for v in seen)


_PROBED: dict[tuple, tuple[str, ...]] = {}
"""probe_onnxruntime's findings in this process, by (onnxruntime version, threads, cores,
the calling thread's floating-point environment)."""


def probed_onnxruntime(threads: int = 0) -> list[str]:
    """`probe_onnxruntime(threads)`, run once per process for each onnxruntime version,
    thread count and floating-point environment of the calling thread.

    What the probes find is a property of the sessions this process creates: their intra-op
    threads are created by the calling thread and inherit its floating-point environment.
    The cache key holds that environment, read afresh on every call
    (`_calling_thread_environment`), so a thread that turned on flush-to-zero since (a
    library built with -ffast-math, say) is probed again rather than given the old answer;
    the key also holds the thread count and `os.cpu_count()` (the probes' size). The cache
    lives in memory only: another process probes its own threads."""
    key = (ort.__version__, threads, os.cpu_count(), _calling_thread_environment())
    if key not in _PROBED:
        _PROBED[key] = tuple(probe_onnxruntime(threads))
    return list(_PROBED[key])


def read_onnxruntime_arithmetic(threads: int = 0) -> ArithmeticModel:
    """The arithmetic onnxruntime is declared to follow, with what its probes found (once per
    process and environment: `probed_onnxruntime`)."""
    outside = probed_onnxruntime(threads)
    notes = ["IEEE 754 binary arithmetic, round to nearest, any summation order, FMA allowed",
             "u = 2^-24 (float32), 2^-53 (float64); underflow: eta = smallest normal per "
             "rounding, results may flush to zero", *ORT_ASSUMPTIONS]
    if not outside:
        notes.append("probed in onnxruntime's kernels, split over its threads (which inherit "
                     "the calling thread's floating-point environment): subnormals kept, "
                     "round to nearest, Gemm keeps subnormal operands")
    notes.extend(f"NOT CERTIFIED: {reason}" for reason in outside)
    flags = {"onnxruntime.version": ort.__version__,
             "execution_provider": "CPUExecutionProvider",
             "graph_optimization_level": "ORT_DISABLE_ALL",
             "intra_op_num_threads": str(threads or "default"),
             "session.set_denormal_as_zero": "0"}
    return ArithmeticModel(0.0, not outside, flags, tuple(notes))


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _so_far(faults: Mapping[str, str]) -> str:
    if not faults:
        return ""
    shown = "; ".join(f"{name}: {why}" for name, why in list(faults.items())[:3])
    more = f" and {len(faults) - 3} more" if len(faults) > 3 else ""
    return f"; the file is not this GraphIR's export ({shown}{more})"


def onnxruntime_runner(ir: GraphIR, model: onnx.ModelProto, threads: int = 0,
                       faults: Mapping[str, str] = {}) -> Callable[[list[torch.Tensor]], tuple]:
    """A `Run` for check_runtime: the file in onnxruntime with every IR node's value exposed
    as an extra graph output (the file itself is not changed). The file as given is loaded
    first: the copy's extra outputs override its value_info, so a file that onnxruntime
    refuses could load as a copy.

    Raises:
        ONNXFileError: onnxruntime cannot load the file (`onnx-unloadable`) or, when the
            returned `run` is called, cannot run it (`onnx-run-failed`, `.name` the IR node
            whose ONNX node failed, when known); `faults` (the comparison with the export)
            are named in the message.
    """
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    graph = exposed.graph
    outputs = [o.name for o in graph.output]
    produced = {out for node in graph.node for out in node.output}
    names = [n.name for n in ir.nodes if n.op_type not in ("Input", "Output")
             and n.name in produced and n.name not in outputs]
    for name in names:
        graph.output.append(helper.make_tensor_value_info(
            name, ELEMENT_TYPES[ir.node(name).dtype], None))
    for data, what in ((model.SerializeToString(), "the file"),
                       (exposed.SerializeToString(), "the file with every IR node's value "
                                                     "as a graph output")):
        try:
            session = _session(data, threads)
        except Exception as exc:  # noqa: BLE001 - onnxruntime's Fail, InvalidGraph, ...
            raise ONNXFileError("onnx-unloadable", f"onnxruntime cannot load {what}: "
                                f"{_first_line(exc)}{_so_far(faults)}") from None
    feeds = [i.name for i in session.get_inputs()]
    fetched = [*outputs, *names]
    known = {n.name for n in ir.nodes}

    def run(inputs: list[torch.Tensor]):
        try:
            values = session.run(fetched, {k: x.detach().cpu().numpy()
                                           for k, x in zip(feeds, inputs)})
        except Exception as exc:  # noqa: BLE001 - onnxruntime's Fail, RuntimeException, ...
            found = re.search(r"Name:'([^']*)'", str(exc))
            node = found.group(1).partition("/")[0] if found else ""
            node = node if node in known else ""
            at = f" at IR node {node!r}" if node else ""
            raise ONNXFileError("onnx-run-failed", f"onnxruntime cannot run the file{at}: "
                                f"{_first_line(exc)}{_so_far(faults)}", name=node) from None
        tensors = [torch.from_numpy(np.array(v, copy=True)) for v in values]  # 0-d stays 0-d
        by_name = dict(zip(fetched, tensors))
        return by_name, tensors[:len(outputs)]
    return run


def whole_batches(per_scale, batch: int):
    """The fewest samples per scale, `per_scale` or more, whose total over the generated
    inputs' scales (`DEFAULT_SCALES`) splits into whole batches of a file's fixed `batch`.
    Anything but a non-negative int is returned as given, for the check to refuse."""
    if isinstance(per_scale, bool) or not isinstance(per_scale, int) or per_scale < 0 \
            or batch < 1:
        return per_scale
    step = batch // math.gcd(batch, len(DEFAULT_SCALES))
    return -(-per_scale // step) * step


def _stamped_by(ir: GraphIR, stamp: str | None) -> bool:
    """Whether a file's `ncet.graphir.hash` says it is this GraphIR's export (a stamp of
    another GraphIR, say the one a file was imported from, is not)."""
    if stamp is None:
        return False
    try:
        return stamp == graphir_sha256(ir)
    except ExportError:
        return False


def check_onnx(ir: GraphIR, onnx_model, *inputs: torch.Tensor, samples_per_scale: int = 32,
               seed: int = 0, local: bool = True, end_to_end: bool = True, threads: int = 0,
               progress: bool | Callable[[int, int], None] = False,
               keep_samples: int = VALUE_SAMPLE_SIZE) -> ExactnessReport:
    """Run the exported file in onnxruntime and hold every IR node's value to its certified
    bound; see `ncet.check_onnx`."""
    if not isinstance(ir, GraphIR):
        raise TypeError(f"check_onnx() expects a GraphIR (from ncet.convert or ncet.load), "
                        f"not {type(ir).__name__}")
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise TypeError(f"check_onnx(threads={threads!r}): onnxruntime's intra-op thread "
                        "count is an int (0: its default, one per core)")
    if threads < 0:
        raise ValueError(f"check_onnx(threads={threads!r}): a thread count is 0 (onnxruntime's "
                         "default, one per core) or more")
    threads = int(threads)
    inputs = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in inputs)
    imported = is_import(ir)
    model = read_model(onnx_model, "check_onnx", accept_bytes=True,
                       weights_as_inputs=imported)
    props = {p.key: p.value for p in model.metadata_props}
    stamp = props.get("ncet.graphir.hash")
    if imported and not _stamped_by(ir, stamp):  # the file this GraphIR was imported from
        faults, mode = import_faults(ir, model)
        run = one_sample_at_a_time(onnxruntime_runner(ir, model, threads, faults), mode)
        return check_runtime(ir, run, *inputs, runtime=f"onnxruntime {ort.__version__}",
                             context="; the file as imported (from_onnx)",
                             arithmetic=read_onnxruntime_arithmetic(threads),
                             samples_per_scale=samples_per_scale, seed=seed, local=local,
                             end_to_end=end_to_end, faults=faults, progress=progress,
                             keep_samples=keep_samples)
    batch = fixed_batch(ir, model.graph)
    if batch is not None and not inputs:
        samples_per_scale = whole_batches(samples_per_scale, batch)
    digest, unsaveable = None, None
    try:  # once, for the comparison with the export and for the file's stamp
        digest = graphir_sha256(ir)
    except ExportError as exc:  # raised below, after the file's own errors, as before
        unsaveable = exc
    faults = structural_faults(ir, model, batch, digest)
    if len(model.graph.output) != len(ir.outputs):
        raise ValueError(f"the file has {len(model.graph.output)} outputs, the GraphIR "
                         f"{len(ir.outputs)}: was it exported from this GraphIR?")
    run = onnxruntime_runner(ir, model, threads, faults)
    if unsaveable is not None:
        raise unsaveable
    origin = "" if stamp == digest else \
        ("; the file's ncet.graphir.hash is not this GraphIR's" if stamp else
         "; the file carries no ncet.graphir.hash")
    report = check_runtime(ir, run, *inputs, runtime=f"onnxruntime {ort.__version__}",
                           context=origin, arithmetic=read_onnxruntime_arithmetic(threads),
                           batch=batch, samples_per_scale=samples_per_scale, seed=seed,
                           local=local, end_to_end=end_to_end, faults=faults,
                           progress=progress, keep_samples=keep_samples)
    return report
