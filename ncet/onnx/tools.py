"""What each verification tool's ONNX importer rejects or silently mis-handles, as data.

One `ToolSpec` per tool (the op types its importer has a branch for) and one `ToolRule` per
known failure, each with the tool-side evidence (repository, commit, file and function).
`lint_onnx` (lint.py) applies them; docs/export.md is the same table for people.
"""

from __future__ import annotations

from .eran_rules import ERAN_OPS_SOURCE, ERAN_RULES
from .tool_graph import (
    Condition,
    ToolRule,
    ToolSpec,
    attr,
    dilated,
    grouped,
    input_name,
    input_read_elsewhere,
    pads_asymmetric,
    pads_nonzero,
)

# ----------------------------------------------------------------------------------------
# alpha-beta-CROWN: ONNX -> PyTorch through onnx2pytorch, then auto_LiRPA on the module.

_ABCROWN = ("Verified-Intelligence/alpha-beta-CROWN@8250d5f complete_verifier/load_model.py "
            "load_model_onnx: onnx2pytorch.ConvertModel(onnx_model, experimental=True, quirks=..."
            "), then pytorch_model.eval(); the fork it pins, Verified-Intelligence/onnx2pytorch@"
            "fe7281b, was not available here, so the rules are its upstream base, Talmaj/"
            "onnx2pytorch@v0.4.1 (89a3fe7), read and probed against onnxruntime")
_O2P = "Talmaj/onnx2pytorch@v0.4.1 (89a3fe7) "


def _o2p(where: str) -> str:
    return _O2P + where


def _gemm_b_not_initializer(node, ctx) -> bool:
    return input_name(node, 1) not in ctx.initializers


def _matmul_weight(node, ctx) -> bool:
    return any(name in ctx.initializers for name in node.input)


def _matmul_weight_first(node, ctx) -> bool:
    return input_name(node, 0) in ctx.initializers and input_name(node, 1) not in ctx.initializers


def _matmul_last(node, ctx) -> bool:
    return _matmul_weight(node, ctx) and ctx.index(node) == len(ctx.nodes) - 1


def _matmul_fuses_foreign_add(node, ctx) -> bool:
    i = ctx.index(node)
    if not _matmul_weight(node, ctx) or i + 1 >= len(ctx.nodes):
        return False
    nxt = ctx.nodes[i + 1]
    return (nxt.op_type == "Add" and any(n in ctx.initializers for n in nxt.input)
            and bool(node.output) and node.output[0] not in nxt.input)


def _avgpool_pads_without_cip(node, ctx) -> bool:
    return pads_nonzero(node, ctx) and attr(node, "count_include_pad") is None


def _add_low_rank_constant_first(node, ctx) -> bool:
    first, second = input_name(node, 0), input_name(node, 1)
    if first not in ctx.initializers or second in ctx.initializers:
        return False
    other = ctx.shapes.get(second)
    return other is not None and len(ctx.shapes[first]) < len(other)


def _bn_params_not_initializers(node, ctx) -> bool:
    return any(name and name not in ctx.initializers for name in node.input[1:5])


def _pad_mode(mode: str) -> Condition:
    def condition(node, ctx):
        value = attr(node, "mode", b"constant")
        value = value.decode() if isinstance(value, bytes) else value
        return (value == "constant") == (mode == "constant")
    return condition


ABCROWN_RULES = (
    ToolRule("abcrown-gemm-transa", "abcrown", "Gemm", "rejects",
             "transA=1 raises NotImplementedError", _o2p(
                 "onnx2pytorch/convert/layer.py convert_linear_layer, line 121"),
             lambda n, c: attr(n, "transA", 0) != 0),
    ToolRule("abcrown-gemm-b-dynamic", "abcrown", "Gemm", "rejects",
             "B must be an initializer: the weight is taken from the node's initializer inputs "
             "('Unexpected number of parameters')", _o2p(
                 "onnx2pytorch/convert/layer.py extract_params, line 24"),
             _gemm_b_not_initializer),
    ToolRule("abcrown-matmul-weight-first", "abcrown", "MatMul", "mishandles",
             "an initializer as the first operand is loaded as nn.Linear on the second, "
             "computing x @ W instead of W @ x", _o2p(
                 "onnx2pytorch/convert/operations.py convert_operations, MatMul branch line 152"),
             _matmul_weight_first),
    ToolRule("abcrown-matmul-fuses-next-add", "abcrown", "MatMul", "mishandles",
             "a MatMul with an initializer absorbs the constant of the next Add in file order "
             "as its bias and drops that Add, though the Add does not read the MatMul",
             _o2p("onnx2pytorch/convert/operations.py convert_operations, line 159 "
                  "(next_node = onnx_graph.node[i + 1])"), _matmul_fuses_foreign_add),
    ToolRule("abcrown-matmul-last-node", "abcrown", "MatMul", "rejects",
             "a MatMul with an initializer as the graph's last node raises IndexError "
             "(it looks at the next node for a bias Add)", _o2p(
                 "onnx2pytorch/convert/operations.py convert_operations, line 159"),
             _matmul_last),
    ToolRule("abcrown-add-constant-first", "abcrown", "Add", "rejects",
             "Add(c, x) with an initializer c of lower rank raises in onnx2pytorch's in-place "
             "sum", _o2p("onnx2pytorch/operations/add.py Add.forward, line 38 (probed)"),
             _add_low_rank_constant_first),
    ToolRule("abcrown-conv-asymmetric-pads", "abcrown", "Conv", "mishandles",
             "asymmetric pads become a ConstantPad layer with the sides in the wrong order "
             "(output differs from onnxruntime)", _o2p(
                 "onnx2pytorch/utils.py extract_padding_params_for_conv_layer, line 63 (probed)"),
             pads_asymmetric),
    ToolRule("abcrown-maxpool-asymmetric-pads", "abcrown", "MaxPool", "mishandles",
             "asymmetric pads become a zero ConstantPad before the pool (ONNX pads MaxPool "
             "with -inf)", _o2p(
                 "onnx2pytorch/utils.py extract_padding_params_for_conv_layer, line 63 (probed)"),
             pads_asymmetric),
    ToolRule("abcrown-averagepool-count-include-pad", "abcrown", "AveragePool", "rejects",
             "the count_include_pad attribute raises NotImplementedError ('Extraction of "
             "attribute count_include_pad not implemented')", _o2p(
                 "onnx2pytorch/convert/attribute.py extract_attributes, line 189"),
             lambda n, c: attr(n, "count_include_pad") is not None),
    ToolRule("abcrown-averagepool-default-cip", "abcrown", "AveragePool", "mishandles",
             "padded AveragePool without count_include_pad becomes nn.AvgPool2d, whose default "
             "counts the padding (ONNX's default does not)", _o2p(
                 "onnx2pytorch/convert/layer.py convert_layer (probed)"),
             _avgpool_pads_without_cip),
    ToolRule("abcrown-pad-constant", "abcrown", "Pad", "mishandles",
             "ONNX's pads (all begins, then all ends) go to F.pad unchanged, which reads "
             "(last-dim begin, last-dim end, ...): the wrong sides are padded",
             _o2p("onnx2pytorch/operations/pad.py Pad.forward, line 17 (probed)"),
             _pad_mode("constant")),
    ToolRule("abcrown-pad-mode", "abcrown", "Pad", "rejects",
             "modes edge and wrap are not torch's names and raise; reflect with the 2*rank "
             "pads raises in F.pad", _o2p("onnx2pytorch/operations/pad.py Pad.forward, "
                                          "line 17 (probed)"), _pad_mode("other")),
    ToolRule("abcrown-relu-in-place", "abcrown", "Relu", "mishandles",
             "nn.ReLU(inplace=True) overwrites its input, which another node (or the graph) "
             "still reads", _o2p("onnx2pytorch/convert/operations.py convert_operations, "
                                 "line 217 (probed)"), input_read_elsewhere),
    ToolRule("abcrown-leakyrelu-in-place", "abcrown", "LeakyRelu", "mishandles",
             "nn.LeakyReLU(inplace=True) overwrites its input, which another node (or the "
             "graph) still reads", _o2p("onnx2pytorch/convert/operations.py "
                                        "convert_operations, line 138 (probed)"),
             input_read_elsewhere),
    ToolRule("abcrown-batchnorm-dynamic-params", "abcrown", "BatchNormalization", "mishandles",
             "parameters that are not initializers are assigned in forward(), where the bias is "
             "set to the scale (fixed upstream in 44ea99a, v0.5.3; Talmaj/onnx2pytorch#35, #44 "
             "are the training-mode statistics, which alpha-beta-CROWN's eval() avoids)",
             _o2p("onnx2pytorch/operations/batchnorm.py BatchNormWrapper.forward, line 59"),
             _bn_params_not_initializers),
)

# ----------------------------------------------------------------------------------------
# Marabou: maraboupy's Python parser (Marabou.read_onnx); the C++ OnnxParser differs.

_MARABOU = "NeuralNetworkVerification/Marabou@def5714 maraboupy/parsers/ONNXParser.py "


def _marabou(where: str) -> str:
    return _MARABOU + where


_EQUATION_PRODUCERS = {"Gemm", "MatMul", "Conv", "BatchNormalization", "Add", "Sub", "Mul"}


def _add_folds_into_shared(node, ctx) -> bool:
    a, b = input_name(node, 0), input_name(node, 1)
    if (a in ctx.constants) == (b in ctx.constants):
        return False
    var = b if a in ctx.constants else a
    producer = ctx.producers.get(var)
    return (producer is not None and ctx.nodes[producer].op_type in _EQUATION_PRODUCERS
            and ctx.readers(var) > 1)


def _second_not_constant(node, ctx) -> bool:
    return input_name(node, 1) not in ctx.constants


def _mul_vector_constant(node, ctx) -> bool:
    values = ctx.values(input_name(node, 1))
    return values is not None and values.size > 1


def _sub_unsupported(node, ctx) -> bool:
    a, b = input_name(node, 0), input_name(node, 1)
    if a in ctx.constants:
        return True
    sa, sb = ctx.shapes.get(a), ctx.shapes.get(b)
    return sa is not None and sb is not None and list(sa) != list(sb)


def _shape_has_zero(node, ctx) -> bool:
    shape = ctx.values(input_name(node, 1))
    return shape is not None and bool((shape == 0).any())


MARABOU_RULES = (
    ToolRule("marabou-conv-group", "marabou", "Conv", "rejects",
             "group != 1: the input channels must equal the filter's channels",
             _marabou("convEquations, line 698 (assert input_channels == filter_channels)"),
             grouped),
    ToolRule("marabou-conv-dilations", "marabou", "Conv", "mishandles",
             "dilations are not read: the equations are those of an undilated convolution",
             _marabou("convEquations, line 658 (reads only strides and pads)"), dilated),
    ToolRule("marabou-maxpool-attributes", "marabou", "MaxPool", "mishandles",
             "pads, dilations and ceil_mode are not read (only kernel_shape and strides)",
             _marabou("maxpoolEquations, line 576"),
             lambda n, c: pads_nonzero(n, c) or dilated(n, c) or attr(n, "ceil_mode", 0)),
    ToolRule("marabou-mul-variable-operand", "marabou", "Mul", "rejects",
             "the second operand must be a constant (Mul(c, x) and Mul(x, y) raise KeyError)",
             _marabou("mulEquations, line 1096 (multiple = self.constantMap[inputName2])"),
             _second_not_constant),
    ToolRule("marabou-mul-vector", "marabou", "Mul", "rejects",
             "the whole constant is used as one equation coefficient: only a scalar works "
             "(where a vector fails, at equation building, was not run here)",
             _marabou("mulEquations, line 1096"), _mul_vector_constant),
    ToolRule("marabou-sub-broadcast", "marabou", "Sub", "rejects",
             "both operands must have the same shape (no broadcasting) and the first must be "
             "a variable", _marabou("subEquations, lines 1285 and 1291"), _sub_unsupported),
    ToolRule("marabou-add-folds-shared", "marabou", "Add", "mishandles",
             "adding a constant is folded into the equations of the producing node, whose "
             "variables are then x + c for every other reader too",
             _marabou("addEquations, line 1202 (equ.setScalar(equ.scalar - constInput[ind]))"),
             _add_folds_into_shared),
    ToolRule("marabou-concat-constant", "marabou", "Concat", "rejects",
             "every input must be a variable (a constant input raises KeyError)",
             _marabou("concatEquations, line 956"),
             lambda n, c: any(name in c.constants for name in n.input)),
    ToolRule("marabou-reshape-zero", "marabou", "Reshape", "rejects",
             "numpy's reshape takes a 0 in the shape literally (ONNX: copy that dimension); "
             "export with a fixed batch", _marabou("reshape, line 402"), _shape_has_zero),
    ToolRule("marabou-gemm-b-dynamic", "marabou", "Gemm", "rejects",
             "B must be a constant", _marabou("gemmEquations, line 784"),
             lambda n, c: input_name(n, 1) not in c.constants),
    ToolRule("marabou-unsqueeze-axes-attribute", "marabou", "Unsqueeze", "rejects",
             "axes must be the second input (opset 13 and later), not an attribute",
             _marabou("unsqueeze, line 492"), lambda n, c: len(n.input) < 2),
    ToolRule("marabou-squeeze-axes-attribute", "marabou", "Squeeze", "rejects",
             "axes must be the second input (opset 13 and later), not an attribute",
             _marabou("squeeze, line 513"), lambda n, c: len(n.input) < 2),
    ToolRule("marabou-slice-inputs", "marabou", "Slice", "rejects",
             "starts, ends, axes and steps must all be given as inputs",
             _marabou("slice, line 471"), lambda n, c: len(n.input) < 5),
)

# ----------------------------------------------------------------------------------------
# NNV: MATLAB's importONNXNetwork/importONNXLayers, then matlab2nnv's layer list.

_NNV = ("verivital/nnv code/nnv/engine/utils/onnx2nnv.m and matlab2nnv.m (layer classes with a "
        "branch); which MATLAB layer importONNXNetwork makes of an ONNX op is MATLAB's "
        "(closed source) and not verified here")



def _pad_not_zero(node, ctx) -> bool:
    """Some pad, or the padding value, is not zero (or is not a constant the lint can read)."""
    pads = attr(node, "pads") if len(node.input) < 2 else ctx.values(input_name(node, 1))
    value = attr(node, "value", 0.0) if len(node.input) < 3 or not input_name(node, 2) \
        else ctx.values(input_name(node, 2))
    return pads is None or value is None or any(p != 0 for p in list(pads)) or any(
        v != 0 for v in list(getattr(value, "flat", [value])))


NNV_RULES = (
    ToolRule("nnv-pad-nonzero", "nnv", "Pad", "rejects",
             "a Pad layer is passed over only when all its parameters (pads, value) are zero; "
             "otherwise check_layer_parameters raises, the try around it swallows that, and "
             "the layer falls through to error('Unsupported Class of Layer')",
             "verivital/nnv@02eaf3d code/nnv/engine/utils/matlab2nnv.m matlab2nnv (the "
             "PadLayer branch in the try) and check_layer_parameters", _pad_not_zero),
)

TOOLS: dict[str, ToolSpec] = {}
"""The tools `lint_onnx` knows, by id."""


def _tool(tool, importer, supported, source):
    assert tool not in TOOLS, tool
    TOOLS[tool] = ToolSpec(tool, importer, frozenset(supported), source)


_tool("abcrown", "onnx2pytorch (alpha-beta-CROWN's load_model_onnx)", (
    "Add", "And", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat",
    "Constant", "ConstantOfShape", "Conv", "ConvTranspose", "Div", "Elu", "Equal", "Erf", "Exp",
    "Expand", "Flatten", "Floor", "Gather", "GatherND", "Gemm", "GlobalAveragePool", "Greater",
    "Identity", "InstanceNormalization", "LeakyRelu", "Less", "Log", "Loop", "LSTM", "MatMul",
    "Max", "MaxPool", "Min", "Mul", "NonMaxSuppression", "Not", "OneHot", "Or", "Pad", "Pow",
    "PRelu", "Range", "Reciprocal", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd",
    "ReduceSum", "Relu", "Reshape", "Resize", "Scatter", "ScatterElements", "ScatterND",
    "Shape", "Sigmoid", "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt", "Squeeze",
    "Sub", "Tanh", "ThresholdedRelu", "Tile", "TopK", "Transpose", "Unsqueeze", "Upsample",
    "Where"), _ABCROWN + "; op list: " + _o2p(
        "onnx2pytorch/convert/operations.py convert_operations (other op types go to "
        "getattr(torch, op_type.lower()) unchecked, else NotImplementedError, line 277)"))
_tool("marabou", "maraboupy ONNXParser (Python)", (
    "Constant", "Identity", "Dropout", "Cast", "ConstantOfShape", "Reshape", "Flatten",
    "Transpose", "Unsqueeze", "Squeeze", "Slice", "BatchNormalization", "Concat", "MaxPool",
    "Conv", "Gemm", "MatMul", "Mul", "Add", "Relu", "Sigmoid", "Split", "Resize", "Tanh",
    "LeakyRelu", "Softmax", "Sub"), _marabou(
        "ONNXParser.makeMarabouEquations, line 217 ('Operation {} not implemented')"))
_tool("eran", "ERAN onnx_translator", (
    "Constant", "Flatten", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Conv", "MaxPool",
    "AveragePool", "Relu", "Sigmoid", "Tanh", "Softmax", "BatchNormalization", "LeakyRelu",
    "Gather", "Shape", "Reshape", "Unsqueeze", "Concat", "Tile", "Expand", "Pad"), ERAN_OPS_SOURCE)
_tool("nnv", "MATLAB importONNXNetwork + NNV matlab2nnv", (
    "Gemm", "Conv", "ConvTranspose", "BatchNormalization", "Relu", "LeakyRelu", "Tanh",
    "Sigmoid", "MaxPool", "AveragePool", "GlobalAveragePool", "Add", "Sub", "Mul", "Div",
    "Concat", "Flatten", "Reshape", "Softmax", "Dropout", "Pad"), _NNV)

RULES: tuple[ToolRule, ...] = ABCROWN_RULES + MARABOU_RULES + ERAN_RULES + NNV_RULES
"""Every known failure, in table order; `lint_onnx` applies those of the chosen tool."""

LINT_TOOLS: tuple[str, ...] = tuple(TOOLS)
"""The tool ids `lint_onnx` accepts."""

RULES_BY_OP: dict[tuple[str, str], tuple[ToolRule, ...]] = {}
for _rule in RULES:
    RULES_BY_OP[_rule.tool, _rule.op_type] = (*RULES_BY_OP.get((_rule.tool, _rule.op_type), ()),
                                              _rule)
assert len({r.code for r in RULES}) == len(RULES), "rule codes must be unique"
assert all(r.tool in TOOLS for r in RULES), "every rule names a known tool"
