"""What the deviation search runs: the region as float32 boxes, and the network in its own
dtype by PyTorch (the GraphIR) and by onnxruntime (the deployed ONNX file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ..evaluate import evaluate
from ..ir import GraphIR
from ..properties.property import Property

RUN_BUDGET = 1 << 18
"""Input (or output) elements per batch run: batches stay a few MB whatever the network."""

Runner = Callable[[np.ndarray, tuple], np.ndarray]
"""float32 points (batch, n) and the input's per-sample shape -> float outputs (batch, m),
float64 copies (exact)."""


def _inward(bound, n: int, up: bool) -> np.ndarray:
    """A bound as float32, rounded into the box (a lower bound up, an upper bound down)."""
    exact = (bound.detach().cpu().to(torch.float64).numpy() if isinstance(bound, torch.Tensor)
             else np.asarray(bound, dtype=np.float64)).reshape(-1)
    if exact.size != n:
        raise ValueError(f"a region bound has {exact.size} elements, the network's input {n}")
    single = exact.astype(np.float32)
    wrong = single < exact if up else single > exact
    return np.where(wrong, np.nextafter(single, np.float32(np.inf if up else -np.inf)),
                    single).astype(np.float32)


def region_boxes(region, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The region as float32 (lower, upper) pairs of n elements, rounded inward; boxes
    holding no float32 are dropped.

    Args:
        region: A Property (every box), a (lower, upper) tuple, or a list of them.
        n: The input's number of elements.
    """
    if isinstance(region, Property):
        if region.num_inputs != n:
            raise ValueError(f"the property has {region.num_inputs} inputs, the network {n}")
        boxes = [(lo.astype(np.float32), hi.astype(np.float32))
                 for lo, hi in region.input_boxes_as(np.float32, "inward")]
    elif isinstance(region, tuple) and len(region) == 2:
        boxes = [(_inward(region[0], n, True), _inward(region[1], n, False))]
    elif isinstance(region, list):
        boxes = [b for pair in region for b in region_boxes(tuple(pair), n)]
    else:
        raise TypeError(f"region must be a Property, a (lower, upper) tuple or a list of them, "
                        f"not {type(region).__name__}")
    return [(lo, hi) for lo, hi in boxes if (lo <= hi).all()]


def float_runner(ir: GraphIR) -> Runner:
    """The GraphIR in its input's dtype by PyTorch's kernels (`ncet.evaluate`)."""
    dtype = getattr(torch, ir.inputs[0].dtype)

    def run(x: np.ndarray, shape) -> np.ndarray:
        out = evaluate(ir, torch.from_numpy(x).reshape(-1, *shape), dtype=dtype)
        outs = out if isinstance(out, tuple) else (out,)
        return torch.cat([o.reshape(len(x), -1).to(torch.float64) for o in outs], 1).numpy()
    return run


def onnxruntime_runner(path: str | Path, n: int) -> Runner:
    """The ONNX file as deployed: onnxruntime's CPU provider with its default session options
    (graph optimizations on). A file with a symbolic batch axis runs whole batches; one with
    a fixed batch of 1 runs each point alone. The outputs are concatenated, each flattened."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    first = session.get_inputs()[0]
    dims = list(first.shape)
    batched = bool(dims) and not isinstance(dims[0], int)
    rest = [d if isinstance(d, int) and d > 0 else 1 for d in (dims[1:] if batched else dims)]
    if int(np.prod(rest)) != n:
        raise ValueError(f"the ONNX file's input {first.name!r} has shape {dims}, not "
                         f"{n} elements per sample")
    dtype = {"tensor(double)": np.float64, "tensor(float16)": np.float16}.get(first.type,
                                                                               np.float32)

    def run(x: np.ndarray, shape) -> np.ndarray:
        feeds = [x.reshape(len(x), *rest)] if batched else [x[i].reshape(rest)
                                                           for i in range(len(x))]
        rows = []
        for feed in feeds:
            outs = session.run(None, {first.name: feed.astype(dtype)})
            size = len(feed) if batched else 1
            rows.append(np.concatenate([np.asarray(o, dtype=np.float64).reshape(size, -1)
                                        for o in outs], 1))
        return np.concatenate(rows)
    return run
