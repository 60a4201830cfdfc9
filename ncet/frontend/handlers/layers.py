"""Handlers for the parameterised operators: Linear, Conv2d, BatchNorm and 2-d pooling."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ...errors import Rejection
from ..boundary_rules import (
    BATCH_NORM_1D_RANK,
    BATCH_NORM_2D_RANK,
    CONV2D_RANK,
    LINEAR_RANK,
    POOL_RANK,
    BoundaryRule,
)
from ..context import Mapped, NodeContext


def _pair(value: Any, name: str) -> list[int]:
    """A static int or pair of ints, as a list of two ints."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value, value]
    if isinstance(value, (tuple, list)) and len(value) in (1, 2) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [int(value[0]), int(value[-1])]
    raise Rejection("unsupported-argument", f"{name}={value!r} must be an int or a pair of ints")


def _require_rank(ctx: NodeContext, node, rule: BoundaryRule, what: str) -> None:
    """Reject an input whose batched rank is outside the rule's limit."""
    batched = len(ctx.shape(node)) + 1
    if not rule.limit.admits(batched):
        hint = "give the input the layout the layer expects"
        if batched == rule.limit.high + 1 and node.op == "placeholder":  # one axis too many
            hint = ("if the shape given includes the batch axis, drop it: NCET adds it (e.g. "
                    "convert(model, (3, 32, 32)) for batches of shape (N, 3, 32, 32)); "
                    "otherwise give the input the layout the layer expects")
        raise Rejection(rule.code, f"{what} needs a batched input of {rule.limit}, got rank "
                                   f"{batched}", hint=hint)


def _fixed_operand(ctx: NodeContext, name: str, optional: bool) -> str | None:
    """Lift a F.linear/F.conv2d weight or bias, which must be fixed get_attr state."""
    value = ctx.args[name]
    if value is None and optional:
        return None
    if ctx.is_fixed_tensor(value):
        return ctx.lift_attr(value)
    source = f"computed by node {value.name!r}" if isinstance(value, torch.fx.Node) else repr(value)
    raise Rejection("runtime-weight", f"{name} must be a fixed parameter or buffer, but it is "
                                      f"{source}",
                    hint=f"register the {name} as an nn.Parameter or buffer and pass self.<name>, "
                         "or use the nn module spelling")


# --- Linear -----------------------------------------------------------------------------
def linear_module(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    _require_rank(ctx, x, LINEAR_RANK, "Linear")
    return Mapped("Linear", (x,), {"weight": ctx.lift_module_tensor("weight"),
                                   "bias": ctx.lift_module_tensor("bias")})


def linear_function(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    _require_rank(ctx, x, LINEAR_RANK, "F.linear")
    return Mapped("Linear", (x,), {"weight": _fixed_operand(ctx, "weight", False),
                                   "bias": _fixed_operand(ctx, "bias", True)})


# --- Conv2d -----------------------------------------------------------------------------
def _same_padding(kernel: list[int], dilation: list[int]) -> list[int]:
    """PyTorch's padding="same": total d*(k-1) per axis, the odd unit on the bottom/right."""
    pads = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    (top, bottom), (left, right) = pads
    return [top, bottom, left, right]


def _conv_padding(padding: Any, kernel: list[int], dilation: list[int]) -> list[int]:
    if padding == "valid":
        return [0, 0, 0, 0]
    if padding == "same":
        return _same_padding(kernel, dilation)
    ph, pw = _pair(padding, "padding")
    return [ph, ph, pw, pw]


def conv2d_module(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    _require_rank(ctx, x, CONV2D_RANK, "Conv2d")
    conv: nn.Conv2d = ctx.module
    kernel, dilation = list(conv.kernel_size), list(conv.dilation)
    return Mapped("Conv2d", (x,), {
        "weight": ctx.lift_module_tensor("weight"), "bias": ctx.lift_module_tensor("bias"),
        "stride": list(conv.stride), "padding": _conv_padding(conv.padding, kernel, dilation),
        "dilation": dilation, "groups": int(conv.groups), "padding_mode": conv.padding_mode})


def conv2d_function(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    _require_rank(ctx, x, CONV2D_RANK, "F.conv2d")
    weight = _fixed_operand(ctx, "weight", False)
    kernel = list(ctx.fixed_tensor(ctx.args["weight"]).shape[-2:])
    dilation = _pair(ctx.static("dilation"), "dilation")
    groups = ctx.static("groups")
    if isinstance(groups, bool) or not isinstance(groups, int):
        raise Rejection("unsupported-argument", f"groups={groups!r} must be an int")
    return Mapped("Conv2d", (x,), {
        "weight": weight, "bias": _fixed_operand(ctx, "bias", True),
        "stride": _pair(ctx.static("stride"), "stride"),
        "padding": _conv_padding(ctx.static("padding"), kernel, dilation),
        "dilation": dilation, "groups": groups, "padding_mode": "zeros"})


# --- BatchNorm --------------------------------------------------------------------------
def batch_norm_module(ctx: NodeContext) -> Mapped:
    bn = ctx.module
    if bn.training:
        raise Rejection("batch-norm-training",
                        f"{type(bn).__name__} is in training mode and would normalise with "
                        "batch statistics (and update its running statistics)",
                        hint="call model.eval() before converting")
    if bn.running_mean is None or bn.running_var is None:
        raise Rejection("batch-norm-no-running-stats",
                        f"{type(bn).__name__} has no running statistics "
                        "(track_running_stats=False), so it normalises with batch statistics",
                        hint="use track_running_stats=True and train or load running statistics")
    if not math.isfinite(bn.eps):
        raise Rejection("constant-not-finite", f"eps={bn.eps!r} is not finite",
                        hint="use a small positive eps such as 1e-5")
    if bool((bn.running_var < 0).any()):
        raise Rejection("batch-norm-negative-var",
                        f"{type(bn).__name__}'s running_var is negative somewhere",
                        hint="a variance is never negative: check the loaded statistics")
    x = ctx.graph_tensor("input")
    dtype = ctx.dtype(x)
    if dtype is not None and dtype.is_floating_point and bool(
            (bn.running_var.double() + bn.eps < torch.finfo(dtype).tiny).any()):
        raise Rejection("constant-subnormal",
                        f"running_var + eps is below the smallest normal {dtype} number",
                        hint="use a larger eps")
    _require_rank(ctx, x, BATCH_NORM_1D_RANK if isinstance(bn, nn.BatchNorm1d)
                  else BATCH_NORM_2D_RANK, type(bn).__name__)
    return Mapped("BatchNorm", (x,), {
        "mean": ctx.lift_module_tensor("running_mean"),
        "var": ctx.lift_module_tensor("running_var"),
        "weight": ctx.lift_module_tensor("weight"), "bias": ctx.lift_module_tensor("bias"),
        "eps": float(bn.eps)})


# --- pooling ----------------------------------------------------------------------------
def _pool_window(ctx: NodeContext, kernel: Any, stride: Any, padding: Any) -> dict[str, Any]:
    kernel = _pair(kernel, "kernel_size")
    stride = kernel if stride is None or stride == [] or stride == () else _pair(stride, "stride")
    return {"kernel_size": kernel, "stride": stride, "padding": _pair(padding, "padding")}


def adaptive_avg_pool2d(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    _require_rank(ctx, x, POOL_RANK, "adaptive average pooling")
    if ctx.module is None:
        ctx.static("output_size")
    return Mapped("AdaptiveAvgPool2d", (x,), {"output_size": list(ctx.out_shape[-2:])})


def avg_pool2d(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    _require_rank(ctx, x, POOL_RANK, "average pooling")
    p = _pool_params(ctx, ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                           "divisor_override"))
    divisor = p["divisor_override"]
    if divisor is not None and (isinstance(divisor, bool) or not isinstance(divisor, int)
                                or divisor == 0):
        raise Rejection("unsupported-argument",
                        f"divisor_override={divisor!r} must be a non-zero int or None")
    return Mapped("AvgPool2d", (x,), {
        **_pool_window(ctx, p["kernel_size"], p["stride"], p["padding"]),
        "ceil_mode": bool(p["ceil_mode"]), "count_include_pad": bool(p["count_include_pad"]),
        "divisor_override": divisor})


def max_pool2d(ctx: NodeContext) -> Mapped:
    x = ctx.graph_tensor("input")
    _require_rank(ctx, x, POOL_RANK, "max pooling")
    p = _pool_params(ctx, ("kernel_size", "stride", "padding", "dilation", "ceil_mode",
                           "return_indices"))
    if p["return_indices"]:
        raise Rejection("pool-return-indices",
                        "max pooling with return_indices=True returns integer indices",
                        hint="use return_indices=False")
    window = _pool_window(ctx, p["kernel_size"], p["stride"], p["padding"])
    dilation = _pair(p["dilation"], "dilation")
    _refuse_padding_only_windows(ctx, ctx.shape(x)[-2:], window, dilation)
    return Mapped("MaxPool2d", (x,), {**window, "dilation": dilation,
                                      "ceil_mode": bool(p["ceil_mode"])})


def _refuse_padding_only_windows(ctx: NodeContext, sizes, window, dilation) -> None:
    """A dilated max-pooling window whose every tap falls in the padding has the maximum of
    nothing: -inf, which no bound certifies."""
    for axis, n, out, k, s, pad, d in zip(("height", "width"), sizes, ctx.out_shape[-2:],
                                          window["kernel_size"], window["stride"],
                                          window["padding"], dilation):
        for o in range(out):
            if not any(0 <= o * s - pad + j * d < n for j in range(k)):
                raise Rejection("unsupported-argument",
                                f"max pooling whose window {o} along the {axis} lies wholly "
                                f"in the padding (kernel {k}, dilation {d}, padding {pad} on "
                                f"{n}): its output is -inf",
                                hint="use less padding or a smaller dilation")


def _pool_params(ctx: NodeContext, names: tuple[str, ...]) -> dict[str, Any]:
    """Pooling parameters from the module's attributes or the function's static arguments."""
    if ctx.module is not None:
        return {name: getattr(ctx.module, name) for name in names}
    return {name: ctx.static(name) for name in names}
