"""The reference evaluator: GraphIR run from its nodes and constants alone, op by op."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from .ir import OP_SCHEMAS, GraphIR, IRNode

Rule = Callable[[IRNode, list[torch.Tensor], dict[str, torch.Tensor]], torch.Tensor]


def _const(consts: dict[str, torch.Tensor], name: str | None) -> torch.Tensor | None:
    return None if name is None else consts[name]


def _linear(node, xs, c):
    return F.linear(xs[0], c[node.attrs["weight"]], _const(c, node.attrs["bias"]))


def _conv2d(node, xs, c):
    a = node.attrs
    top, bottom, left, right = a["padding"]
    x = xs[0]
    if a["padding_mode"] == "zeros" and top == bottom and left == right:
        padding = (top, left)
    else:
        mode = "constant" if a["padding_mode"] == "zeros" else a["padding_mode"]
        x = F.pad(x, (left, right, top, bottom), mode=mode)
        padding = (0, 0)
    return F.conv2d(x, c[a["weight"]], _const(c, a["bias"]), a["stride"], padding,
                    a["dilation"], a["groups"])


def _batch_norm(node, xs, c):
    a = node.attrs
    return F.batch_norm(xs[0], c[a["mean"]], c[a["var"]], _const(c, a["weight"]),
                        _const(c, a["bias"]), False, 0.0, a["eps"])


def _channels_last(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's CPU pooling kernels run 1.2-3x faster on channels-last tensors than on
    contiguous NCHW ones (max pooling 2.5-3x at 4x4 to 56x56), with identical results;
    the copy costs far less."""
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def _avg_pool2d(node, xs, c):
    a = node.attrs
    return F.avg_pool2d(_channels_last(xs[0]), a["kernel_size"], a["stride"], a["padding"],
                        a["ceil_mode"], a["count_include_pad"], a["divisor_override"]).contiguous()


def _max_pool2d(node, xs, c):
    a = node.attrs
    return F.max_pool2d(_channels_last(xs[0]), a["kernel_size"], a["stride"], a["padding"],
                        a["dilation"], a["ceil_mode"]).contiguous()


def _affine(node, xs, c):
    a = node.attrs
    x = xs[0]
    k = a["scalar"] if a["constant"] is None else c[a["constant"]]
    lhs, rhs = (x, k) if a["tensor_position"] == 0 else (k, x)
    kind, alpha = a["kind"], a["alpha"]
    if kind == "mul":
        return x * k
    if kind == "div":
        return x / k
    if isinstance(lhs, float):
        lhs = torch.full_like(x, lhs)
    if kind == "add":
        return torch.add(lhs, rhs, alpha=alpha)
    return torch.sub(lhs, rhs, alpha=alpha)


def _per_sample_index(index: list[Any]) -> tuple[Any, ...]:
    items: list[Any] = [slice(None)]
    for entry in index:
        items.append(slice(*entry) if isinstance(entry, (list, tuple)) else entry)
    return tuple(items)


def _flatten(node, xs, c):
    return torch.flatten(xs[0], node.attrs["start_dim"] + 1, node.attrs["end_dim"] + 1)


EVALUATORS: dict[str, Rule] = {
    "Linear": _linear,
    "Conv2d": _conv2d,
    "BatchNorm": _batch_norm,
    "AdaptiveAvgPool2d": lambda n, xs, c: F.adaptive_avg_pool2d(xs[0], n.attrs["output_size"]),
    "AvgPool2d": _avg_pool2d,
    "MaxPool2d": _max_pool2d,
    "Identity": lambda n, xs, c: xs[0],
    "ReLU": lambda n, xs, c: torch.relu(xs[0]),
    "LeakyReLU": lambda n, xs, c: F.leaky_relu(xs[0], n.attrs["negative_slope"]),
    "Flatten": _flatten,
    "Add": lambda n, xs, c: torch.add(xs[0], xs[1], alpha=n.attrs["alpha"]),
    "Sub": lambda n, xs, c: torch.sub(xs[0], xs[1], alpha=n.attrs["alpha"]),
    "ElementwiseAffine": _affine,
    "Concat": lambda n, xs, c: torch.cat(xs, n.attrs["axis"] + 1),
    "ReduceMean": lambda n, xs, c: torch.mean(xs[0], [a + 1 for a in n.attrs["axes"]],
                                              n.attrs["keepdim"]),
    "Reshape": lambda n, xs, c: xs[0].reshape(xs[0].shape[0], *n.attrs["shape"]),
    "Permute": lambda n, xs, c: xs[0].permute(0, *[p + 1 for p in n.attrs["perm"]]),
    "Transpose": lambda n, xs, c: xs[0].transpose(n.attrs["dim0"] + 1, n.attrs["dim1"] + 1),
    "GetItem": lambda n, xs, c: xs[0][_per_sample_index(n.attrs["index"])],
    "Slice": lambda n, xs, c: xs[0][_per_sample_index(n.attrs["index"])],
}
"""The reference semantics of every op_type on batched tensors, one small function each."""

assert set(EVALUATORS) | {"Input", "Output"} == set(OP_SCHEMAS), "an op_type has no evaluator"

_CONSTANTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

Step = tuple[Rule, IRNode, tuple[str, ...], tuple[str, ...]]


def _constants_as(ir: GraphIR, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The IR's constants converted once per dtype (exact into float64 from any real dtype the
    boundary admits)."""
    per_ir = _CONSTANTS.setdefault(ir, {})
    if dtype not in per_ir:
        per_ir[dtype] = {name: t.to(dtype) for name, t in ir.constants.items()}
    return per_ir[dtype]


def _plan(ir: GraphIR) -> list[Step]:
    """Per operator node: its evaluator, the node, its inputs' names and the values that die
    after it (so memory follows the graph's width, not its depth). Built once per graph."""
    plan = _PLANS.get(ir)
    if plan is None:
        keep = set(ir.nodes[-1].inputs)
        last: dict[str, int] = {}
        ops = [n for n in ir.nodes if n.op_type not in ("Input", "Output")]
        for i, node in enumerate(ops):
            for name in node.inputs:
                last[name] = i
        dying: dict[int, list[str]] = {}
        for name, i in last.items():
            if name not in keep:
                dying.setdefault(i, []).append(name)
        plan = _PLANS[ir] = [(EVALUATORS[n.op_type], n, tuple(n.inputs), tuple(dying.get(i, ())))
                             for i, n in enumerate(ops)]
    return plan


def evaluate(ir: GraphIR, *inputs: torch.Tensor, dtype: torch.dtype = torch.float64):
    """Run GraphIR on batched inputs, from its nodes and constants alone.

    Each value is freed after its last use.

    Args:
        ir: The graph, e.g. from `convert`.
        *inputs: One batched tensor per Input node (leading batch axis, any batch size).
        dtype: The arithmetic dtype; float64 by default.

    Returns:
        The output tensor, or a tuple of tensors when the model returns several.

    Raises:
        ValueError: The number or per-sample shapes of the inputs do not match the IR, an
            input is complex, or `dtype` is not a real floating-point dtype.
        TypeError: `ir` is not a GraphIR, an input is not a tensor (a NumPy array or a list,
            say: convert it with `torch.as_tensor`), or `dtype` is not a torch.dtype.

    Example:
        >>> y = ncet.evaluate(ncet.convert(model, (4,)), torch.randn(8, 4))
    """
    if not isinstance(ir, GraphIR):
        raise TypeError(f"ir must be a GraphIR (from ncet.convert or ncet.load), not "
                        f"{type(ir).__name__}")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype such as torch.float64, not "
                        f"{type(dtype).__name__} {dtype!r}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype={dtype} is not a floating-point dtype: GraphIR's operators "
                         "are real-valued; use torch.float64 (the reference) or the model's "
                         "own dtype")
    input_nodes = ir.inputs
    if len(inputs) != len(input_nodes):
        raise ValueError(f"the graph takes {len(input_nodes)} input(s), got {len(inputs)}")
    consts = _constants_as(ir, dtype)
    env: dict[str, torch.Tensor] = {}
    for node, x in zip(input_nodes, inputs):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"input {node.name!r} is a {type(x).__name__}, not a tensor: "
                            "pass torch.as_tensor(x)")
        if x.is_complex():
            raise ValueError(f"input {node.name!r} is complex ({x.dtype}): GraphIR's "
                             "operators are real-valued")
        if tuple(x.shape[1:]) != node.shape:
            raise ValueError(f"input {node.name!r} must have per-sample shape {list(node.shape)}, "
                             f"got a tensor of shape {list(x.shape)}")
        env[node.name] = x.to(dtype)
    with torch.no_grad():
        for rule, node, names, dying in _plan(ir):
            env[node.name] = rule(node, [env[i] for i in names], consts)
            for name in dying:
                del env[name]
    output = ir.nodes[-1]
    results = tuple(env[name] for name in output.inputs)
    return results if output.attrs["tuple"] else results[0]
