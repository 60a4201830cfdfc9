"""The network in float32 as deployed, at one input: onnxruntime on the ONNX file, PyTorch
eager on the nn.Module, or (neither given) NCET's float32 reference evaluator on the GraphIR.

onnxruntime runs as `check_onnx` runs it: the CPU provider, graph optimizations off, one
intra-op thread, subnormals kept. The input is X rounded to nearest float32 (what a float32
deployment is fed); its shape is the file's declared input shape with symbolic axes as 1 (as
the competition's scripts read it), the module's `input_shape`, or the GraphIR's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..ir import GraphIR


@dataclass(frozen=True)
class Run:
    """One float32 execution: who ran it and its flattened output (float64 copies of the
    float32 values, exact)."""

    runtime: str
    output: np.ndarray


def onnxruntime_run(data: bytes, x: np.ndarray) -> Run:
    """Run the ONNX file's bytes on x (flattened, float64 values) in onnxruntime."""
    import onnxruntime as ort

    from ..onnx.runtime import _session

    session = _session(data, 1)
    first = session.get_inputs()[0]
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in first.shape]
    dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64,
             "tensor(float16)": np.float16}.get(first.type, np.float32)
    if int(np.prod(shape)) != x.size:
        raise ValueError(f"the file's input {first.name!r} has shape {first.shape}, "
                         f"{int(np.prod(shape))} elements, and the witness {x.size}")
    feed = x.astype(dtype).reshape(shape)  # fed as the file declares (the scripts do too)
    out = session.run(None, {first.name: feed})[0]
    return Run(f"onnxruntime {ort.__version__} (CPU, graph optimizations off)",
               np.asarray(out, dtype=np.float64).reshape(-1))


def pytorch_run(model: torch.nn.Module, x: np.ndarray, input_shape) -> Run:
    """Run the module in eager PyTorch on x (float32, batch of one)."""
    t = torch.from_numpy(x.astype(np.float32)).reshape(1, *input_shape)
    with torch.no_grad():
        out = model(t)
    if isinstance(out, (tuple, list)):
        raise ValueError("the module returns several outputs; a VNN-COMP property numbers "
                         "the elements of one")
    return Run(f"PyTorch {torch.__version__} eager",
               out.detach().to(torch.float64).reshape(-1).numpy().copy())


def reference_run(ir: GraphIR, x: np.ndarray) -> Run:
    """NCET's reference evaluator in float32 (when no model or file is given)."""
    from ..evaluate import evaluate

    node = ir.inputs[0]
    t = torch.from_numpy(x.astype(np.float32)).reshape(1, *node.shape)
    out = evaluate(ir, t, dtype=torch.float32)
    return Run("ncet.evaluate float32 (no model or file given)",
               out.detach().to(torch.float64).reshape(-1).numpy().copy())


def deployed_runs(data: bytes | None, module: torch.nn.Module | None, ir: GraphIR,
                  x: np.ndarray, input_shape) -> list[Run]:
    """The network as deployed at x: onnxruntime on the file and eager PyTorch on the module,
    whichever are given; NCET's float32 evaluator of the GraphIR when neither is."""
    runs = []
    if data is not None:
        runs.append(onnxruntime_run(data, x))
    if module is not None:
        runs.append(pytorch_run(module, x, input_shape))
    return runs or [reference_run(ir, x)]
