"""Handlers for elementwise operators: ReLU, LeakyReLU, Identity, Add, Sub, ElementwiseAffine."""

from __future__ import annotations

import math
from typing import Any

import torch

from ...errors import Rejection
from ..boundary_rules import AFFINE_INTEGER, LEAKY_RELU_SLOPE
from ..context import Mapped, NodeContext, finite_real
from ..trace import BATCH_SIZES

_INPLACE_HINT = "use the out-of-place form (inplace=False); NCET rejects in-place forms"


def _reject_inplace(flag: Any) -> None:
    if flag is not False:
        raise Rejection("inplace", f"inplace={flag!r}: in-place forms are rejected",
                        hint=_INPLACE_HINT)


def _module_or_arg(ctx: NodeContext, name: str) -> Any:
    return getattr(ctx.module, name) if ctx.module is not None else ctx.static(name)


# --- activations and identities ---------------------------------------------------------
def relu(ctx: NodeContext) -> Mapped:
    if ctx.module is not None or "inplace" in ctx.args:
        _reject_inplace(_module_or_arg(ctx, "inplace"))
    return Mapped("ReLU", (ctx.graph_tensor("input"),), {})


def leaky_relu(ctx: NodeContext) -> Mapped:
    _reject_inplace(_module_or_arg(ctx, "inplace"))
    slope = _module_or_arg(ctx, "negative_slope")
    limit = LEAKY_RELU_SLOPE.limit
    if not finite_real(slope) or not limit.admits(slope):
        raise Rejection(LEAKY_RELU_SLOPE.code,
                        f"negative_slope={slope!r} must be a finite number in {limit.span}",
                        hint="NCET keeps LeakyReLU piecewise-linear and monotone; "
                             f"use a slope in {limit.span}")
    x = ctx.graph_tensor("input")
    if slope == 0:
        return Mapped("ReLU", (x,), {})
    if slope == 1:
        return Mapped("Identity", (x,), {})
    return Mapped("LeakyReLU", (x,), {"negative_slope": float(slope)})


def identity(ctx: NodeContext) -> Mapped:
    return Mapped("Identity", (ctx.graph_tensor("input"),), {})


def dropout(ctx: NodeContext) -> Mapped:
    training = ctx.module.training if ctx.module is not None else ctx.static("training")
    if training is not False:
        how = "the module is in training mode" if ctx.module is not None \
            else f"training={training!r} (F.dropout's default is True)"
        raise Rejection("dropout-training", f"stochastic dropout: {how}",
                        hint="call model.eval()" if ctx.module is not None
                        else "pass training=False, or training=self.training with model.eval()")
    _reject_inplace(_module_or_arg(ctx, "inplace"))
    return Mapped("Identity", (ctx.graph_tensor("input"),), {})


# --- Add, Sub and ElementwiseAffine -----------------------------------------------------
def add(ctx: NodeContext) -> Mapped:
    return _arithmetic(ctx, "add")


def sub(ctx: NodeContext) -> Mapped:
    return _arithmetic(ctx, "sub")


def mul(ctx: NodeContext) -> Mapped:
    return _arithmetic(ctx, "mul")


def div(ctx: NodeContext) -> Mapped:
    if ctx.args.get("rounding_mode") is not None:
        raise Rejection("affine-rounding-mode",
                        f"rounding_mode={ctx.args['rounding_mode']!r} is not supported",
                        hint="use true division (no rounding_mode)")
    return _arithmetic(ctx, "div")


def _arithmetic(ctx: NodeContext, kind: str) -> Mapped:
    if "out" in ctx.args:
        ctx.require_default("out", None, code="out-argument")
    alpha = ctx.static("alpha") if "alpha" in ctx.args else 1
    if not finite_real(alpha):
        raise Rejection("alpha", f"alpha={alpha!r} must be a finite real number",
                        hint="use a finite Python number for alpha")
    a, b = ctx.args["input"], ctx.args["other"]
    for operand in (a, b):
        if isinstance(operand, torch.fx.Node) and not ctx.is_graph_tensor(operand) \
                and not ctx.is_fixed_tensor(operand):
            code = "constant-computation" if ctx.is_constant(operand) else "dynamic-argument"
            raise Rejection(code, f"operand {operand.name!r} is not a graph tensor, a fixed "
                                  "tensor or a Python number",
                            hint="precompute fixed values into a registered buffer")
    graph_a, graph_b = ctx.is_graph_tensor(a), ctx.is_graph_tensor(b)
    if graph_a or graph_b:
        _check_in_range(ctx, a if graph_a else b, alpha, f"alpha={alpha!r}", code="alpha")
    if graph_a and graph_b:
        if kind in ("mul", "div"):
            raise Rejection("affine-tensor-tensor",
                            f"{'multiplication' if kind == 'mul' else 'division'} of two graph "
                            "tensors is not piecewise-linear",
                            hint="multiply or divide by a fixed constant only")
        if len(ctx.shape(a)) != len(ctx.shape(b)):
            raise Rejection("broadcast-batch-axis",
                            f"operands of per-sample ranks {len(ctx.shape(a))} and "
                            f"{len(ctx.shape(b))} would broadcast across the batch axis",
                            hint="unsqueeze the lower-rank operand so both have the same rank")
        return Mapped("Add" if kind == "add" else "Sub", (a, b), {"alpha": float(alpha)})
    if not graph_a and not graph_b:
        raise Rejection("constant-computation", "no operand depends on the model inputs",
                        hint="precompute fixed values into a registered buffer")
    position = 0 if graph_a else 1
    x, c = (a, b) if graph_a else (b, a)
    if kind == "div" and position == 1:
        raise Rejection("affine-constant-over-tensor",
                        "dividing a constant by a graph tensor is not affine",
                        hint="only x / c with a fixed constant c is supported")
    scalar, constant = _affine_constant(ctx, x, c, kind)
    if kind == "mul" or (kind == "add" and alpha == 1):
        position = 0  # exactly commutative in IEEE arithmetic: one IR for x*c and c*x
    return Mapped("ElementwiseAffine", (x,), {
        "kind": kind, "tensor_position": position, "scalar": scalar, "constant": constant,
        "alpha": float(alpha)})


def _affine_constant(ctx: NodeContext, x: torch.fx.Node, c: Any,
                     kind: str) -> tuple[float | None, str | None]:
    """Check and record the fixed operand of an ElementwiseAffine: a scalar or a constant."""
    if isinstance(c, torch.fx.Node):
        tensor = ctx.fixed_tensor(c)
        if tensor.is_complex() or tensor.dtype == torch.bool:
            raise Rejection("affine-constant-type", f"constant of dtype {tensor.dtype} is not real",
                            hint="use a floating-point buffer")
        name = ctx.lift_attr(c)
        wide = tensor.to(torch.int64) if not tensor.is_floating_point() else None
        exact = AFFINE_INTEGER.limit
        if wide is not None and bool(((wide < exact.low) | (wide > exact.high)).any()):
            raise Rejection(AFFINE_INTEGER.code, f"integer constant {name!r} has entries "
                                                 "not exactly representable as floats")
        if tensor.numel():
            _check_in_range(ctx, x, float(tensor.abs().max()), f"constant {name!r}")
        if kind == "div" and bool((tensor == 0).any()):
            raise Rejection("affine-zero-divisor", f"the divisor {name!r} is zero somewhere")
        if kind == "div" and tensor.numel():
            _check_normal_divisor(ctx, x, tensor.abs().min().item(), name)
        x_shape = ctx.shape(x)
        for batch in BATCH_SIZES:
            batched = (batch, *x_shape)
            try:
                ok = torch.broadcast_shapes(batched, tensor.shape) == batched
            except RuntimeError:
                ok = False
            if not ok:
                raise Rejection("affine-broadcast",
                                f"constant {name!r} of shape {list(tensor.shape)} would change "
                                f"the graph tensor's shape {list(batched)} by broadcasting",
                                hint="give the constant a shape that broadcasts to one sample")
        return None, name
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        raise Rejection("affine-constant-type", f"constant {c!r} is not a real number")
    if not math.isfinite(c):
        raise Rejection("constant-not-finite", f"constant {c!r} is not finite")
    if isinstance(c, int) and not AFFINE_INTEGER.limit.admits(c):
        raise Rejection(AFFINE_INTEGER.code,
                        f"integer constant {c} is not exactly representable as a float")
    _check_in_range(ctx, x, c, f"constant {c!r}")
    if kind == "div" and c == 0:
        raise Rejection("affine-zero-divisor", "division by zero")
    if kind == "div":
        _check_normal_divisor(ctx, x, abs(c), repr(c))
    return float(c), None


def _check_in_range(ctx: NodeContext, x: torch.fx.Node, value: float, what: str,
                    code: str = "constant-not-finite") -> None:
    """A constant beyond the op's dtype range rounds to infinity in PyTorch."""
    dtype = ctx.dtype(ctx.node) or ctx.dtype(x)
    if dtype is not None and dtype.is_floating_point and abs(value) > torch.finfo(dtype).max:
        raise Rejection(code,
                        f"{what} is beyond the largest {dtype} number, so PyTorch rounds it "
                        "to infinity", hint="rescale the model so its constants fit the dtype")


def _check_normal_divisor(ctx: NodeContext, x: torch.fx.Node, smallest: float,
                          what: str) -> None:
    """A divisor rounded to a subnormal of the op's dtype has no relative error bound."""
    dtype = ctx.dtype(ctx.node) or ctx.dtype(x)
    if dtype is not None and dtype.is_floating_point and 0 < smallest < torch.finfo(dtype).tiny:
        raise Rejection("constant-subnormal",
                        f"the divisor {what} is below the smallest normal {dtype} number",
                        hint="rescale the model so that divisors are normal numbers")
