"""ERAN's input normalization, as its ONNX translator takes it out of the network
(eth-sri/eran@8771d31 tf_verify/onnx_translator.py, ONNXTranslator.translate, lines
443-492): which nodes become `config.mean` and `config.std`, for the rules of eran_rules.py."""

from __future__ import annotations

from .tool_graph import input_name

_ERAN_IGNORED = frozenset({"Pack", "Shape", "StridedSlice", "Prod", "Unsqueeze", "Softmax",
                           "Concat", "Flatten", "BatchNormalization"})
"""translate's operations_to_be_ignored (line 443): each is replaced by its first input."""
_ERAN_NORM_STOP = frozenset({"MatMul", "Gemm", "Conv", "MaxPool", "Relu", "Sigmoid", "Tanh",
                             "LeakyRelu"})
"""translate's stop_norm_layers (line 448): no normalization is looked for past one."""
ARITHMETIC = ("Add", "Sub", "Mul", "Div")


def _constants(ctx) -> set[str]:
    """ERAN's constants_map (prepare_model): initializers, Constant outputs, and Add/Sub/Mul/Div
    of two of them, folded."""
    constants = set(ctx.constants)
    for n in ctx.nodes:
        if n.op_type in ARITHMETIC and n.output and len(n.input) == 2 \
                and all(name in constants for name in n.input):
            constants.add(n.output[0])
    return constants


def normalization_nodes(ctx) -> tuple[int, ...]:
    """The indices of the nodes ERAN's translate takes out of the network as the input
    normalization (config.mean, config.std), as lines 447-492 decide: only when an Add or
    Sub and a Mul or Div come before the first node of `_ERAN_NORM_STOP`, and then each
    Add/Sub/Mul/Div that is the first node translate keeps (Constant nodes and
    `_ERAN_IGNORED` ones aside), up to the node after the pair."""
    stop, mean, std = len(ctx.nodes), False, False
    for i, n in enumerate(ctx.nodes):
        if n.op_type in _ERAN_NORM_STOP or (mean and std):
            stop = i
            break
        mean = mean or n.op_type in ("Add", "Sub")
        std = std or n.op_type in ("Mul", "Div")
    if not (mean and std):
        return ()
    constants, taken, kept = _constants(ctx), [], 0
    for i, n in enumerate(ctx.nodes[:stop + 1]):
        if n.op_type == "Constant" or n.op_type in _ERAN_IGNORED:
            continue
        kept += 1
        if kept == 1 and n.op_type in ARITHMETIC and n.output and n.output[0] not in constants:
            taken.append(i)
            kept = 0  # ignore_node: the next node is the first kept again
        elif n.op_type in ("Add", "Mul") and all(name in constants for name in n.input[:2]):
            kept -= 1  # a constant-only Add/Mul is dropped too (operation_types.pop())
    return tuple(taken)


def div_not_normalization(node, ctx) -> bool:
    """Not taken out, or taken out with no constant operand (add_resources: KeyError)."""
    return ctx.index(node) not in normalization_nodes(ctx) or not any(
        name in ctx.constants for name in node.input[:2])


def normalization_misread(node, ctx) -> bool:
    """Taken out as the input normalization, which ERAN applies as (x - mean) / std, but
    computing something else: the constant is the first operand of a Sub or Div (c - x,
    c / x: add_resources takes the constant whichever operand it is), a Mul or Div comes
    before the Add or Sub ((x / s) - m is read as (x - m) / s), or another node of the same
    kind is taken out too (the later one overwrites config.mean or config.std)."""
    taken, i = normalization_nodes(ctx), ctx.index(node)
    if i not in taken or not any(name in ctx.constants for name in node.input[:2]):
        return False
    if node.op_type in ("Sub", "Div") and input_name(node, 0) in ctx.constants:
        return True
    scale = {"Add": False, "Sub": False, "Mul": True, "Div": True}
    later = [ctx.nodes[j].op_type for j in taken if j > i]
    earlier = [ctx.nodes[j].op_type for j in taken if j < i]
    same = [op for op in (*earlier, *later) if scale[op] == scale[node.op_type]]
    return bool(same) or (scale[node.op_type] and any(not scale[op] for op in later))
