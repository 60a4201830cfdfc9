"""The bound formulas of `bounds.py` and `flush_bounds.py` applied whole, for the tests that
hold them to exact values (tests/test_oracle.py): one node's bound on given inputs
(`local_bound`) and a whole graph's float64 reference with its certified radii (`enclose`)."""

from __future__ import annotations

import torch

from ..evaluate import EVALUATORS
from ..ir import IRNode
from .arithmetic import SMALLEST_NORMAL, ArithmeticModel, read_arithmetic_model
from .bounds import SAFETY, rounding
from .flush_bounds import FLUSH_COMPARED, compared_eta, flush_term, flushable, input_radius
from .rules import BOUND_RULES, Consts, Tensors, subnormal_constants

_F64 = torch.float64


def local_bound(node: IRNode, inputs: Tensors, consts: Consts, dtype: torch.dtype,
                arithmetic: ArithmeticModel | None = None) -> torch.Tensor:
    """Certified bound on |fl(f(x)) - f(x)| for one node computed in `dtype` on `inputs`:
    SAFETY B_d(S, X).

    Args:
        node: The IR node.
        inputs: Its input values (batched; any float dtype, read exactly).
        consts: The IR's constants in their own dtypes (read exactly).
        dtype: The precision the node is computed in.
        arithmetic: The arithmetic model (flags); read from PyTorch when None. Under
            flushing the bound includes the underflow term `flush_term` (an exact op's,
            2 eta C(m), where an input is below eta; the model is then read only there).
    """
    xs = [x.to(_F64) for x in inputs]
    abs_consts = {k: v.to(_F64).abs() for k, v in consts.items()}
    r = rounding(node, xs, abs_consts, consts)
    operands = tuple(x.dtype for x in inputs)
    eta = max(SMALLEST_NORMAL.get(d, 0.0) for d in (dtype, *operands))
    masks = [flushable(x, eta) for x in inputs]
    if r.magnitude is None:  # an exact op: 2 eta C(m) under flushing (`ExactFlushedBound`)
        zero = torch.zeros_like(EVALUATORS[node.op_type](node, xs, abs_consts))
        eta = max(compared_eta(d) for d in (dtype, *operands))
        masks = [flushable(x, eta) for x in inputs]
        if not any(bool(m.any()) for m in masks) \
                or not (arithmetic or read_arithmetic_model()).flush:
            return zero
        radii = [m.to(_F64).mul_(eta) for m in masks]
        return zero + SAFETY * FLUSH_COMPARED * BOUND_RULES[node.op_type].carry(
            node, radii, abs_consts)
    arithmetic = arithmetic or read_arithmetic_model()
    flushed = flush_term(node, [tuple(x.shape[1:]) for x in xs], abs_consts, consts, dtype,
                         arithmetic, operands, masks)
    return r.bound(node, dtype, arithmetic) * SAFETY + flushed


def enclose(ir, *inputs: torch.Tensor, input_radii=None
            ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The float64 reference value of every node with a certified radius around the exact
    real value: |value - [[G]](x)| <= radius elementwise (inputs taken as exact, or within
    `input_radii` of the exact point, one tensor per input), with
    radius = SAFETY [C(E_in) + B_r(S(|r_in|), X(|r_in|))] (§4.2).

    Returns:
        node name -> (value, radius), for the Input nodes and every operator node.

    Raises:
        RuntimeError: The arithmetic in force is outside the declared model (also: a
            subnormal tensor constant while subnormals are flushed).
    """
    consts = {k: v.to(_F64) for k, v in ir.constants.items()}
    arithmetic = read_arithmetic_model()
    if arithmetic.flush and (subnormal := subnormal_constants(
            ir.nodes, ir.constants, arithmetic.flushing_kernels)):
        arithmetic = arithmetic.outside(f"subnormal constants ({', '.join(subnormal[:5])}) "
                                        "may be flushed to zero")
    if not arithmetic.certified:
        raise RuntimeError("no certified enclosure: " + arithmetic.describe())
    abs_consts = {k: v.abs() for k, v in consts.items()}
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    extra = input_radii or [0.0] * len(inputs)
    for node, x, given in zip(ir.inputs, inputs, extra):
        out[node.name] = (x.to(_F64), input_radius(x, arithmetic) + given)
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        values = [out[i][0] for i in node.inputs]
        radii = [out[i][1].expand_as(out[i][0]) for i in node.inputs]
        value = EVALUATORS[node.op_type](node, values, consts)
        r = rounding(node, values, abs_consts, ir.constants)
        carried = BOUND_RULES[node.op_type].carry(node, radii, abs_consts)
        flushed = flush_term(node, [tuple(x.shape[1:]) for x in values], abs_consts,
                             ir.constants, _F64, arithmetic, tuple(
                                 getattr(torch, ir.node(i).dtype) for i in node.inputs))
        out[node.name] = (value, (carried + r.bound(node, _F64, arithmetic)) * SAFETY
                          + flushed)
    return out
