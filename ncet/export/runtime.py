"""check_onnx: onnxruntime's execution of an exported file held to GraphIR's certified bounds,
node by node (docs/exactness.md §6), so that model -> GraphIR -> ONNX -> runtime is
certified link by link."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import helper, numpy_helper

from ..exactness.arithmetic import ArithmeticModel
from ..exactness.report import VALUE_SAMPLE_SIZE, ExactnessReport
from ..exactness.runtime_check import check_runtime
from ..ir import CONSTANT_ATTRS, GraphIR
from .builder import ELEMENT_TYPES
from .model import graphir_sha256

PROBE_ELEMENTS = 1 << 17
"""Elements per onnxruntime intra-op thread in the arithmetic probes, so that every thread of
its pool computes a share of the probe."""

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
    """x * y and x + y elementwise, and x's rows times w (a Gemm), as one ONNX model."""
    elem = ELEMENT_TYPES[dtype]
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "y"], ["product"]),
         helper.make_node("Add", ["x", "y"], ["sum"]),
         helper.make_node("Gemm", ["rows", "w"], ["dot"])],
        "ncet_probe",
        [helper.make_tensor_value_info(name, elem, shape)
         for name, shape in (("x", [n]), ("y", [n]), ("rows", [64, 16]), ("w", [16, 16]))],
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
    kernels, on every thread of its pool: subnormal operands read as zero, subnormal results
    flushed, another rounding mode, a Gemm that flushes subnormal operands. Empty when none."""
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

        rows = np.full((64, 16), tiny / 4, np_dtype)  # subnormal; each dot: 256 tiny
        w = np.full((16, 16), 64.0, np_dtype)
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


def read_onnxruntime_arithmetic(threads: int = 0) -> ArithmeticModel:
    """The arithmetic onnxruntime is declared to follow, with what its probes found."""
    outside = probe_onnxruntime(threads)
    notes = ["IEEE 754 binary arithmetic, round to nearest, any summation order, FMA allowed",
             "u = 2^-24 (float32), 2^-53 (float64); underflow: eta = smallest normal per "
             "rounding, results may flush to zero", *ORT_ASSUMPTIONS]
    if not outside:
        notes.append("probed on every thread of onnxruntime's pool: subnormals kept, round to "
                     "nearest, Gemm keeps subnormal operands")
    notes.extend(f"NOT CERTIFIED: {reason}" for reason in outside)
    flags = {"onnxruntime.version": ort.__version__,
             "execution_provider": "CPUExecutionProvider",
             "graph_optimization_level": "ORT_DISABLE_ALL",
             "intra_op_num_threads": str(threads or "default"),
             "session.set_denormal_as_zero": "0"}
    return ArithmeticModel(0.0, not outside, flags, tuple(notes))


def _load(onnx_model) -> onnx.ModelProto:
    if isinstance(onnx_model, onnx.ModelProto):
        return onnx_model
    if isinstance(onnx_model, (str, os.PathLike)):
        try:
            return onnx.load(os.fspath(onnx_model))
        except OSError:
            raise
        except Exception as exc:
            raise ValueError(f"{os.fspath(onnx_model)!r} is not an ONNX model "
                             f"({type(exc).__name__})") from None
    raise TypeError(f"check_onnx() expects an onnx.ModelProto or a path, not "
                    f"{type(onnx_model).__name__}")


def _fixed_batch(ir: GraphIR, graph: onnx.GraphProto) -> int | None:
    """The file's batch size (None for a symbolic one), after checking that its inputs are
    the IR's: names in forward() order, dtypes and per-sample shapes."""
    initializers = {t.name for t in graph.initializer}
    feeds = [i for i in graph.input if i.name not in initializers]
    expected = sorted(ir.inputs, key=lambda n: n.attrs["index"])
    if [i.name for i in feeds] != [n.name for n in expected]:
        raise ValueError(f"the file's inputs {[i.name for i in feeds]} are not the GraphIR's "
                         f"Input nodes {[n.name for n in expected]}: was it exported from "
                         "this GraphIR?")
    sizes = set()
    for value, node in zip(feeds, expected):
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if tensor.elem_type != ELEMENT_TYPES.get(node.dtype) or dims[1:] != list(node.shape):
            raise ValueError(f"the file's input {value.name!r} is {dims} of element type "
                             f"{tensor.elem_type}, the GraphIR's [N, *{list(node.shape)}] "
                             f"{node.dtype}")
        sizes.add(dims[0] if dims else None)
    fixed = {s for s in sizes if s}
    return fixed.pop() if fixed else None


def structural_faults(ir: GraphIR, graph: onnx.GraphProto) -> dict[str, str]:
    """IR node name -> what in the file departs from the GraphIR: no value named after the
    node, an initializer with other bytes than the IR constant of the same name, a node of
    its pattern that reads a value which is not one of its inputs."""
    faults: dict[str, str] = {}
    operators = {n.name: n for n in ir.nodes if n.op_type not in ("Input", "Output")}
    produced = {out for node in graph.node for out in node.output}
    for name in operators:
        if name not in produced:
            faults[name] = f"the file has no value named {name!r}"
    initializers = {t.name: t for t in graph.initializer}
    users: dict[str, list[str]] = {}
    for node in operators.values():
        for attr in CONSTANT_ATTRS[node.op_type]:
            if node.attrs[attr] is not None:
                users.setdefault(node.attrs[attr], []).append(node.name)
    for const, names in users.items():
        tensor = initializers.get(const)
        ours = ir.constants[const].detach().cpu().contiguous().numpy()
        theirs = numpy_helper.to_array(tensor) if tensor is not None else None
        if theirs is None or theirs.dtype != ours.dtype or theirs.shape != ours.shape \
                or theirs.tobytes() != ours.tobytes():
            for name in names:
                faults.setdefault(name, f"the initializer {const!r} is not the GraphIR's "
                                        "constant, bit for bit")
    for node in graph.node:
        owner = next((o.partition("/")[0] for o in node.output
                      if o.partition("/")[0] in operators), None)
        if owner is None:
            continue
        allowed = set(operators[owner].inputs)
        for value in node.input:
            if value and value not in initializers and value not in allowed \
                    and value.partition("/")[0] != owner:
                faults.setdefault(owner, f"its ONNX node {node.name!r} ({node.op_type}) reads "
                                         f"{value!r}, which is not one of its inputs in the "
                                         "GraphIR")
    return faults


def onnxruntime_runner(ir: GraphIR, model: onnx.ModelProto, threads: int = 0
                       ) -> Callable[[list[torch.Tensor]], tuple]:
    """A `Run` for check_runtime: the file in onnxruntime with every IR node's value exposed
    as an extra graph output (the file itself is not changed)."""
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
    try:
        session = _session(exposed.SerializeToString(), threads)
    except Exception as exc:
        raise ValueError(f"onnxruntime cannot load the file: "
                         f"{str(exc).strip().splitlines()[0][:300]}") from None
    feeds = [i.name for i in session.get_inputs()]
    fetched = [*outputs, *names]

    def run(inputs: list[torch.Tensor]):
        values = session.run(fetched, {k: x.numpy() for k, x in zip(feeds, inputs)})
        tensors = [torch.from_numpy(np.ascontiguousarray(v)) for v in values]
        by_name = dict(zip(fetched, tensors))
        return by_name, tensors[:len(outputs)]
    return run


def check_onnx(ir: GraphIR, onnx_model, *inputs: torch.Tensor, samples_per_scale: int = 32,
               seed: int = 0, local: bool = True, end_to_end: bool = True, threads: int = 0,
               progress: bool | Callable[[int, int], None] = False,
               keep_samples: int = VALUE_SAMPLE_SIZE) -> ExactnessReport:
    """Run the exported file in onnxruntime and hold every IR node's value to its certified
    bound; see `ncet.check_onnx`."""
    if not isinstance(ir, GraphIR):
        raise TypeError(f"check_onnx() expects a GraphIR (from ncet.convert or ncet.load), "
                        f"not {type(ir).__name__}")
    model = _load(onnx_model)
    batch = _fixed_batch(ir, model.graph)
    faults = structural_faults(ir, model.graph)
    if len(model.graph.output) != len(ir.outputs):
        raise ValueError(f"the file has {len(model.graph.output)} outputs, the GraphIR "
                         f"{len(ir.outputs)}: was it exported from this GraphIR?")
    run = onnxruntime_runner(ir, model, threads)
    props = {p.key: p.value for p in model.metadata_props}
    stamp = props.get("ncet.graphir.sha256")
    origin = "" if stamp == graphir_sha256(ir) else \
        ("; the file's ncet.graphir.sha256 is not this GraphIR's" if stamp else
         "; the file carries no ncet.graphir.sha256")
    report = check_runtime(ir, run, *inputs, runtime=f"onnxruntime {ort.__version__}",
                           context=origin, arithmetic=read_onnxruntime_arithmetic(threads),
                           batch=batch, samples_per_scale=samples_per_scale, seed=seed,
                           local=local, end_to_end=end_to_end, faults=faults,
                           progress=progress, keep_samples=keep_samples)
    return report
