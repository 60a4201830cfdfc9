"""The spelling tables: every FX spelling of spec sections 2-5, keyed by the callable itself.

Each row carries the op_type column of the spec's table (`Spelling.op_types`); the handler's
result is one of them (tests/test_spec_op_types.py).
"""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import nn

from .context import REQUIRED, Spelling
from .handlers import elementwise, indexing, layers, layout

_X = ("input", REQUIRED)

# op_type columns shared by several rows.
_ADD = ("Add", "ElementwiseAffine")  # two graph tensors, or a graph tensor and a constant
_SUB = ("Sub", "ElementwiseAffine")
_AFFINE = ("ElementwiseAffine",)
_LEAKY = ("LeakyReLU", "ReLU", "Identity")  # spec section 7: slopes 0 and 1 normalize
_INDEX = ("GetItem", "Slice")  # spec section 5


def _s(display, op_types, handler, *params, variadic=""):
    op_types = (op_types,) if isinstance(op_types, str) else op_types
    return Spelling(display, handler, (_X, *params), variadic, op_types)


MODULE_SPELLINGS: dict[type[nn.Module], Spelling] = {
    # spec section 2, row for row; handlers read the module's own attributes.
    nn.Linear: _s("nn.Linear", "Linear", layers.linear_module),
    nn.Conv2d: _s("nn.Conv2d", "Conv2d", layers.conv2d_module),
    nn.BatchNorm1d: _s("nn.BatchNorm1d", "BatchNorm", layers.batch_norm_module),
    nn.BatchNorm2d: _s("nn.BatchNorm2d", "BatchNorm", layers.batch_norm_module),
    nn.AdaptiveAvgPool2d: _s("nn.AdaptiveAvgPool2d", "AdaptiveAvgPool2d",
                             layers.adaptive_avg_pool2d),
    nn.AvgPool2d: _s("nn.AvgPool2d", "AvgPool2d", layers.avg_pool2d),
    nn.MaxPool2d: _s("nn.MaxPool2d", "MaxPool2d", layers.max_pool2d),
    nn.Identity: _s("nn.Identity", "Identity", elementwise.identity),
    nn.Dropout: _s("nn.Dropout", "Identity", elementwise.dropout),
    nn.Dropout1d: _s("nn.Dropout1d", "Identity", elementwise.dropout),
    nn.Dropout2d: _s("nn.Dropout2d", "Identity", elementwise.dropout),
    nn.Dropout3d: _s("nn.Dropout3d", "Identity", elementwise.dropout),
    nn.ReLU: _s("nn.ReLU", "ReLU", elementwise.relu),
    nn.LeakyReLU: _s("nn.LeakyReLU", _LEAKY, elementwise.leaky_relu),
    nn.Flatten: _s("nn.Flatten", "Flatten", layout.flatten),
}
"""call_module spellings, keyed by the module's concrete type."""

_OTHER = ("other", REQUIRED)
_ALPHA = ("alpha", 1)
_OUT = ("out", None)
_ROUNDING = ("rounding_mode", None)
_INPLACE = ("inplace", False)
_DROPOUT = (("p", 0.5), ("training", True), _INPLACE)
_AVG_POOL = (("kernel_size", REQUIRED), ("stride", None), ("padding", 0), ("ceil_mode", False),
             ("count_include_pad", True), ("divisor_override", None))
_MAX_POOL = (("kernel_size", REQUIRED), ("stride", None), ("padding", 0), ("dilation", 1),
             ("ceil_mode", False), ("return_indices", False))
_FLATTEN = (("start_dim", 0), ("end_dim", -1))
_MEAN = (("dim", None), ("keepdim", False), ("dtype", None))


def _cat(display, axis_name):
    return Spelling(display, layout.concat, (("tensors", REQUIRED), (axis_name, 0), _OUT),
                    op_types=("Concat",))


FUNCTION_SPELLINGS: dict[object, Spelling] = {
    # spec section 3, row for row.
    F.linear: _s("F.linear", "Linear", layers.linear_function, ("weight", REQUIRED),
                 ("bias", None)),
    F.conv2d: _s("F.conv2d", "Conv2d", layers.conv2d_function, ("weight", REQUIRED),
                 ("bias", None), ("stride", 1), ("padding", 0), ("dilation", 1), ("groups", 1)),
    operator.add: _s("operator.add", _ADD, elementwise.add, _OTHER),
    torch.add: _s("torch.add", _ADD, elementwise.add, _OTHER, _ALPHA, _OUT),
    operator.sub: _s("operator.sub", _SUB, elementwise.sub, _OTHER),
    torch.sub: _s("torch.sub", _SUB, elementwise.sub, _OTHER, _ALPHA, _OUT),
    torch.subtract: _s("torch.subtract", _SUB, elementwise.sub, _OTHER, _ALPHA, _OUT),
    operator.mul: _s("operator.mul", _AFFINE, elementwise.mul, _OTHER),
    torch.mul: _s("torch.mul", _AFFINE, elementwise.mul, _OTHER, _OUT),
    torch.multiply: _s("torch.multiply", _AFFINE, elementwise.mul, _OTHER, _OUT),
    operator.truediv: _s("operator.truediv", _AFFINE, elementwise.div, _OTHER),
    torch.div: _s("torch.div", _AFFINE, elementwise.div, _OTHER, _ROUNDING, _OUT),
    torch.divide: _s("torch.divide", _AFFINE, elementwise.div, _OTHER, _ROUNDING, _OUT),
    torch.true_divide: _s("torch.true_divide", _AFFINE, elementwise.div, _OTHER, _OUT),
    F.relu: _s("F.relu", "ReLU", elementwise.relu, _INPLACE),
    F.leaky_relu: _s("F.leaky_relu", _LEAKY, elementwise.leaky_relu, ("negative_slope", 0.01),
                     _INPLACE),
    torch.relu: _s("torch.relu", "ReLU", elementwise.relu),
    F.adaptive_avg_pool2d: _s("F.adaptive_avg_pool2d", "AdaptiveAvgPool2d",
                              layers.adaptive_avg_pool2d, ("output_size", REQUIRED)),
    F.avg_pool2d: _s("F.avg_pool2d", "AvgPool2d", layers.avg_pool2d, *_AVG_POOL),
    F.max_pool2d: _s("F.max_pool2d", "MaxPool2d", layers.max_pool2d, *_MAX_POOL),
    F.dropout: _s("F.dropout", "Identity", elementwise.dropout, *_DROPOUT),
    F.dropout1d: _s("F.dropout1d", "Identity", elementwise.dropout, *_DROPOUT),
    F.dropout2d: _s("F.dropout2d", "Identity", elementwise.dropout, *_DROPOUT),
    F.dropout3d: _s("F.dropout3d", "Identity", elementwise.dropout, *_DROPOUT),
    torch.cat: _cat("torch.cat", "dim"),
    torch.concat: _cat("torch.concat", "dim"),
    torch.concatenate: _cat("torch.concatenate", "axis"),
    torch.flatten: _s("torch.flatten", "Flatten", layout.flatten, *_FLATTEN),
    torch.mean: _s("torch.mean", "ReduceMean", layout.mean, *_MEAN, _OUT),
    torch.reshape: _s("torch.reshape", "Reshape", layout.reshape, ("shape", REQUIRED)),
    torch.squeeze: _s("torch.squeeze", "Reshape", layout.squeeze, ("dim", None)),
    torch.unsqueeze: _s("torch.unsqueeze", "Reshape", layout.unsqueeze, ("dim", REQUIRED)),
    torch.permute: _s("torch.permute", "Permute", layout.permute, ("dims", REQUIRED)),
    torch.transpose: _s("torch.transpose", "Transpose", layout.transpose, ("dim0", REQUIRED),
                        ("dim1", REQUIRED)),
    operator.getitem: _s("operator.getitem", _INDEX, indexing.getitem, ("index", REQUIRED)),
}
"""call_function spellings, keyed by the callable FX records as node.target."""

METHOD_SPELLINGS: dict[str, Spelling] = {
    # spec section 4, row for row; the first argument is the tensor the method is called on.
    "add": _s("Tensor.add", _ADD, elementwise.add, _OTHER, _ALPHA),
    "sub": _s("Tensor.sub", _SUB, elementwise.sub, _OTHER, _ALPHA),
    "subtract": _s("Tensor.subtract", _SUB, elementwise.sub, _OTHER, _ALPHA),
    "mul": _s("Tensor.mul", _AFFINE, elementwise.mul, _OTHER),
    "multiply": _s("Tensor.multiply", _AFFINE, elementwise.mul, _OTHER),
    "div": _s("Tensor.div", _AFFINE, elementwise.div, _OTHER, _ROUNDING),
    "divide": _s("Tensor.divide", _AFFINE, elementwise.div, _OTHER, _ROUNDING),
    "true_divide": _s("Tensor.true_divide", _AFFINE, elementwise.div, _OTHER),
    "relu": _s("Tensor.relu", "ReLU", elementwise.relu),
    "flatten": _s("Tensor.flatten", "Flatten", layout.flatten, *_FLATTEN),
    "mean": _s("Tensor.mean", "ReduceMean", layout.mean, *_MEAN),
    "reshape": _s("Tensor.reshape", "Reshape", layout.reshape, ("shape", REQUIRED),
                  variadic="shape"),
    "view": _s("Tensor.view", "Reshape", layout.reshape, ("shape", REQUIRED), variadic="shape"),
    "squeeze": _s("Tensor.squeeze", "Reshape", layout.squeeze, ("dim", None)),
    "unsqueeze": _s("Tensor.unsqueeze", "Reshape", layout.unsqueeze, ("dim", REQUIRED)),
    "permute": _s("Tensor.permute", "Permute", layout.permute, ("dims", REQUIRED),
                  variadic="dims"),
    "transpose": _s("Tensor.transpose", "Transpose", layout.transpose, ("dim0", REQUIRED),
                    ("dim1", REQUIRED)),
}
"""call_method spellings, keyed by the method name FX records as node.target."""

INPLACE_FUNCTIONS: dict[object, str] = {
    torch.relu_: "torch.relu", F.relu_: "F.relu", F.leaky_relu_: "F.leaky_relu",
    operator.iadd: "x + y", operator.isub: "x - y", operator.imul: "x * c",
    operator.itruediv: "x / c",
}
"""In-place function spellings, rejected before normalization, with the form to use instead."""

REJECTED_FUNCTIONS: dict[object, tuple[str, str, str]] = {
    F.batch_norm: ("batch-norm-function", "F.batch_norm is not mapped",
                   "use nn.BatchNorm1d or nn.BatchNorm2d in evaluation mode with fixed "
                   "running statistics"),
    torch.batch_norm: ("batch-norm-function", "torch.batch_norm is not mapped",
                       "use nn.BatchNorm1d or nn.BatchNorm2d in evaluation mode with fixed "
                       "running statistics"),
}
"""Functions the spec names and rejects outright, with their code, reason and hint."""

_NOT_PIECEWISE_LINEAR = "not piecewise-linear ({}): NCET maps piecewise-linear operators only"
_PADDING = ("padding is not among NCET's canonical operators: if it pads with zeros, the same "
            "on both sides, and a Conv2d follows, give that Conv2d the padding itself "
            "(padding=(p, p)); otherwise pad the input before it reaches the model")

UNSUPPORTED_HINTS: dict[object, str] = {
    "size": "use x.flatten(1) instead of x.view(x.size(0), -1)",
    "contiguous": "remove .contiguous(); GraphIR has no memory layout",
    "chunk": "take slices along the chunked dimension instead, e.g. x[:, a:b] for dim 1 (one "
             "GetItem/Slice per piece; the batch axis stays whole)",
    "split": "take slices along the chunked dimension instead, e.g. x[:, a:b] for dim 1 (one "
             "GetItem/Slice per piece; the batch axis stays whole)",
    "sum": "write x.mean(dim) * n, n the number of elements summed (Mean, then "
           "ElementwiseAffine): equal in exact arithmetic, rounded differently",
    torch.chunk: "take slices along the chunked dimension instead, e.g. x[:, a:b] for dim 1 (one "
             "GetItem/Slice per piece; the batch axis stays whole)",
    torch.sum: "write x.mean(dim) * n, n the number of elements summed (Mean, then "
               "ElementwiseAffine): equal in exact arithmetic, rounded differently",
    F.pad: _PADDING,
    nn.ZeroPad2d: _PADDING,
    nn.ConstantPad2d: _PADDING,
    torch.sigmoid: _NOT_PIECEWISE_LINEAR.format("sigmoid"),
    F.sigmoid: _NOT_PIECEWISE_LINEAR.format("sigmoid"),
    nn.Sigmoid: _NOT_PIECEWISE_LINEAR.format("nn.Sigmoid"),
    torch.tanh: _NOT_PIECEWISE_LINEAR.format("tanh"),
    F.tanh: _NOT_PIECEWISE_LINEAR.format("tanh"),
    nn.Tanh: _NOT_PIECEWISE_LINEAR.format("nn.Tanh"),
    operator.neg: "write x * -1 (an ElementwiseAffine) instead of -x",
}
"""Hints for common spellings outside the tables, keyed by callable or method name (the
clamps' hints depend on their bounds: frontend/clamping.py)."""
