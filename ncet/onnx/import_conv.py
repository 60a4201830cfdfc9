"""The ONNX ops on images an import maps onto canonical operators: Conv (with a zero Pad in
front folded into its padding), BatchNormalization, MaxPool, AveragePool (with a zero Pad
folded the same way) and GlobalAveragePool. ONNX writes 2-d pads as [top, left, bottom,
right]; GraphIR's Conv2d padding is [top, bottom, left, right], and pooling takes one pad
per axis, so asymmetric pooling pads are refused."""

from __future__ import annotations

import math

import numpy as np

from .import_errors import ImportRejection
from .import_static import attribute
from .importer import Importer, Tensor


def _batched(imp: Importer, op: str) -> None:
    """ONNX's image ops read the file's axis 0 as N and axis 1 as C: without a batch axis
    (`offset` 0) both are part of GraphIR's sample, whose first axis its operators read as
    the channels."""
    if not imp.offset:
        raise ImportRejection("onnx-batch-axis", f"{op} in a file without a batch axis: the "
                              "graph inputs' first axis is neither symbolic nor 1, so ONNX's "
                              "N axis is part of the sample here",
                              "export with a batch axis (symbolic, or of size 1)")


def _spatial(imp: Importer, x: Tensor, op: str) -> None:
    _batched(imp, op)
    if len(x.shape) != 3:
        raise ImportRejection("onnx-attribute", f"{op} of a {len(x.shape) + imp.offset}-d "
                              "tensor: only 2-d images (N, C, H, W) are imported",
                              "write a 1-d signal as an image of height 1")


def _auto_pad(node) -> None:
    mode = attribute(node, "auto_pad", "NOTSET")
    if mode not in ("NOTSET", "VALID"):
        raise ImportRejection("onnx-attribute", f"{node.op_type} with auto_pad={mode}",
                              "export with explicit pads")


def _pads(node) -> list[int]:
    """[top, left, bottom, right], ONNX's order (0 with auto_pad VALID)."""
    if attribute(node, "auto_pad", "NOTSET") == "VALID":
        return [0, 0, 0, 0]
    pads = [int(p) for p in attribute(node, "pads", [0, 0, 0, 0])]
    if len(pads) != 4 or min(pads) < 0:
        raise ImportRejection("onnx-attribute", f"{node.op_type} pads={pads}",
                              "give 2-d pads as [top, left, bottom, right], each >= 0")
    return pads


def _padded_input(imp: Importer, node) -> tuple[Tensor, list[int], tuple[int, ...]]:
    """The node's image input and the pads a Pad right before it adds, with that Pad's
    index (none: zeros and ())."""
    name = node.input[0]
    if name in imp.pads:
        x, pads, index = imp.pads[name]
        return x, pads, (index,)
    return imp.tensor(name), [0, 0, 0, 0], ()


def _ints(node, name: str, default: list[int]) -> list[int]:
    """Strides, dilations or a kernel: two ints, each 1 or more."""
    value = [int(v) for v in attribute(node, name, default)]
    if len(value) != 2 or min(value) < 1:
        raise ImportRejection("onnx-attribute", f"{node.op_type} {name}={value}: two sizes of "
                              "1 or more", "check the file: onnxruntime refuses it too")
    return value


def _conv(imp: Importer, i: int, node) -> str:
    _auto_pad(node)
    x, extra, before = _padded_input(imp, node)
    _spatial(imp, x, "Conv")
    w = imp.static(node.input[1], "the weight")
    if w.ndim != 4:
        raise ImportRejection("onnx-attribute", f"Conv with a weight of rank {w.ndim}: only "
                              "2-d convolution is imported",
                              "write a 1-d convolution as a 2-d one of height 1")
    kernel = attribute(node, "kernel_shape")
    if kernel is not None and list(kernel) != list(w.shape[2:]):
        raise ImportRejection("onnx-attribute", f"Conv kernel_shape={list(kernel)} but the "
                              f"weight is {list(w.shape)}",
                              "check the file: onnxruntime refuses it too")
    top, left, bottom, right = (p + e for p, e in zip(_pads(node), extra))
    weight = imp.lift(node.input[1], w, x.dtype, "the weight")
    bias = None
    if len(node.input) > 2 and node.input[2]:
        bias = imp.lift(node.input[2], imp.static(node.input[2], "the bias"), x.dtype,
                        "the bias")
    imp.emit("Conv2d", [x], {"weight": weight, "bias": bias,
                             "stride": _ints(node, "strides", [1, 1]),
                             "padding": [top, bottom, left, right],
                             "dilation": _ints(node, "dilations", [1, 1]),
                             "groups": int(attribute(node, "group", 1)),
                             "padding_mode": "zeros"}, node.output[0], (*before, i))
    return "Conv2d"


def _pad(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    mode = attribute(node, "mode", "constant")
    pads = attribute(node, "pads")
    if pads is None and len(node.input) > 1 and node.input[1]:
        pads = imp.static_ints(node.input[1], "the pads").reshape(-1).tolist()
    value = attribute(node, "value", 0.0)
    if len(node.input) > 2 and node.input[2]:
        given = imp.static(node.input[2], "the pad value").reshape(-1)
        if given.size != 1:
            raise ImportRejection("onnx-pad", f"Pad with a value of {given.size} elements",
                                  "give Pad one constant value, or none")
        value = given[0]
    pads = [int(p) for p in pads or []]
    rank = len(x.shape) + imp.offset
    if len(node.input) > 3 and node.input[3]:
        raise ImportRejection("onnx-pad", "Pad with an axes input",
                              "give Pad every axis' pads (opset 11 to 17 form)")
    if mode != "constant" or float(value) != 0.0 or math.copysign(1.0, float(value)) < 0 \
            or len(pads) != 2 * rank or min(pads, default=0) < 0:
        raise ImportRejection("onnx-pad", f"Pad mode={mode!r}, value={value}, pads={pads}: "
                              "only zero padding (+0) is imported",
                              "pad with zeros in the Conv's own pads; reflect, edge and "
                              "nonzero constants are not imported")
    if not any(pads):
        imp.emit("Identity", [x], {}, node.output[0], (i,))
        return "Identity"
    begin, end = pads[:rank], pads[rank:]
    user = imp.only_use(node.output[0])
    target = imp.graph.node[user].op_type if user is not None else ""
    if rank != 4 or any(begin[:2]) or any(end[:2]) or not imp.offset or \
            target not in ("Conv", "AveragePool"):
        raise ImportRejection("onnx-pad", "a Pad that is not zero padding of an image's "
                              "height and width read by one Conv or AveragePool alone",
                              "move the padding into the Conv's or AveragePool's pads")
    imp.pads[node.output[0]] = (x, [begin[2], begin[3], end[2], end[3]], i)
    imp.values[node.output[0]] = x  # read through imp.pads by the one node after it
    return "Conv2d" if target == "Conv" else "AvgPool2d"


def _pool_padding(node, extra: list[int]) -> list[int]:
    top, left, bottom, right = (p + e for p, e in zip(_pads(node), extra))
    if top != bottom or left != right:
        raise ImportRejection("onnx-attribute", f"{node.op_type} with asymmetric pads "
                              f"[{top}, {left}, {bottom}, {right}]: pooling pads each axis "
                              "the same on both sides", "pad symmetrically, or put the extra "
                              "padding in a Pad before an AveragePool")
    return [top, left]


def _output_sizes(x: Tensor, kernel, stride, padding, dilation, ceil: bool) -> list[int]:
    """ONNX's pooled sizes (its formula, which keeps a last window starting in the right
    padding that PyTorch drops)."""
    rounding = math.ceil if ceil else math.floor
    return [int(rounding((size + 2 * p - d * (k - 1) - 1) / s + 1))
            for size, k, s, p, d in zip(x.shape[1:], kernel, stride, padding, dilation)]


def _pool(op_type: str):
    def rule(imp: Importer, i: int, node) -> str:
        _auto_pad(node)
        x, extra, before = _padded_input(imp, node)
        _spatial(imp, x, node.op_type)
        if len(node.output) > 1 and node.output[1] and imp.uses.get(node.output[1]):
            raise ImportRejection("onnx-attribute", "MaxPool whose indices output is used",
                              "use the pooled values only")
        if int(attribute(node, "storage_order", 0)):
            raise ImportRejection("onnx-attribute", "MaxPool with storage_order=1",
                              "export with the default storage_order=0")
        kernel = _ints(node, "kernel_shape", [])
        stride = _ints(node, "strides", [1, 1])
        dilation = _ints(node, "dilations", [1, 1])
        ceil = bool(int(attribute(node, "ceil_mode", 0)))
        padding = _pool_padding(node, extra)
        attrs = {"kernel_size": kernel, "stride": stride, "padding": padding,
                 "ceil_mode": ceil}
        if op_type == "MaxPool2d":
            attrs["dilation"] = dilation
        else:
            if dilation != [1, 1]:
                raise ImportRejection("onnx-attribute", "AveragePool with dilations",
                              "export the pooling without dilations")
            counted = bool(int(attribute(node, "count_include_pad", 0))) or any(extra)
            if any(extra) and any(_pads(node)):
                raise ImportRejection("onnx-pad", "a Pad before an AveragePool that pads "
                                      "as well", "put all the padding in one of the two")
            attrs.update(count_include_pad=counted, divisor_override=None)
        made = imp.emit(op_type, [x], attrs, node.output[0], (*before, i))
        if list(made.shape[1:]) != _output_sizes(x, kernel, stride, padding, dilation, ceil):
            raise ImportRejection("onnx-attribute", f"{node.op_type} with ceil_mode: ONNX "
                                  "keeps a last window that starts in the padding, PyTorch "
                                  "drops it", "pad the input so that every window starts inside "
                              "it, or export with ceil_mode=0")
        return op_type
    return rule


def _global_average_pool(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    _spatial(imp, x, "GlobalAveragePool")
    imp.emit("AdaptiveAvgPool2d", [x], {"output_size": [1, 1]}, node.output[0], (i,))
    return "AdaptiveAvgPool2d"


def _batch_normalization(imp: Importer, i: int, node) -> str:
    x = imp.tensor(node.input[0])
    if int(attribute(node, "training_mode", 0)) or \
            any(out and imp.uses.get(out) for out in node.output[1:]):
        raise ImportRejection("onnx-training-mode", "BatchNormalization in training mode",
                              "export the network in eval mode (model.eval())")
    _batched(imp, "BatchNormalization")
    if not int(attribute(node, "spatial", 1)):
        raise ImportRejection("onnx-attribute", "BatchNormalization with spatial=0",
                              "export with per-channel statistics (spatial=1)")
    if not 1 <= len(x.shape) <= 3:
        raise ImportRejection("onnx-attribute", f"BatchNormalization of per-sample rank "
                              f"{len(x.shape)}", "normalise (N, C), (N, C, L) or "
                              "(N, C, H, W) tensors")
    eps = float(np.float32(attribute(node, "epsilon", 1e-5)))  # a float32 attribute
    names = {}
    for key, position in (("weight", 1), ("bias", 2), ("mean", 3), ("var", 4)):
        value = imp.static(node.input[position], f"BatchNormalization's {key}")
        if value.shape != (x.shape[0],):
            raise ImportRejection("onnx-attribute", f"BatchNormalization's {key} of shape "
                                  f"{list(value.shape)} for {x.shape[0]} channels",
                                  "check the file: onnxruntime refuses it too")
        names[key] = imp.lift(node.input[position], value, x.dtype, f"the {key}")
    var = imp.values[node.input[4]]
    if ((var.astype(np.float64) + eps) <= np.finfo(var.dtype).tiny).any():
        raise ImportRejection("onnx-attribute", "BatchNormalization whose var + epsilon is "
                              "not a positive normal number everywhere",
                              "check the file's running variance and epsilon")
    imp.emit("BatchNorm", [x], {**names, "eps": eps}, node.output[0], (i,))
    return "BatchNorm"


CONV_RULES = {
    "Conv": _conv,
    "Pad": _pad,
    "MaxPool": _pool("MaxPool2d"),
    "AveragePool": _pool("AvgPool2d"),
    "GlobalAveragePool": _global_average_pool,
    "BatchNormalization": _batch_normalization,
}
"""ONNX op type -> the rule mapping it onto a canonical image operator."""
