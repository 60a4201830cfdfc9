"""NCET's operators as the bound propagation sees them: every op_type but three is affine in
its inputs (`AFFINE`), so one rule serves all of them: its value on a batch (`apply`), its
offset f(0), its transpose L^T (pulling a batch of row vectors back through it, `pull`) and
the transpose of |L| (`pull_abs`, from the certificate's carry rules C(E) = |L| E). The other
three (ReLU, LeakyReLU, MaxPool2d) are relaxed in `linear_bounds.py` and
`float_errors.py`.

Everything is float64, batched along the first axis: a batch of Q row vectors stands for Q
linear functionals of one sample.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..evaluate import EVALUATORS
from ..exactness.rules import BOUND_RULES
from ..ir import IRNode

Consts = dict[str, torch.Tensor]

NONLINEAR = frozenset({"ReLU", "LeakyReLU", "MaxPool2d"})
"""The op_types that are not affine; every other operator (Input and Output aside) is."""

_F64 = torch.float64


def is_affine(node: IRNode) -> bool:
    """Is the node an affine map of its inputs (so L^T and f(0) exist)?"""
    return node.op_type not in NONLINEAR and node.op_type not in ("Input", "Output")


def apply(node: IRNode, xs: list[torch.Tensor], consts: Consts) -> torch.Tensor:
    """The node's value on a batch (its reference evaluator)."""
    return EVALUATORS[node.op_type](node, xs, consts)


def offset(node: IRNode, shapes: list[tuple[int, ...]], consts: Consts) -> torch.Tensor:
    """f(0) for an affine node, batch dimension 1 (a Linear's bias, an affine map's shift)."""
    return apply(node, [torch.zeros((1, *s), dtype=_F64) for s in shapes], consts)


def _transpose(fn, cotangent: torch.Tensor, shapes: list[tuple[int, ...]]
               ) -> list[torch.Tensor]:
    q = cotangent.shape[0]
    xs = [torch.zeros((q, *s), dtype=_F64, requires_grad=True) for s in shapes]
    with torch.enable_grad():
        out = fn(xs)
        grads = torch.autograd.grad(out, xs, cotangent, allow_unused=True)
    return [torch.zeros((q, *s), dtype=_F64) if g is None else g
            for g, s in zip(grads, shapes)]


def _scale(node: IRNode, consts: Consts, absolute: bool) -> float | torch.Tensor | None:
    """The factor an elementwise node multiplies its input by (its transpose, the output
    having the input's shape), or None for any other op."""
    a = node.attrs
    op = node.op_type
    if op in ("Identity", "Reshape", "Flatten"):
        return 1.0
    if op != "ElementwiseAffine":
        return None
    k = a["scalar"] if a["constant"] is None else consts[a["constant"]]
    kind = a["kind"]
    if kind == "mul":
        factor = k
    elif kind == "div":
        factor = 1.0 / k
    else:
        factor = 1.0 if a["tensor_position"] == 0 else (
            a["alpha"] if kind == "add" else -a["alpha"])
    return abs(factor) if absolute else factor


def _direct(node: IRNode, cotangent: torch.Tensor, shapes, consts: Consts, absolute: bool):
    """The transpose without autograd where it is a reshape or a scaling; else None."""
    if node.op_type in ("Add", "Sub") and shapes[0] == shapes[1] == tuple(node.shape):
        alpha = node.attrs["alpha"] if node.op_type == "Add" else -node.attrs["alpha"]
        return [cotangent, cotangent * (abs(alpha) if absolute else alpha)]
    if len(shapes) != 1 or (node.op_type == "ElementwiseAffine"
                             and shapes[0] != tuple(node.shape)) \
            or int(torch.Size(shapes[0]).numel()) != cotangent[0].numel():
        return None
    factor = _scale(node, consts, absolute)
    if factor is None:
        return None
    return [(cotangent * factor).reshape(cotangent.shape[0], *shapes[0])]


def pull(node: IRNode, cotangent: torch.Tensor, shapes: list[tuple[int, ...]],
         consts: Consts) -> list[torch.Tensor]:
    """L^T c for each input: the rows `cotangent` (Q, *out_shape) pulled back through the
    linear part of an affine node, one (Q, *in_shape) tensor per input."""
    if node.op_type == "Linear":
        return [cotangent @ consts[node.attrs["weight"]]]
    direct = _direct(node, cotangent, shapes, consts, False)
    if direct is not None:
        return direct
    return _transpose(lambda xs: apply(node, xs, consts), cotangent, shapes)


def pull_abs(node: IRNode, cotangent: torch.Tensor, shapes: list[tuple[int, ...]],
             abs_consts: Consts) -> list[torch.Tensor]:
    """|L|^T c for each input (c >= 0), from the node's carry rule C(E) = |L| E."""
    if node.op_type == "Linear":
        return [cotangent @ abs_consts[node.attrs["weight"]]]
    direct = _direct(node, cotangent, shapes, abs_consts, True)
    if direct is not None:
        return direct
    rule = BOUND_RULES[node.op_type].carry
    return _transpose(lambda es: rule(node, es, abs_consts), cotangent, shapes)


def carry(node: IRNode, radii: list[torch.Tensor], abs_consts: Consts) -> torch.Tensor:
    """|L| E: how input radii pass through an affine node (the certificate's rule)."""
    return BOUND_RULES[node.op_type].carry(node, radii, abs_consts)


# --- MaxPool2d: the one element a window may be pinned to, and the window sum -------------
def pool_args(node: IRNode) -> tuple:
    a = node.attrs
    return a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"]


def window_argmax(node: IRNode, values: torch.Tensor) -> torch.Tensor:
    """Per output element, the flat (h w) index of its window's largest entry of `values`
    (batch 1): the element a lower relaxation pins the max to."""
    kernel, stride, padding, dilation, ceil = pool_args(node)
    _, idx = F.max_pool2d(values, kernel, stride, padding, dilation, ceil, return_indices=True)
    return idx


def gather(node_input: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x at the window indices (batched x, index of batch 1)."""
    q = node_input.shape[0]
    flat = node_input.flatten(-2)
    idx = index.flatten(-2).expand(q, *index.shape[1:-2], -1)
    return flat.gather(-1, idx).view(q, *index.shape[1:])


def scatter(rows: torch.Tensor, index: torch.Tensor, in_shape: tuple[int, ...]
            ) -> torch.Tensor:
    """The transpose of `gather`: rows (Q, C, oh, ow) added into (Q, C, H, W)."""
    q = rows.shape[0]
    out = torch.zeros((q, *in_shape[:-2], in_shape[-2] * in_shape[-1]), dtype=_F64)
    idx = index.flatten(-2).expand(q, *index.shape[1:-2], -1)
    out.scatter_add_(-1, idx, rows.flatten(-2))
    return out.view(q, *in_shape)


def window_sum_pull(node: IRNode, rows: torch.Tensor, in_shape: tuple[int, ...]
                    ) -> torch.Tensor:
    """S^T r for r >= 0, S the window sum of the pool (every element of a window counted
    once per window holding it; padding dropped): a bound on what any convex combination
    within each window pulls back."""
    kernel, stride, padding, dilation, _ = pool_args(node)
    channels = in_shape[0]
    ones = torch.ones((channels, 1, *kernel), dtype=_F64)
    oh, ow = rows.shape[-2:]

    def window_sum(xs):
        x = F.pad(xs[0], (padding[1], padding[1] + stride[1] * 2,
                          padding[0], padding[0] + stride[0] * 2))
        return F.conv2d(x, ones, None, stride, 0, dilation, channels)[..., :oh, :ow]
    return _transpose(window_sum, rows, [in_shape])[0]


def dominated(node: IRNode, lower: torch.Tensor, upper: torch.Tensor,
              index: torch.Tensor) -> torch.Tensor:
    """Per output element: is the window's max certainly its `index` element (its lower
    bound at least every other element's upper bound)? Only judged for windows that do not
    overlap (stride >= kernel, no dilation); False elsewhere."""
    kernel, stride, padding, dilation, ceil = pool_args(node)
    pinned = gather(lower, index)
    if any(s < k for s, k in zip(stride, kernel)) or any(d != 1 for d in dilation):
        return torch.zeros_like(pinned, dtype=torch.bool)
    others = upper.flatten(-2).clone()
    others.scatter_(-1, index.flatten(-2), -torch.inf)
    rest = F.max_pool2d(others.view_as(upper), kernel, stride, padding, dilation, ceil)
    return pinned >= rest
