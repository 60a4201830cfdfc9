"""check_onnx for an imported GraphIR: onnxruntime runs the *original* file, and every IR
node is held to its certified bound at the ONNX value it is named after (docs/onnx-import.md,
"The certificate"). Before any number, the file is imported again (`from_onnx` is
deterministic): an IR node that differs from the file's import, a constant whose bits
differ, or a node the file computes that the GraphIR lacks is a violation there."""

from __future__ import annotations

from collections.abc import Callable

import onnx
import torch

from ..ir import CONSTANT_ATTRS, GraphIR
from .importer import import_model


def is_import(ir: GraphIR) -> bool:
    """Whether `ir` came from `from_onnx` (its nodes' provenance is an ONNX file's)."""
    return ir.nodes[-1].source.fx_op == "onnx"


def _same_constant(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same dtype, shape and bits (a 0-d constant too; -0.0 is not 0.0)."""
    return a.dtype == b.dtype and a.shape == b.shape and \
        a.detach().cpu().contiguous().numpy().tobytes() == \
        b.detach().cpu().contiguous().numpy().tobytes()


def import_faults(ir: GraphIR, model: onnx.ModelProto) -> tuple[dict[str, str], str]:
    """IR node name -> how the GraphIR departs from the file's import, and the file's batch
    mode ("symbolic", "fixed" or "none").

    Raises:
        ValueError: The file does not import (its first problem named), or its inputs are
            not the GraphIR's.
    """
    report, _, mode = import_model(model, strict=False)
    if report.graph is None:
        first = report.errors[0] if report.errors else None
        raise ValueError("the file does not import to GraphIR, so it cannot be the file "
                         f"this GraphIR was imported from: {first}")
    mine, theirs = ir, report.graph
    if [n.name for n in mine.inputs] != [n.name for n in theirs.inputs]:
        raise ValueError(f"the file's inputs {[n.name for n in theirs.inputs]} are not the "
                         f"GraphIR's {[n.name for n in mine.inputs]}: was it imported from "
                         "this file?")
    faults: dict[str, str] = {}
    operators = [n for n in mine.nodes if n.op_type not in ("Input", "Output")]
    for node in mine.nodes[:-1]:
        try:
            other = theirs.node(node.name)
        except KeyError:
            faults[node.name] = "the file has no value of this name"
            continue
        if other != node:
            faults[node.name] = f"the file imports as {other!r}, the GraphIR has {node!r}"
            continue
        for key in CONSTANT_ATTRS[node.op_type]:
            name = node.attrs.get(key)
            if name and not _same_constant(mine.constants[name], theirs.constants[name]):
                faults[node.name] = f"constant {name!r} differs from the file's value"
    extra = [n.name for n in theirs.nodes[:-1] if n.name not in {m.name for m in mine.nodes}]
    if mine.outputs != theirs.outputs or extra:
        why = f"the file returns {list(theirs.outputs)}" if mine.outputs != theirs.outputs \
            else f"the file computes {extra[:3]} that the GraphIR lacks"
        for name in mine.outputs:
            faults.setdefault(name if name in {n.name for n in operators} else
                              (operators[-1].name if operators else name), why)
    return faults, mode


def one_sample_at_a_time(run: Callable, mode: str) -> Callable:
    """A file with a batch of 1, or without a batch axis (it takes one sample as it stands),
    runs each sample of a chunk on its own (without its batch axis, for the latter), and
    the chunk's values are the samples' stacked: the certificate's arithmetic then runs on
    whole chunks, not sample by sample."""
    if mode == "symbolic":
        return run

    def per_sample(inputs: list[torch.Tensor]):
        runs = [run([x[i] if mode == "none" else x[i:i + 1] for x in inputs])
                for i in range(inputs[0].shape[0])]
        glue = torch.stack if mode == "none" else torch.cat
        values = {k: glue([values[k] for values, _ in runs]) for k in runs[0][0]}
        outputs = [glue([outs[j] for _, outs in runs]) for j in range(len(runs[0][1]))]
        return values, outputs
    return per_sample
