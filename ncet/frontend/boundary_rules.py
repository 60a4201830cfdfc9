"""The support boundary as data: every rule, its reason code and the number it enforces.

Handlers read their limits from the rule records here (`LINEAR_RANK.limit`, ...), and
docs/support-boundary.md is rendered from the same records (`python -m
ncet.frontend.boundary`), so a number cannot differ between a check, its message and the doc.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import INPUT_RANKS, PADDING_MODES
from .trace import BATCH_SIZES


@dataclass(frozen=True, slots=True)
class Limit:
    """A number the boundary enforces: the values from `low` to `high`, both included.

    `quantity` names what is limited as messages say it ("rank"). Integer limits read
    "rank 4", "rank 2 or 3", "rank 2 to 16"; an `interval` (a real range, or a huge
    integer one) reads "negative_slope in [0, 1]".
    """

    quantity: str
    low: int | float
    high: int | float
    interval: bool = False

    def __post_init__(self):
        assert self.low <= self.high, self

    def admits(self, value: int | float) -> bool:
        """True when `value` lies within the limit."""
        return self.low <= value <= self.high

    @property
    def span(self) -> str:
        """The accepted values alone: "4", "2 or 3", "2 to 16" or "[0, 1]"."""
        low, high = _number(self.low), _number(self.high)
        if self.interval:
            return f"[{low}, {high}]"
        if self.low == self.high:
            return low
        return f"{low} {'or' if self.high == self.low + 1 else 'to'} {high}"

    def __str__(self) -> str:
        return f"{self.quantity} {'in ' if self.interval else ''}{self.span}"


def _number(value: int | float) -> str:
    """A bound as the doc and messages write it (2**53 rather than its 16 digits)."""
    if isinstance(value, int) and abs(value) >= 2 ** 20 and abs(value).bit_count() == 1:
        return f"{'-' if value < 0 else ''}2**{abs(value).bit_length() - 1}"
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True, slots=True)
class BoundaryRule:
    """One rule: the op_types it governs, what it says, the reason code when it rejects
    ("" for a rule that states what is accepted), and the number it enforces, if any.

    `rule` may name its limit as `{limit}` ("rank 2 to 16") or `{span}` ("2 to 16").
    """

    op_types: tuple[str, ...]
    rule: str
    code: str = ""
    limit: Limit | None = None

    @property
    def text(self) -> str:
        """The rule with its limit filled in."""
        if self.limit is None:
            return self.rule
        return self.rule.format(limit=self.limit, span=self.limit.span)


def _batched_ranks(op_type: str) -> Limit:
    """The batched ranks GraphIR accepts for op_type's input (ir.INPUT_RANKS, per sample)."""
    ranks = INPUT_RANKS[op_type]
    assert ranks == tuple(range(ranks[0], ranks[-1] + 1)), ranks
    return Limit("rank", ranks[0] + 1, ranks[-1] + 1)


# --- the rules that enforce a number; handlers read them ----------------------------------
LINEAR_RANK = BoundaryRule(
    ("Linear",), "a batched input whose rank is not {span} (the last axis is in_features)",
    "rank", _batched_ranks("Linear"))
CONV2D_RANK = BoundaryRule(
    ("Conv2d",), "a batched input whose rank is not {span} (an unbatched conv would mix "
                 "samples)", "rank", _batched_ranks("Conv2d"))
BATCH_NORM_1D_RANK = BoundaryRule(
    ("BatchNorm",), "nn.BatchNorm1d on a batched input whose rank is not {span}", "rank",
    Limit("rank", 2, 3))
BATCH_NORM_2D_RANK = BoundaryRule(
    ("BatchNorm",), "nn.BatchNorm2d on a batched input whose rank is not {span}", "rank",
    Limit("rank", 4, 4))
POOL_RANK = BoundaryRule(
    ("AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d"), "a batched input whose rank is not "
                                                     "{span}", "rank",
    _batched_ranks("AvgPool2d"))
LEAKY_RELU_SLOPE = BoundaryRule(
    ("LeakyReLU",), "negative_slope outside {span} or not finite", "leaky-relu-slope",
    Limit("negative_slope", 0, 1, interval=True))
AFFINE_INTEGER = BoundaryRule(
    ("ElementwiseAffine",), "a bool or complex constant, or an int (scalar or tensor entry) "
                            "outside {span}, where not every integer is a float",
    "affine-constant-type", Limit("integer constant", -2 ** 53, 2 ** 53, interval=True))

_ANY = ("any",)

BOUNDARY_RULES: tuple[BoundaryRule, ...] = (
    # Every node.
    BoundaryRule(_ANY, "a module type outside the spelling table",
                 "unsupported-module"),
    BoundaryRule(_ANY, "a function outside the spelling tables", "unsupported-function"),
    BoundaryRule(_ANY, "a tensor method outside the spelling tables", "unsupported-method"),
    BoundaryRule(_ANY, "a method `torch.Tensor` does not have, called on a traced value (a "
                       "branch on `isinstance(x, torch.Tensor)` sees FX's Proxy while tracing "
                       "and takes its other side)", "not-a-tensor-method"),
    BoundaryRule(_ANY, "in-place forms: `x.relu_()`, `x.add_(y)`, `F.relu(x, inplace=True)`, "
                       "`nn.ReLU(inplace=True)`, `torch.relu_`", "inplace"),
    BoundaryRule(_ANY, "`out=` storage", "out-argument"),
    BoundaryRule(_ANY, "a keyword the spelling does not take, or a value its handler cannot "
                       "honour", "unsupported-argument"),
    BoundaryRule(_ANY, "an argument that must be static (dims, shapes, slopes, alpha, indices) "
                       "computed by a traced node, e.g. `x.size(0)`", "dynamic-argument"),
    BoundaryRule(_ANY, "an operation on fixed tensors only (canonicalization never does "
                       "arithmetic on model constants)", "constant-computation"),
    BoundaryRule(_ANY, "a lifted constant, scalar or BatchNorm eps that is NaN or infinite, or "
                       "beyond the largest number of the op's dtype (PyTorch would round it "
                       "to infinity)", "constant-not-finite"),
    BoundaryRule(_ANY, "a parameter or buffer without values on the CPU: the meta device, "
                       "another device, a sparse or quantized tensor", "constant-device"),
    BoundaryRule(_ANY, "a result whose leading size does not follow the batch size (checked at "
                       f"batch sizes {' and '.join(map(str, BATCH_SIZES))}), or whose "
                       "per-sample shape changes with it", "batch-not-preserved"),
    BoundaryRule(_ANY, "a result that is not of a floating-point dtype", "dtype"),
    BoundaryRule(_ANY, "a module whose weight a forward pre-hook recomputes on every call "
                       "(the old-style `nn.utils.weight_norm` and `nn.utils.spectral_norm`, "
                       "`torch.nn.utils.prune`); no other hook is part of the graph either, "
                       "and none runs while converting", "weight-hook"),
    BoundaryRule(("Input",), "one per-sample shape per forward() argument", "input-count"),
    BoundaryRule(("Input",), "a model torch.fx.symbolic_trace cannot trace", "trace-failed"),
    BoundaryRule(("Input",), "a model that fails on example inputs of the given shapes",
                 "shape-propagation"),
    BoundaryRule(("Output",), "forward() returns a graph tensor or a flat tuple/list of them",
                 "output-structure"),
    BoundaryRule(("Output",), "`stop_at=` naming no operation of the traced graph (an unknown "
                              "name, an input, the output, a parameter)", "stop-at-node"),
    BoundaryRule(("Output",), "`cut_trailing=True` on a softmax whose dim is the batch axis "
                              "(it mixes the samples, so it is no per-sample activation)",
                 "batch-axis"),
    # Parameterised operators.
    BoundaryRule(("Linear",), f"batched input of {LINEAR_RANK.limit} (last axis = "
                              "in_features)"),
    LINEAR_RANK,
    BoundaryRule(("Linear", "Conv2d"), "F.linear/F.conv2d weight and bias must be fixed "
                                       "get_attr state (a parameter or buffer)", "runtime-weight"),
    BoundaryRule(("Conv2d",), f"batched input of {CONV2D_RANK.limit}; any stride, dilation and "
                              "groups; padding as ints, pairs, 'valid' or 'same' (PyTorch puts "
                              "the odd unit bottom/right); padding_mode "
                              f"{', '.join(PADDING_MODES[:-1])} or {PADDING_MODES[-1]}"),
    CONV2D_RANK,
    BoundaryRule(("BatchNorm",), f"nn.BatchNorm1d (batched {BATCH_NORM_1D_RANK.limit}) or "
                                 f"nn.BatchNorm2d ({BATCH_NORM_2D_RANK.limit}) in evaluation "
                                 "mode with running statistics; mean, var, eps, weight and "
                                 "bias are kept as they are"),
    BATCH_NORM_1D_RANK,
    BATCH_NORM_2D_RANK,
    BoundaryRule(("BatchNorm",), "training mode", "batch-norm-training"),
    BoundaryRule(("BatchNorm",), "track_running_stats=False", "batch-norm-no-running-stats"),
    BoundaryRule(("BatchNorm",), "F.batch_norm / torch.batch_norm", "batch-norm-function"),
    BoundaryRule(("BatchNorm",), "a negative running_var", "batch-norm-negative-var"),
    BoundaryRule(("BatchNorm",), "running_var + eps below the smallest normal number of the "
                                 "dtype", "constant-subnormal"),
    BoundaryRule(("AdaptiveAvgPool2d",), f"batched input of {POOL_RANK.limit}; any output "
                                         "size, also when it does not divide the input "
                                         "(PyTorch's variable windows); None entries resolved"),
    BoundaryRule(("AvgPool2d",), f"batched input of {POOL_RANK.limit}; kernel, stride, "
                                 "padding, ceil_mode, count_include_pad and a non-zero int "
                                 "divisor_override"),
    BoundaryRule(("MaxPool2d",), f"batched input of {POOL_RANK.limit}; kernel, stride, "
                                 "padding, dilation and ceil_mode"),
    BoundaryRule(("MaxPool2d",), "return_indices=True", "pool-return-indices"),
    BoundaryRule(("MaxPool2d",), "a dilated window lying wholly in the padding (its output "
                                 "is -inf)", "unsupported-argument"),
    POOL_RANK,
    # Elementwise operators.
    BoundaryRule(("Identity",), "nn.Identity; dropout in evaluation mode, F.dropout* with a "
                                "static training=False"),
    BoundaryRule(("Identity",), "dropout in training mode, or F.dropout* with training=True "
                                "(its default)", "dropout-training"),
    BoundaryRule(("ReLU",), "nn.ReLU, F.relu, torch.relu, x.relu() (and LeakyReLU with slope 0)"),
    BoundaryRule(("LeakyReLU",), f"negative_slope finite in {LEAKY_RELU_SLOPE.limit.span}; 0 "
                                 "gives ReLU, 1 gives Identity"),
    LEAKY_RELU_SLOPE,
    BoundaryRule(("Add", "Sub"), "two graph tensors of the same rank, a finite static alpha"),
    BoundaryRule(("Add", "Sub"), "graph tensors of different ranks", "broadcast-batch-axis"),
    BoundaryRule(("Add", "Sub", "ElementwiseAffine"), "alpha not a finite static number, or "
                                                      "beyond the dtype's range",
                 "alpha"),
    BoundaryRule(("ElementwiseAffine",), "one graph tensor and one finite fixed real constant "
                                         "(a Python number or a get_attr tensor whose "
                                         "broadcast keeps the graph tensor's shape): x+c, c+x, "
                                         "x-c, c-x, x*c, c*x, x/c; the divisor is kept as is"),
    BoundaryRule(("ElementwiseAffine",), "multiplication or division of two graph tensors",
                 "affine-tensor-tensor"),
    BoundaryRule(("ElementwiseAffine",), "c / x", "affine-constant-over-tensor"),
    BoundaryRule(("ElementwiseAffine",), "a divisor that is zero anywhere", "affine-zero-divisor"),
    BoundaryRule(("ElementwiseAffine",), "rounding_mode=", "affine-rounding-mode"),
    BoundaryRule(("ElementwiseAffine",), "a divisor whose magnitude is below the smallest "
                                         "normal number of the node's dtype (its rounding "
                                         "error is not relative)", "constant-subnormal"),
    BoundaryRule(("ElementwiseAffine",), "a constant whose broadcast changes the graph tensor's "
                                         "shape", "affine-broadcast"),
    AFFINE_INTEGER,
    # Axis operators.
    BoundaryRule(("Flatten", "Reshape", "Permute", "Transpose", "Concat", "ReduceMean",
                  "GetItem", "Slice"), "a dimension or index on the batch axis: flatten from "
                                       "0, squeeze/unsqueeze at 0, permute not starting with 0, "
                                       "transpose of 0, concat or mean on 0, x[0], x[1:], "
                                       "x[None]", "batch-axis"),
    BoundaryRule(("Reshape",), "squeeze without explicit dims", "squeeze-without-dim"),
    BoundaryRule(("Reshape",), "reshape/view with static sizes; the batch axis must stay first "
                               "and whole, so x.view(-1, n) is fine and x.view(-1) is not "
                               "(batch-not-preserved)"),
    BoundaryRule(("ReduceMean",), "mean without explicit dims", "mean-without-dim"),
    BoundaryRule(("ReduceMean",), "mean with dtype=", "mean-dtype"),
    BoundaryRule(("Concat",), "a fixed tensor among the concatenated tensors", "concat-constant"),
    BoundaryRule(("Concat",), "tensors of different ranks", "rank"),
    BoundaryRule(("GetItem", "Slice"), "ints, slices with positive steps, `...` and None after a "
                                       "whole batch axis; GetItem when only ints remain per "
                                       "sample, Slice otherwise"),
    BoundaryRule(("GetItem", "Slice"), "tensor, list or bool indices", "advanced-indexing"),
    BoundaryRule(("GetItem", "Slice"), "indexing something other than a graph tensor",
                 "getitem-non-tensor"),
)
"""Every rule of the support boundary, in the doc's order; docs/support-boundary.md is
rendered from it."""

LIMITED_RULES: tuple[BoundaryRule, ...] = tuple(r for r in BOUNDARY_RULES if r.limit is not None)
"""The rules that enforce a number (each read by its handler, each probed at its edges by
tests/test_boundary_limits.py)."""
