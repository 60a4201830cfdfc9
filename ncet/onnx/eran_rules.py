"""What ERAN's ONNX translator (eth-sri/eran@8771d31 tf_verify/onnx_translator.py:
prepare_model, then ONNXTranslator.translate) rejects or silently mis-handles, as `ToolRule`s
for the table of tools.py; which leading nodes it takes out as the input normalization is
eran_normalization.py."""

from __future__ import annotations

from .eran_normalization import ARITHMETIC, div_not_normalization, normalization_misread
from .tool_graph import ToolRule, attr, dilated, grouped, input_name, pads_asymmetric

_ERAN = "eth-sri/eran@8771d31 tf_verify/onnx_translator.py "


def _eran(where: str) -> str:
    return _ERAN + where


def _concat_channel_axis(node, ctx) -> bool:
    """The axes prepare_model accepts for a non-constant Concat (the channel axis)."""
    rank = len(ctx.shapes.get(input_name(node, 0), ()))
    return (rank in (2, 4) and attr(node, "axis") == 1) or rank == 0


def _concat_all_constant(node, ctx) -> bool:
    return all(name in ctx.constants for name in node.input)


def _pad_unsupported(node, ctx) -> bool:
    mode = attr(node, "mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    return mode != "constant" or attr(node, "pads") is None or len(node.input) > 2


def _two_variables(node, ctx) -> bool:
    return input_name(node, 0) not in ctx.constants and input_name(node, 1) not in ctx.constants


def _normalization_rule(op: str) -> ToolRule:
    return ToolRule(
        f"eran-normalization-{op.lower()}", "eran", op, "mishandles",
        "taken out of the network as the input normalization, which ERAN applies as "
        "(x - mean) / std: c - x, c / x, a Mul or Div before the Add or Sub, or two of a kind, "
        "compute something else", _eran(
            "ONNXTranslator.translate, lines 447-492 (the constant from add_resources, "
            "whichever operand it is); tf_verify/__main__.py normalize, line 109"),
        normalization_misread)


def _gemm_unsupported(node, ctx) -> bool:
    return len(node.input) < 3 or not (
        input_name(node, 0) in ctx.constants or input_name(node, 1) in ctx.constants)


ERAN_RULES = (
    ToolRule("eran-batchnorm-ignored", "eran", "BatchNormalization", "mishandles",
             "BatchNormalization is in operations_to_be_ignored: replaced by its first input, "
             "the normalization vanishes", _eran("ONNXTranslator.translate, line 443")),
    ToolRule("eran-concat-ignored", "eran", "Concat", "mishandles",
             "Concat is in operations_to_be_ignored: replaced by its first input",
             _eran("ONNXTranslator.translate, line 443"),
             lambda n, c: _concat_all_constant(n, c) or _concat_channel_axis(n, c)),
    ToolRule("eran-concat-axis", "eran", "Concat", "rejects",
             "a Concat of variables off the channel axis fails prepare_model's assertion "
             "('ELINA currently only supports concatenation on the channel dimension')",
             _eran("prepare_model, line 325"),
             lambda n, c: not _concat_all_constant(n, c) and not _concat_channel_axis(n, c)),
    ToolRule("eran-unsqueeze-axes-input", "eran", "Unsqueeze", "rejects",
             "prepare_model reads axes from the first attribute (opset < 13); axes as an "
             "input raise IndexError", _eran("prepare_model, line 291"),
             lambda n, c: attr(n, "axes") is None),
    ToolRule("eran-pad", "eran", "Pad", "rejects",
             "only constant zero padding with pads as an attribute (opset < 11) is read",
             _eran("prepare_model, lines 349-357 ('only zero padding supported')"),
             _pad_unsupported),
    ToolRule("eran-div", "eran", "Div", "rejects",
             "translate has no Div branch ('Operations of type Div are not yet supported'): "
             "a Div is read only as the input normalization, x / c among the first nodes, "
             "with an Add or Sub of a constant, before any MatMul, Gemm, Conv, MaxPool or "
             "activation", _eran("ONNXTranslator.translate, lines 447-492 and 637"),
             div_not_normalization),
    *(_normalization_rule(op) for op in ARITHMETIC),
    ToolRule("eran-mul-variables", "eran", "Mul", "rejects",
             "a product of two variables: 'we don't support residual operations other then add'",
             _eran("ONNXTranslator.translate, line 526"), _two_variables),
    ToolRule("eran-sub-variables", "eran", "Sub", "rejects",
             "a difference of two variables: 'we don't support the ressub yet'",
             _eran("ONNXTranslator.translate, line 540"), _two_variables),
    ToolRule("eran-gemm-inputs", "eran", "Gemm", "rejects",
             "Gemm needs its bias C and one constant operand",
             _eran("ONNXTranslator.gemm_resources, line 740"), _gemm_unsupported),
    ToolRule("eran-conv-group-dilations", "eran", "Conv", "mishandles",
             "group and dilations are not passed on (conv_resources reads strides, pads and "
             "kernel_shape only); what the analyzer then computes was not verified",
             _eran("ONNXTranslator.conv_resources, line 819"),
             lambda n, c: grouped(n, c) or dilated(n, c)),
    ToolRule("eran-pool-asymmetric-pads", "eran", "MaxPool", "rejects",
             "'different padding for top and bottom is not supported in ERAN'",
             _eran("ONNXTranslator.pool_resources, line 931"), pads_asymmetric),
    ToolRule("eran-avgpool-asymmetric-pads", "eran", "AveragePool", "rejects",
             "'different padding for top and bottom is not supported in ERAN'",
             _eran("ONNXTranslator.pool_resources, line 931"), pads_asymmetric),
    ToolRule("eran-maxpool-attributes", "eran", "MaxPool", "mishandles",
             "dilations and ceil_mode are dropped ('dilations, auto_pad, ceil_mode, "
             "storage_order are unused at the moment')", _eran("ONNXTranslator.translate, "
                                                              "line 566"),
             lambda n, c: dilated(n, c) or attr(n, "ceil_mode", 0)),
    ToolRule("eran-avgpool-attributes", "eran", "AveragePool", "mishandles",
             "ceil_mode is dropped ('dilations, auto_pad, ceil_mode, storage_order are unused "
             "at the moment')", _eran("ONNXTranslator.translate, line 566"),
             lambda n, c: dilated(n, c) or attr(n, "ceil_mode", 0)),
    ToolRule("eran-leakyrelu-alpha", "eran", "LeakyRelu", "mishandles",
             "alpha is never read: DeepPoly uses its default slope 0.01",
             "eth-sri/eran@8771d31 tf_verify/deeppoly_nodes.py DeeppolyLeakyReluNode."
             "transformer, line 411 (alpha=0.01); onnx_translator.py nonlinearity_resources",
             lambda n, c: abs(attr(n, "alpha", 0.01) - 0.01) > 1e-9),
)

ERAN_OPS_SOURCE = _eran("prepare_model line 365 and ONNXTranslator.translate line 637 "
                        "('Operations of type ... are not yet supported')")
"""Where ERAN's op list (the `ToolSpec` of tools.py) is read."""
