"""Clamping: the piecewise-linear activations outside the spec's operators (clamp, clip,
hardtanh, ReLU6), what to write instead, and which of them are ReLU bit for bit.

NCET's canonical operators have no clamp, so every spelling here is rejected (with the code of
its kind: `unsupported-function`, `unsupported-method` or `unsupported-module`), but with a
hint that says what to write instead, worked out from the node's own bounds. The identities
the hints suggest (`a + relu(x - a) - relu(x - b)` and its kin) hold in real arithmetic and
are what a ReLU verifier reads; in floating point `x - a` and the adds round, so they are not
bit-identical to the clamp (tests/test_clamping.py shows where), and the hint says so.

One case is exact: a lower bound of +0 and no upper bound (`torch.clamp(x, min=0)`,
`x.clamp_min(0)`, ...) is ReLU bit for bit in PyTorch (relu *is* clamp_min(0) in ATen; the
test compares the bits of both over signed zeros, subnormals, infinities and NaNs in float32,
float64, bfloat16 and float16). `rewrite=True` maps exactly those onto ReLU
(`relu_clamp_target`). A lower bound of -0.0, or a tensor bound, is not: clamp then gives
-0.0 or +0.0 where relu gives the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

Bounds = tuple[object, object]
"""(lower, upper): a Python number, None for no bound, or `DYNAMIC` for one not static."""

DYNAMIC = "dynamic"
"""A bound that is a traced value or a tensor: the hint names it `a`/`b`."""


def _kw(node: torch.fx.Node, position: int, name: str, default: object) -> object:
    """Argument `name` of `node`, at `position` among its args (the tensor counts) or by
    keyword."""
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[position] if len(node.args) > position else default


def _clamp(node, module=None) -> Bounds:
    return _kw(node, 1, "min", None), _kw(node, 2, "max", None)


def _clamp_min(node, module=None) -> Bounds:
    return _kw(node, 1, "min", DYNAMIC), None


def _clamp_max(node, module=None) -> Bounds:
    return None, _kw(node, 1, "max", DYNAMIC)


def _hardtanh(node, module=None) -> Bounds:
    return _kw(node, 1, "min_val", -1.0), _kw(node, 2, "max_val", 1.0)


def _relu6(node, module=None) -> Bounds:
    return 0, 6


def _hardtanh_module(node, module) -> Bounds:
    return getattr(module, "min_val", DYNAMIC), getattr(module, "max_val", DYNAMIC)


CLAMP_FUNCTIONS: dict[object, Callable[..., Bounds]] = {
    torch.clamp: _clamp, torch.clip: _clamp, torch.clamp_min: _clamp_min,
    torch.clamp_max: _clamp_max, F.hardtanh: _hardtanh, F.hardtanh_: _hardtanh,
    F.relu6: _relu6,
}
"""call_function clamps, keyed by the callable FX records: how to read their bounds."""

CLAMP_METHODS: dict[str, Callable[..., Bounds]] = {
    "clamp": _clamp, "clip": _clamp, "clamp_min": _clamp_min, "clamp_max": _clamp_max,
}
"""call_method clamps, keyed by method name (their in-place forms end in `_`)."""

CLAMP_MODULES: dict[type[nn.Module], Callable[..., Bounds]] = {
    nn.Hardtanh: _hardtanh_module, nn.ReLU6: _hardtanh_module,  # ReLU6 is a Hardtanh(0, 6)
}
"""call_module clamps, keyed by module type."""

RELU_CLAMP_FUNCTIONS = (torch.clamp, torch.clip, torch.clamp_min)
"""The call_function clamps `rewrite=True` maps onto ReLU when `relu_clamp_target` holds."""

RELU_CLAMP_METHODS = ("clamp", "clip", "clamp_min")
"""The call_method clamps `rewrite=True` maps onto ReLU when `relu_clamp_target` holds."""


def clamp_bounds(node: torch.fx.Node, module: nn.Module | None = None) -> Bounds | None:
    """The (lower, upper) bounds of a clamp at `node` (`module` for a call_module node), or
    None when `node` is no clamp."""
    reader = None
    if node.op == "call_function":
        try:
            reader = CLAMP_FUNCTIONS.get(node.target)
        except TypeError:  # an unhashable callable is in no table
            reader = None
    elif node.op == "call_method":
        reader = CLAMP_METHODS.get(str(node.target).removesuffix("_"))
    elif node.op == "call_module" and module is not None:
        reader = CLAMP_MODULES.get(type(module))
    if reader is None:
        return None
    lower, upper = reader(node, module)
    return _static(lower), _static(upper)


def _static(bound: object) -> object:
    if bound is None or bound == DYNAMIC:
        return bound
    if isinstance(bound, (int, float)) and not isinstance(bound, bool):
        return bound
    return DYNAMIC  # a traced value, a tensor, a bool: not a plain number


def is_positive_zero(bound: object) -> bool:
    """True for the Python numbers 0 and +0.0 (not -0.0, not False, not a tensor)."""
    if isinstance(bound, bool) or not isinstance(bound, (int, float)):
        return False
    return bound == 0 and math.copysign(1.0, bound) > 0


def relu_clamp_target(node: torch.fx.Node) -> bool:
    """True when `node` is a clamp PyTorch computes bit for bit as `torch.relu`: an
    out-of-place `torch.clamp`/`torch.clip`/`torch.clamp_min` or `Tensor.clamp`/`clip`/
    `clamp_min` with a lower bound of +0 (the int 0 or 0.0) and no upper bound."""
    if node.op == "call_function":
        try:
            known = node.target in RELU_CLAMP_FUNCTIONS
        except TypeError:
            known = False
    else:
        known = node.op == "call_method" and node.target in RELU_CLAMP_METHODS
    if not known or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    if set(node.kwargs) - {"min", "max"} or len(node.args) > 3:
        return False
    bounds = clamp_bounds(node)
    return bounds is not None and is_positive_zero(bounds[0]) and bounds[1] is None


def _n(value: object, name: str) -> str:
    if value == DYNAMIC:
        return name
    return repr(float(value)) if isinstance(value, float) else str(value)


def _shifted(x: str, value: object, name: str) -> str:
    """`x - value` as one writes it: "x - 2", "x + 1.5" (for -1.5), "x - a"."""
    if value != DYNAMIC and value < 0:
        return f"{x} + {_n(-value, name)}"
    return f"{x} - {_n(value, name)}"


def _plus(value: object, name: str) -> str:
    """`+ value` as one writes it: "+ 2", "- 1.5" (for -1.5), "+ a"."""
    if value != DYNAMIC and value < 0:
        return f"- {_n(-value, name)}"
    return f"+ {_n(value, name)}"


_ROUNDING = ("equal in real arithmetic, and what a ReLU verifier reads, but in floating point "
             "{what} round, so it is not bit-identical to the clamp and changes the model: "
             "convert the model written that way")


def clamp_hint(bounds: Bounds, rewritable: bool) -> str:
    """What to write instead of a clamp with these bounds (see the module's docstring);
    `rewritable`: `rewrite=True` would map this very node onto ReLU."""
    lower, upper = bounds
    a, b = _n(lower, "a"), _n(upper, "b")
    if lower is None and upper is None:
        return "a clamp without bounds is the identity: remove it"
    if upper is None and is_positive_zero(lower):
        if rewritable:
            return ("this is ReLU bit for bit: write F.relu(x), or convert with rewrite=True, "
                    "which maps it onto ReLU")
        return "write F.relu(x), out of place: this clamp is ReLU bit for bit"
    if upper is None and lower == 0:
        return ("write F.relu(x): the same but for the sign of zero (clamp with min=-0.0 "
                "gives -0.0 for negative x, relu keeps the sign x has), so not bit-identical")
    if upper is None:
        return (f"write F.relu({_shifted('x', lower, 'a')}) {_plus(lower, 'a')} (ReLU and "
                "ElementwiseAffine): " + _ROUNDING.format(what="the subtraction and the add"))
    if lower is None:
        return (f"write {b} - F.relu({b} - x) (ReLU and ElementwiseAffine): "
                + _ROUNDING.format(what="both subtractions"))
    if lower != DYNAMIC and upper != DYNAMIC and lower > upper:
        return (f"its lower bound {a} exceeds its upper bound {b}, so PyTorch returns {b} "
                "everywhere: replace it by that constant")
    if lower != DYNAMIC and lower == 0:
        return (f"write F.relu(x) - F.relu({_shifted('x', upper, 'b')}) (ReLU and Sub): "
                + _ROUNDING.format(what=f"x - {b} (for large x) and the subtraction")
                + f"; at x = inf it gives NaN where the clamp gives {b}")
    return (f"write F.relu({_shifted('x', lower, 'a')}) {_plus(lower, 'a')} - "
            f"F.relu({_shifted('x', upper, 'b')}) (ReLU, ElementwiseAffine and Sub): "
            + _ROUNDING.format(what="the subtractions and the add")
            + f"; at x = inf it gives NaN where the clamp gives {b}")
