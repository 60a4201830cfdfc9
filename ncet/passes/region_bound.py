"""The simplification's bound over a whole input region: |simplified exact - original exact|
for every input of a box, from the radii of the simplified graph's computed constants
carried forward over a certified enclosure of the box (docs/simplification.md, "Over a
region"). A verdict on the simplified network in exact arithmetic then speaks about the
original within this bound; `float_margin` of the simplified network plus this bound bounds
|simplified float - original exact|."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from ..exactness.bounds import SAFETY
from ..exactness.enclosure import enclose
from ..exactness.rules import BOUND_RULES
from ..ir import CONSTANT_ATTRS, GraphIR
from ..regions.margin import region_boxes
from .certificate import computed_radii, constant_perturbation

_F64 = torch.float64


def _center(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A float64 center and a radius that covers [lo, hi] around it."""
    center = lo / 2 + hi / 2
    half = torch.maximum(hi - center, center - lo)
    return center, torch.nextafter(half, torch.full_like(half, math.inf))


def simplification_bound(original: GraphIR, simplified: GraphIR, region) -> torch.Tensor:
    """A bound, for every input in `region`, on |[[simplified]](x) - [[original]](x)| (the
    two graphs' exact real values), per output element, when the passes that made
    `simplified` from `original` are right (which `simplify`'s certificate tests on
    samples): the simplified graph with the exact folded constants is the original's
    function, and its computed constants are within their radii of them.

    Args:
        original: The graph given to `simplify` (one Input node).
        simplified: The graph it returned (in this process: the radii of its computed
            constants are known only to the process that computed them).
        region: A `ncet.Property` (every box; the bound is the largest over them), a
            (lower, upper) pair of tensors or arrays (the input's shape, or flattened), or
            a list of such pairs.

    Returns:
        float64 (m,), the outputs flattened row-major in output order; zeros when
        `simplified` has no computed constant.

    Raises:
        ValueError: Not one Input node, the two graphs' inputs or outputs differ in shape,
            or a box is empty.
    """
    if len(original.inputs) != 1 or len(simplified.inputs) != 1:
        raise ValueError("a region bound needs a graph with one Input node")
    (x,) = simplified.inputs
    if original.inputs[0].shape != x.shape or [original.node(o).shape for o in
                                               original.outputs] != \
            [simplified.node(o).shape for o in simplified.outputs]:
        raise ValueError("the two graphs' inputs or outputs differ in shape")
    delta = computed_radii(simplified)
    sizes = [math.prod(simplified.node(o).shape) for o in simplified.outputs]
    worst = torch.zeros(sum(sizes), dtype=_F64)
    if not delta:
        return worst
    abs_consts = {k: v.to(_F64).abs() for k, v in simplified.constants.items()}
    for lo, hi in ((lo[0], hi[0]) for lo, hi in region_boxes(simplified, region)):
        center, half = _center(lo, hi)
        enclosure = enclose(simplified, center[None], input_radii=[half[None]])
        moved: dict[str, torch.Tensor | None] = {x.name: None}
        for node in simplified.nodes:
            if node.op_type in ("Input", "Output"):
                continue
            ins = [moved[i] for i in node.inputs]
            own = any(node.attrs.get(a) in delta for a in CONSTANT_ATTRS[node.op_type])
            if all(d is None for d in ins) and not own:
                moved[node.name] = None
                continue
            values = [enclosure[i] for i in node.inputs]
            d_in = [torch.zeros_like(v) if d is None else d.expand_as(v)
                    for d, (v, _) in zip(ins, values)]
            d = BOUND_RULES[node.op_type].carry(node, d_in, abs_consts)
            if own:
                (value, radius), = values
                xbar = value.abs() + radius.expand_as(value) + d_in[0]
                d = d + constant_perturbation(node, xbar, delta, abs_consts)
            moved[node.name] = d * SAFETY
        flat = [torch.zeros(size, dtype=_F64) if moved[o] is None
                else moved[o].expand(1, *simplified.node(o).shape).reshape(-1)
                for o, size in zip(simplified.outputs, sizes)]
        worst = torch.maximum(worst, torch.cat(flat))
    return worst



SIMPLIFICATION_KEY = "<simplification>"
"""The key of a widened margin's `contributions` that holds the simplification's bound."""


def _up(t: torch.Tensor) -> torch.Tensor:
    return torch.nextafter(t, torch.full_like(t, math.inf))


def widen_margin(margin, original: GraphIR, simplified: GraphIR, region):
    """A float margin of the simplified network (`float_margin(simplified, region)`) made to
    speak about the original: eps grows by `simplification_bound(original, simplified,
    region)`, so |simplified float(x) - [[original]](x)| <= eps for every x of the region,
    and the exact output's range [lower, upper] widens by the same (the simplified graph's
    exact range holds the original's within it). The bound is `contributions`'
    "<simplification>" entry.

    Args:
        margin: The `ncet.Margin` of the simplified graph over `region`.
        original, simplified, region: As for `simplification_bound`.

    Returns:
        A new Margin.

    Raises:
        ValueError: The margin has another number of outputs than the graphs.
    """
    bound = simplification_bound(original, simplified, region)
    if margin.eps.shape != bound.shape:
        raise ValueError(f"the margin has {margin.eps.numel()} outputs, the graphs "
                         f"{bound.numel()}")
    return replace(margin, eps=_up(margin.eps + bound), lower=-_up(-(margin.lower - bound)),
                   upper=_up(margin.upper + bound),
                   contributions={**margin.contributions, SIMPLIFICATION_KEY: bound})
