"""The support boundary written once as data, and its rendering as docs/support-boundary.md."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import REASONS
from .spellings import FUNCTION_SPELLINGS, METHOD_SPELLINGS, MODULE_SPELLINGS


@dataclass(frozen=True, slots=True)
class BoundaryRule:
    """One rule: the op_types it governs, what it says, and the reason code when it rejects
    ("" for a rule that states what is accepted)."""

    op_types: tuple[str, ...]
    rule: str
    code: str = ""


_ANY = ("any",)

BOUNDARY_RULES: tuple[BoundaryRule, ...] = (
    # Every node.
    BoundaryRule(_ANY, "a module type outside the spelling table",
                 "unsupported-module"),
    BoundaryRule(_ANY, "a function outside the spelling tables", "unsupported-function"),
    BoundaryRule(_ANY, "a tensor method outside the spelling tables", "unsupported-method"),
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
                       "batch sizes 2 and 3), or whose per-sample shape changes with it",
                 "batch-not-preserved"),
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
    # Parameterised operators.
    BoundaryRule(("Linear",), "batched input of rank >= 2 (last axis = in_features)", "rank"),
    BoundaryRule(("Linear", "Conv2d"), "F.linear/F.conv2d weight and bias must be fixed "
                                       "get_attr state (a parameter or buffer)", "runtime-weight"),
    BoundaryRule(("Conv2d",), "batched input of rank 4; any stride, dilation and groups; "
                              "padding as ints, pairs, 'valid' or 'same' (PyTorch puts the odd "
                              "unit bottom/right); padding_mode zeros, reflect, replicate or "
                              "circular"),
    BoundaryRule(("Conv2d",), "batched input of another rank (an unbatched conv would mix "
                              "samples)", "rank"),
    BoundaryRule(("BatchNorm",), "nn.BatchNorm1d (batched rank 2 or 3) or nn.BatchNorm2d "
                                 "(rank 4) in evaluation mode with running statistics; mean, "
                                 "var, eps, weight and bias are kept as they are"),
    BoundaryRule(("BatchNorm",), "training mode", "batch-norm-training"),
    BoundaryRule(("BatchNorm",), "track_running_stats=False", "batch-norm-no-running-stats"),
    BoundaryRule(("BatchNorm",), "F.batch_norm / torch.batch_norm", "batch-norm-function"),
    BoundaryRule(("BatchNorm",), "a negative running_var", "batch-norm-negative-var"),
    BoundaryRule(("BatchNorm",), "running_var + eps below the smallest normal number of the "
                                 "dtype", "constant-subnormal"),
    BoundaryRule(("AdaptiveAvgPool2d",), "batched input of rank 4; any output size, also "
                                         "when it does not divide the input (PyTorch's "
                                         "variable windows); None entries resolved"),
    BoundaryRule(("AvgPool2d",), "batched input of rank 4; kernel, stride, padding, "
                                 "ceil_mode, count_include_pad and a non-zero int "
                                 "divisor_override"),
    BoundaryRule(("MaxPool2d",), "batched input of rank 4; kernel, stride, padding, dilation "
                                 "and ceil_mode"),
    BoundaryRule(("MaxPool2d",), "return_indices=True", "pool-return-indices"),
    BoundaryRule(("AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d"), "batched input of another "
                                                                  "rank", "rank"),
    # Elementwise operators.
    BoundaryRule(("Identity",), "nn.Identity; dropout in evaluation mode, F.dropout* with a "
                                "static training=False"),
    BoundaryRule(("Identity",), "dropout in training mode, or F.dropout* with training=True "
                                "(its default)", "dropout-training"),
    BoundaryRule(("ReLU",), "nn.ReLU, F.relu, torch.relu, x.relu() (and LeakyReLU with slope 0)"),
    BoundaryRule(("LeakyReLU",), "negative_slope finite in [0, 1]; 0 gives ReLU, 1 gives "
                                 "Identity"),
    BoundaryRule(("LeakyReLU",), "negative_slope outside [0, 1] or not finite",
                 "leaky-relu-slope"),
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
    BoundaryRule(("ElementwiseAffine",), "a bool or complex constant, or an int (scalar or "
                                         "tensor entry) beyond 2**53",
                 "affine-constant-type"),
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
"""Every rule of the support boundary; docs/support-boundary.md is rendered from it."""


def render_support_boundary() -> str:
    """The text of docs/support-boundary.md, from BOUNDARY_RULES, REASONS and the tables."""
    out = [
        "# Support boundary",
        "",
        "<!-- Generated from ncet/frontend/boundary.py by `make docs`; tests/test_docs.py "
        "fails when this file and the code differ. -->",
        "",
        "A spelling in the tables below is *recognised*; it is *supported* when it also passes",
        "every rule for its op_type. A rule with a reason code rejects; one without states what",
        "is accepted. Dimensions are as the model writes them, on batched tensors (axis 0 is the",
        "batch axis); GraphIR stores them per sample.",
        "",
        "## Rules",
        "",
        "| op_type | rule | reason code | error |",
        "|---|---|---|---|",
    ]
    for r in BOUNDARY_RULES:
        error = REASONS[r.code].error if r.code else "accepted"
        code = f"`{r.code}`" if r.code else ""
        out.append(f"| {', '.join(r.op_types)} | {r.rule} | {code} | {error} |")
    out += ["", "## Reason codes", "", "| code | error | meaning |", "|---|---|---|"]
    out += [f"| `{c}` | {r.error} | {r.summary} |" for c, r in REASONS.items()]
    out += ["", "## Spellings", "", "| node.op | spelling | key | handler |", "|---|---|---|---|"]
    for cls, s in MODULE_SPELLINGS.items():
        out.append(f"| call_module | {s.display} | `{cls.__module__}.{cls.__qualname__}` | "
                   f"`{s.handler.__module__}.{s.handler.__name__}` |")
    for fn, s in FUNCTION_SPELLINGS.items():
        out.append(f"| call_function | {s.display} | `{_key(fn)}` | "
                   f"`{s.handler.__module__}.{s.handler.__name__}` |")
    for name, s in METHOD_SPELLINGS.items():
        out.append(f"| call_method | {s.display} | `\"{name}\"` | "
                   f"`{s.handler.__module__}.{s.handler.__name__}` |")
    return "\n".join(out) + "\n"


def _key(fn: object) -> str:
    module = getattr(fn, "__module__", None) or "torch"
    name = getattr(fn, "__name__", repr(fn))
    return f"{module}.{name}"


if __name__ == "__main__":
    print(render_support_boundary(), end="")
