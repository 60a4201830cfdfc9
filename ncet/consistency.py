"""Checking that a GraphIR's declared shapes and dtypes agree with what its nodes compute."""

from __future__ import annotations

import torch

from .errors import GraphIRFormatError
from .evaluate import EVALUATORS
from .ir import GraphIR

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64,
}
"""The dtype names a GraphIR node may declare (every graph tensor is floating point)."""


def check_consistency(ir: GraphIR) -> None:
    """Run the graph on shapes alone and compare every node with what it declares.

    Each node is evaluated once, in float64 on zero inputs at batch size 1, so a graph whose
    attributes, constants, Input shapes or declared node shapes contradict one another is
    caught here rather than as a RuntimeError from `evaluate` later. (Meta tensors would
    skip the arithmetic but cost milliseconds per node in PyTorch's Python meta kernels; one
    sample in float64 costs less.)

    Args:
        ir: A GraphIR, typically one just read from a file.

    Raises:
        GraphIRFormatError: A node declares an unknown dtype, cannot be computed from its
            inputs, attributes and constants, or computes another per-sample shape than the
            one it declares. The message names the node.
    """
    for position, node in enumerate(ir.inputs):
        if node.attrs["index"] != position:
            raise GraphIRFormatError(
                f"node {node.name!r} (Input) is forward() argument {position} in graph order "
                f"but declares index {node.attrs['index']}")
    consts = {name: t.to(torch.float64) for name, t in ir.constants.items()}
    env: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        _run(ir, consts, env)


def _run(ir: GraphIR, consts: dict[str, torch.Tensor], env: dict[str, torch.Tensor]) -> None:
    for node in ir.nodes:
        if node.op_type == "Output":
            continue
        if node.dtype not in DTYPES:
            raise GraphIRFormatError(f"node {node.name!r}: dtype {node.dtype!r:.80} is not one "
                                     f"of {sorted(DTYPES)}")
        if node.op_type == "Input":
            value = torch.zeros((1, *node.shape), dtype=torch.float64)
        else:
            try:
                value = EVALUATORS[node.op_type](node, [env[i] for i in node.inputs], consts)
            except Exception as exc:  # any failure of the op on these shapes is the file's
                raise GraphIRFormatError(
                    f"node {node.name!r} ({node.op_type}) cannot be computed from its inputs, "
                    f"attributes and constants: {exc}".split("\n")[0][:400]) from None
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != (1, *node.shape):
            raise GraphIRFormatError(
                f"node {node.name!r} ({node.op_type}) declares per-sample shape "
                f"{list(node.shape)} but computes {list(value.shape[1:])}")
        env[node.name] = value
