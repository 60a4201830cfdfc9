"""An elementwise affine form folded into a Linear or Conv2d layer: before it (the layer
reads `a * x + b`: its weight scaled per input, the shift pushed through into its bias) or
after it (`a * layer(x) + b`: weight and bias scaled per output, the shift added), each new
constant computed as a `Carried` float64 and rounded once to the layer's dtype."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..ir import GraphIR, IRNode
from .affine_forms import Form, along, has_shift
from .carried import Carried, register
from .graph_edits import constant_name
from .records import ComputedConstant

Folded = tuple[Carried | None, Carried | None]
"""The layer's new weight and bias (None: unchanged, or no bias)."""


def _group_index(weight: torch.Tensor, groups: int) -> torch.Tensor:
    """idx[o, j]: the input channel that weight[o, j] reads (grouped convolutions)."""
    out, per_group = weight.shape[0], weight.shape[1]
    group = torch.arange(out) // (out // groups)
    return group[:, None] * per_group + torch.arange(per_group)[None, :]


def pads_with_zeros(layer: IRNode) -> bool:
    """The Conv2d reads zeros outside its input (padding_mode "zeros", some padding)."""
    return layer.attrs["padding_mode"] == "zeros" and any(layer.attrs["padding"])


def absorb_input(layer: IRNode, form: Form, consts, input_shape: tuple[int, ...]
                 ) -> Folded | str:
    """The layer's weight and bias when it reads `a * x + b` instead of x, or why not."""
    weight = Carried.of(consts[layer.attrs["weight"]])
    bias = layer.attrs["bias"]
    bias = None if bias is None else Carried.of(consts[bias])
    if layer.op_type == "Linear":
        vectors = along(form, len(input_shape) - 1)
        if vectors is None:
            return "the normalisation varies along an axis the Linear does not sum over"
        a, b = vectors
        new_weight = weight * a[None, :]
        shift = weight.matmul(b) if has_shift(form) else None
    else:
        vectors = along(form, 0)
        if vectors is None:
            return "the normalisation is not one scale and shift per input channel"
        at = layer.attrs
        if has_shift(form) and pads_with_zeros(layer):
            return (f"the Conv2d pads with zeros (padding {list(at['padding'])}): after the "
                    "fold its border would read 0 where the original reads the shifted "
                    "value, so folding the shift is not exact (only padding 0 or a "
                    "non-zero padding_mode allows it)")
        a, b = vectors
        index = _group_index(weight.value, at["groups"])
        scale = a[index]
        new_weight = weight * scale.reshape(*scale.value.shape, 1, 1)
        shift = None
        if has_shift(form):
            rows = weight.value.shape[0]
            per_input = b[index].reshape(*index.shape, 1, 1).expand(*weight.value.shape)
            shift = weight.reshape(rows, -1).rowdot(per_input.reshape(rows, -1))
    new_bias = bias if shift is None else (shift if bias is None else bias + shift)
    return new_weight, new_bias


def scale_rows(weight: Carried, a: Carried) -> Carried:
    """weight[o, ...] * a[o]: each output channel's row scaled by its factor."""
    return weight * a.reshape(a.value.shape[0], *(1,) * (weight.value.dim() - 1))


def absorb_output(layer: IRNode, form: Form, consts) -> Folded | str:
    """The layer's weight and bias when `a * layer(x) + b` is folded in, or why not."""
    weight = Carried.of(consts[layer.attrs["weight"]])
    bias = layer.attrs["bias"]
    bias = None if bias is None else Carried.of(consts[bias])
    axis = len(layer.shape) - 1 if layer.op_type == "Linear" else 0
    vectors = along(form, axis)
    if vectors is None:
        return (f"the scale or shift varies along an axis other than the {layer.op_type}'s "
                "output channels (axis "
                f"{axis} of its per-sample shape {list(layer.shape)})")
    a, b = vectors
    new_weight = scale_rows(weight, a)
    new_bias = b if bias is None else a * bias + b
    if bias is None and not has_shift(form):
        new_bias = None
    return new_weight, new_bias


def refit(ir: GraphIR, layer: IRNode, name: str, folded: Folded, source_inputs: tuple[str, ...],
          shape: tuple[int, ...], how: dict[str, str]
          ) -> tuple[IRNode, dict[str, torch.Tensor], tuple[ComputedConstant, ...]] | str:
    """The layer rebuilt as node `name` reading `source_inputs`, with the folded weight and
    bias rounded once to its dtype under new names; returns (node, new constants, records),
    or why not (a constant that does not fit the dtype)."""
    dtype = getattr(torch, layer.dtype)
    attrs, tensors, records = dict(layer.attrs), {}, []
    taken = set(ir.constants)
    for key, value in zip(("weight", "bias"), folded):
        if value is None:
            continue
        try:
            stored, radius = value.rounded(dtype)
        except ArithmeticError as error:
            return f"the folded {key} {error}"
        new = constant_name(f"{name}.{key}", stored, taken | set(tensors))
        tensors[new] = stored
        register(stored, radius)
        attrs[key] = new
        records.append(ComputedConstant(new, how[key], layer.dtype, tuple(stored.shape),
                                        radius))
    node = replace(layer, name=name, inputs=source_inputs, attrs=attrs, shape=shape)
    return node, tensors, tuple(records)
