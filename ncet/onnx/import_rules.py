"""The ONNX ops an import maps onto canonical operators that compute: dense layers,
convolution, normalisation, activations, elementwise affine maps and pooling
(docs/onnx-import.md has the table). Each rule reads one ONNX node (and, for a fused
pattern, the node after it), emits IR nodes through the `Importer`, and returns the
op_type its row shows; what the operator cannot express exactly it refuses with a reason."""

from __future__ import annotations

import numpy as np

from .import_conv import CONV_RULES
from .import_errors import ImportRejection
from .import_layout import LAYOUT_RULES
from .import_patterns import (
    batch_norm_defaults,
    index_chain,
    leaky_relu_max,
    mode_pad,
    output_identity,
    padded_conv,
    scalar_operand,
    scaled_operand,
    scaled_tensor,
    transposed_initializer,
)
from .import_static import attribute
from .importer import Importer, Tensor


def _emit1(op_type: str, attrs: dict | None = None):
    def rule(imp: Importer, i: int, node) -> str:
        imp.emit(op_type, [imp.tensor(node.input[0])], dict(attrs or {}), node.output[0], (i,))
        return op_type
    return rule


def _leaky_relu(imp: Importer, i: int, node) -> str:
    slope = float(np.float32(attribute(node, "alpha", 0.01)))  # a float32 attribute
    if not 0.0 <= slope <= 1.0:
        raise ImportRejection("onnx-attribute", f"LeakyRelu alpha={slope} is outside [0, 1]",
                              "a slope outside [0, 1] is not piecewise-linear-monotone as "
                              "LeakyReLU is defined here")
    if slope == 0.0:
        return _emit1("ReLU")(imp, i, node)
    if slope == 1.0:
        return _emit1("Identity")(imp, i, node)
    return _emit1("LeakyReLU", {"negative_slope": slope})(imp, i, node)


def _identity(imp: Importer, i: int, node) -> str:
    return output_identity(imp, node) or _emit1("Identity")(imp, i, node)


def _dropout(imp: Importer, i: int, node) -> str:
    if len(node.input) > 2 and node.input[2]:
        training = imp.static(node.input[2], "training_mode")
        if bool(np.asarray(training).reshape(-1)[0]):
            raise ImportRejection("onnx-training-mode", "Dropout in training mode")
    if len(node.output) > 1 and node.output[1] and imp.uses.get(node.output[1]):
        raise ImportRejection("onnx-training-mode", "a Dropout whose mask output is used")
    return _emit1("Identity")(imp, i, node)


def _cast(imp: Importer, i: int, node) -> str:
    from .importer import DTYPES

    x = imp.tensor(node.input[0])
    if DTYPES.get(int(attribute(node, "to"))) != x.dtype:
        raise ImportRejection("onnx-dtype", f"a Cast of a {x.dtype} graph tensor to another "
                              "type", "export the network in one floating-point dtype")
    return _emit1("Identity")(imp, i, node)


# -- elementwise -------------------------------------------------------------------------------


def affine(imp: Importer, i: int, node, kind: str, x: Tensor, constant: str,
           position: int) -> str:
    """x (op) c or c (op) x with a fixed c: an ElementwiseAffine whose constant is the
    file's own value."""
    c = imp.static(constant, "the constant operand")
    if kind == "div" and position == 1:
        raise ImportRejection("onnx-constant-over-tensor", "a constant divided by a graph "
                              "tensor")
    full = (1, *x.shape) if imp.offset else x.shape
    if c.ndim > len(full) or _broadcast(full, c.shape) != tuple(full):
        raise ImportRejection("onnx-broadcast", f"a constant of shape {list(c.shape)} against "
                              f"a graph tensor of shape {list(full)}"
                              f"{' (batch axis first)' if imp.offset else ''}",
                              "give the constant the graph tensor's shape, or one that "
                              "broadcasts into it without growing it")
    if kind == "div":
        tiny = np.finfo(c.dtype).tiny if c.dtype.kind == "f" else 1
        if (np.abs(c) < tiny).any():
            raise ImportRejection("onnx-zero-divisor", "a divisor that is zero or subnormal "
                                  "somewhere")
    name = imp.lift(constant, c, x.dtype, "the constant operand")
    imp.emit("ElementwiseAffine", [x], {"kind": kind, "tensor_position": position,
                                        "scalar": None, "constant": name, "alpha": 1.0},
             node.output[0], (i,))
    return "ElementwiseAffine"


def _broadcast(a, b) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        return None


def _binary(kind: str):
    def rule(imp: Importer, i: int, node) -> str:
        made = None
        if kind == "mul":
            made = leaky_relu_max(imp, i, node) or scaled_tensor(imp, i, node)
        elif kind in ("add", "sub"):
            made = scaled_operand(imp, i, node, kind)
        if made is None:
            made = _plain_binary(imp, i, node, kind)
            scalar_operand(imp, node)
        return made
    return rule


def _plain_binary(imp: Importer, i: int, node, kind: str) -> str:
    a, b = node.input[:2]
    ta, tb = (isinstance(imp.values.get(n), Tensor) for n in (a, b))
    if ta and tb:
        if kind in ("mul", "div"):
            raise ImportRejection("onnx-tensor-tensor", f"{node.op_type} of two graph "
                                  "tensors", "a product of two input-dependent values is not "
                                  "piecewise linear: cut the network before it")
        x, y = imp.tensor(a), imp.tensor(b)
        if len(x.shape) != len(y.shape) or _broadcast(x.shape, y.shape) is None:
            raise ImportRejection("onnx-broadcast", f"{node.op_type} of shapes "
                                  f"{list(x.shape)} and {list(y.shape)} per sample: they "
                                  "would broadcast across the batch axis",
                                  "give both operands the same rank")
        op_type = "Add" if kind == "add" else "Sub"
        imp.emit(op_type, [x, y], {"alpha": 1.0}, node.output[0], (i,))
        return op_type
    position = 0 if ta else 1
    x = imp.tensor(a if ta else b)
    return affine(imp, i, node, kind, x, b if ta else a, position)


def _neg(imp: Importer, i: int, node) -> str:
    imp.emit("ElementwiseAffine", [imp.tensor(node.input[0])],
             {"kind": "mul", "tensor_position": 0, "scalar": -1.0, "constant": None,
              "alpha": 1.0}, node.output[0], (i,))
    return "ElementwiseAffine"


# -- dense layers ------------------------------------------------------------------------------


def _bias_after(imp: Importer, i: int, value: str, width: int, dtype: str):
    """The Add right after a MatMul that adds a fixed vector of `width`: (its index, the
    bias constant's name), or None."""
    j = imp.only_use(value)
    if j is None or imp.graph.node[j].op_type != "Add":
        return None
    add = imp.graph.node[j]
    other = add.input[1] if add.input[0] == value else add.input[0]
    if other == value or (imp.exported and not value.startswith(add.output[0] + "/")):
        return None  # in NCET's export a bias Add's MatMul writes `<node>/...`
    bias = imp.values.get(other)
    if not isinstance(bias, np.ndarray) or bias.shape != (width,) or \
            bias.dtype != np.dtype(dtype):
        return None
    return j, imp.lift(other, bias, dtype, "the bias")


def _linear(imp: Importer, i: int, node, x: Tensor, weight: str, out: str) -> str:
    width = imp.constants[weight].shape[0]
    fused = _bias_after(imp, i, out, width, x.dtype)
    if fused is None:
        imp.emit("Linear", [x], {"weight": weight, "bias": None}, out, (i,))
    else:
        j, bias = fused
        imp.absorb(j, i, "Linear")
        imp.emit("Linear", [x], {"weight": weight, "bias": bias}, imp.graph.node[j].output[0],
                 (i, j))
    return "Linear"


def _matmul(imp: Importer, i: int, node) -> str:
    a, b = node.input[:2]
    va, vb = imp.values.get(a), imp.values.get(b)
    if isinstance(va, Tensor) and isinstance(vb, Tensor):
        raise ImportRejection("onnx-tensor-tensor", "MatMul of two graph tensors",
                              "a product of two input-dependent values (attention, say) is "
                              "not piecewise linear: cut the network before it")
    if isinstance(va, Tensor):
        if vb.ndim != 2:
            raise ImportRejection("onnx-attribute", f"MatMul by a fixed operand of rank "
                                  f"{vb.ndim}: only a matrix is a dense layer")
        if not va.shape:
            raise ImportRejection("onnx-batch-axis", "MatMul of a per-sample scalar",
                                  "give the graph tensor a feature axis")
        original = transposed_initializer(imp, b)
        weight = imp.lift(original, imp.values[original], va.dtype, "the weight") \
            if original else imp.derived(b, vb.T, va.dtype, "the weight", "transposed")
        return _linear(imp, i, node, va, weight, node.output[0])
    x = imp.tensor(b)
    if imp.offset or len(x.shape) != 1 or va.ndim != 2:
        raise ImportRejection("onnx-batch-axis", "a fixed matrix times the graph tensor "
                              "contracts the graph tensor's first axis",
                              "write the layer as x @ W (Gemm or MatMul with the weight "
                              "second)")
    weight = imp.lift(a, va, x.dtype, "the weight")
    return _linear(imp, i, node, x, weight, node.output[0])


def _gemm(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    w = imp.static(node.input[1], "Gemm's B")
    alpha, beta = (float(np.float32(attribute(node, k, 1.0))) for k in ("alpha", "beta"))
    if int(attribute(node, "transA", 0)):
        raise ImportRejection("onnx-batch-axis", "Gemm with transA=1 transposes the graph "
                              "tensor into the product" + (", across its batch axis"
                                                           if imp.offset else ""),
                              "write the layer as x @ W (transA=0)")
    if alpha != 1.0 or beta != 1.0:
        raise ImportRejection("onnx-attribute", f"Gemm with alpha={alpha}, beta={beta}: the "
                              "product's scaling has no exact canonical form with the file's "
                              "own weights", "fold alpha into B and beta into C in the file")
    if len(x.shape) + imp.offset != 2 or w.ndim != 2:
        raise ImportRejection("onnx-attribute", "Gemm of operands that are not matrices")
    transposed = bool(int(attribute(node, "transB", 0)))
    weight = imp.lift(node.input[1], w, x.dtype, "the weight") if transposed else \
        imp.derived(node.input[1], w.T, x.dtype, "the weight", "transposed")
    bias = None
    if len(node.input) > 2 and node.input[2]:
        c = imp.static(node.input[2], "Gemm's C")
        width = imp.constants[weight].shape[0]
        if c.shape == (width,):
            bias = imp.lift(node.input[2], c, x.dtype, "the bias")
        elif c.shape == (1, width):
            bias = imp.derived(node.input[2], c.reshape(width), x.dtype, "the bias",
                               "reshaped")
        else:
            raise ImportRejection("onnx-broadcast", f"Gemm's C of shape {list(c.shape)} is "
                                  f"not a bias vector of {width}")
    imp.emit("Linear", [x], {"weight": weight, "bias": bias}, node.output[0], (i,))
    return "Linear"


def _reduce_sum(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    axes = attribute(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = imp.static_ints(node.input[1], "the axes").reshape(-1).tolist()
    rank = len(x.shape) + imp.offset
    if axes is not None and any(not -rank <= int(a) < rank for a in axes):
        raise ImportRejection("onnx-attribute", f"ReduceSum axes {list(axes)} out of range "
                              f"for rank {rank}")
    axes = None if axes is None else [int(a) % rank for a in axes]
    if axes != [rank - 1] or not int(attribute(node, "keepdims", 1)) or not x.shape:
        raise ImportRejection("onnx-attribute", "ReduceSum other than over the last axis with "
                              "keepdims=1, the form that is exactly a dense layer of ones",
                              "sum over the last axis with keepdims=1, or cut the network "
                              "before it")
    ones = np.ones((1, x.shape[-1]), np.dtype(x.dtype))
    weight = imp.derived(node.output[0], ones, x.dtype, "the summing weight", "ones")
    imp.emit("Linear", [x], {"weight": weight, "bias": None}, node.output[0], (i,))
    return "Linear"


def _batch_normalization(imp: Importer, i: int, node) -> str:
    made = CONV_RULES["BatchNormalization"](imp, i, node)
    batch_norm_defaults(imp, node)
    return made


def _pad(imp: Importer, i: int, node) -> str:
    return mode_pad(imp, i, node) or CONV_RULES["Pad"](imp, i, node)


def _conv(imp: Importer, i: int, node) -> str:
    made = CONV_RULES["Conv"](imp, i, node)
    padded_conv(imp, node)
    return made


def _slice(imp: Importer, i: int, node) -> str:
    return index_chain(imp, i, node) or LAYOUT_RULES["Slice"](imp, i, node)


IMPORT_RULES = {
    "Relu": _emit1("ReLU"),
    "LeakyRelu": _leaky_relu,
    "Identity": _identity,
    "Dropout": _dropout,
    "Cast": _cast,
    "Add": _binary("add"),
    "Sub": _binary("sub"),
    "Mul": _binary("mul"),
    "Div": _binary("div"),
    "Neg": _neg,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "ReduceSum": _reduce_sum,
    **LAYOUT_RULES,
    **CONV_RULES,
    "BatchNormalization": _batch_normalization,
    "Pad": _pad,
    "Conv": _conv,
    "Slice": _slice,
}
"""ONNX op type -> the rule that maps one of its nodes onto canonical operators."""
