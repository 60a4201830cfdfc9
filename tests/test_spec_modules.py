"""Spec section 2 (module calls): one row per module type, and the module rejections of section 7.

Each accepted row places the module at the spec's example `node.target`, converts it, checks
the canonical op_type, its provenance and key attributes, and compares with eager PyTorch.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ncet
from tests.conftest import (
    At,
    assert_attrs,
    assert_rejected,
    convert_and_compare,
    fx_module_node,
    only_op,
    reseed,
)
from tests.spelling_columns import op_type_column


def bn(cls, n, **kwargs):
    """A BatchNorm with non-trivial running statistics and affine parameters."""
    return reseed(cls(n, **kwargs), seed=3)


# (spelling, module factory, example node.target, per-sample shape, op_type, attributes)
MODULE_ROWS = [
    ("nn.Linear", lambda: nn.Linear(4, 3), "block.linear", (4,), "Linear",
     {"weight": "block.linear.weight", "bias": "block.linear.bias"}),
    ("nn.Linear(bias=False)", lambda: nn.Linear(4, 3, bias=False), "block.linear", (2, 4),
     "Linear", {"weight": "block.linear.weight", "bias": None}),
    ("nn.Conv2d", lambda: nn.Conv2d(2, 3, 3, padding=1), "features.conv", (2, 5, 5), "Conv2d",
     {"weight": "features.conv.weight", "bias": "features.conv.bias", "stride": [1, 1],
      "dilation": [1, 1], "groups": 1, "padding_mode": "zeros"}),
    ("nn.Conv2d(stride=2,groups=2)", lambda: nn.Conv2d(2, 4, (3, 2), stride=2, groups=2),
     "features.conv", (2, 7, 6), "Conv2d",
     {"stride": [2, 2], "groups": 2}),
    ("nn.BatchNorm1d", lambda: bn(nn.BatchNorm1d, 4), "features.batch_norm", (4,), "BatchNorm",
     {"eps": 1e-5}),
    ("nn.BatchNorm1d(rank3)", lambda: bn(nn.BatchNorm1d, 3), "features.batch_norm", (3, 5),
     "BatchNorm", {}),
    ("nn.BatchNorm2d", lambda: bn(nn.BatchNorm2d, 2, eps=1e-3), "features.batch_norm",
     (2, 3, 3), "BatchNorm", {"eps": 1e-3}),
    ("nn.AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d((2, 3)), "adaptive_pool", (3, 4, 6),
     "AdaptiveAvgPool2d", {"output_size": [2, 3]}),
    ("nn.AdaptiveAvgPool2d(uneven)", lambda: nn.AdaptiveAvgPool2d(3), "adaptive_pool",
     (2, 5, 7), "AdaptiveAvgPool2d", {"output_size": [3, 3]}),
    ("nn.Linear(rank 3)", lambda: nn.Linear(4, 3), "block.linear", (2, 5, 4), "Linear", {}),
    ("nn.Conv2d(padding_mode=reflect)",
     lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), "features.conv",
     (2, 5, 5), "Conv2d", {"padding_mode": "reflect"}),
    ("nn.AvgPool2d", lambda: nn.AvgPool2d(2), "avg_pool", (2, 4, 4), "AvgPool2d",
     {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}),
    ("nn.AvgPool2d(pad)", lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False), "avg_pool",
     (2, 4, 4), "AvgPool2d", {"count_include_pad": False}),
    ("nn.MaxPool2d", lambda: nn.MaxPool2d(2), "max_pool", (2, 4, 4), "MaxPool2d",
     {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}),
    ("nn.MaxPool2d(pad)", lambda: nn.MaxPool2d(3, 2, 1), "max_pool", (2, 5, 5), "MaxPool2d",
     {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}),
    ("nn.Identity", lambda: nn.Identity(), "identity", (3, 4), "Identity", {}),
    ("nn.Dropout", lambda: nn.Dropout(0.5), "dropout", (3, 4), "Identity", {}),
    ("nn.Dropout1d", lambda: nn.Dropout1d(0.5), "dropout", (3, 4), "Identity", {}),
    ("nn.Dropout2d", lambda: nn.Dropout2d(0.5), "dropout", (2, 3, 3), "Identity", {}),
    ("nn.Dropout3d", lambda: nn.Dropout3d(0.5), "dropout", (2, 2, 3, 3), "Identity", {}),
    ("nn.ReLU", lambda: nn.ReLU(), "relu", (3, 4), "ReLU", {}),
    ("nn.LeakyReLU", lambda: nn.LeakyReLU(0.1), "leaky_relu", (3, 4), "LeakyReLU",
     {"negative_slope": 0.1}),
    ("nn.LeakyReLU()", lambda: nn.LeakyReLU(), "leaky_relu", (3,), "LeakyReLU",
     {"negative_slope": 0.01}),
    ("nn.LeakyReLU(0.0)", lambda: nn.LeakyReLU(0.0), "leaky_relu", (3, 4), "ReLU", {}),
    ("nn.LeakyReLU(1.0)", lambda: nn.LeakyReLU(1.0), "leaky_relu", (3, 4), "Identity", {}),
    ("nn.Flatten", lambda: nn.Flatten(), "flatten", (2, 3, 4), "Flatten",
     {"start_dim": 0, "end_dim": 2}),
    ("nn.Flatten(2,-1)", lambda: nn.Flatten(2, -1), "flatten", (2, 3, 4), "Flatten",
     {"start_dim": 1, "end_dim": 2}),
]


@pytest.mark.parametrize(("factory", "path", "shape", "op_type", "attrs"),
                         [row[1:] for row in MODULE_ROWS], ids=[row[0] for row in MODULE_ROWS])
def test_module_row(factory, path, shape, op_type, attrs):
    module = reseed(factory()).eval()
    model = At(path, module).eval()
    ir = convert_and_compare(model, shape)
    node = only_op(ir)
    assert node.op_type == op_type
    assert node.op_type in op_type_column(model)  # the spec's column in the spelling table
    assert_attrs(node, attrs)
    assert node.source.fx_op == "call_module"
    assert node.source.module_path == path
    assert type(module).__name__ in node.source.module_type
    assert node.name == fx_module_node(model, path)


@pytest.mark.parametrize(("factory", "path", "shape", "op_type", "attrs"),
                         [row[1:] for row in MODULE_ROWS], ids=[row[0] for row in MODULE_ROWS])
def test_module_as_the_model(factory, path, shape, op_type, attrs):
    """The module passed to convert() directly, as `symbolic_trace(module)` would accept it."""
    module = reseed(factory()).eval()
    node = only_op(convert_and_compare(module, shape))
    assert node.op_type == op_type
    assert type(module).__name__ in node.source.module_type


@pytest.mark.parametrize("cls", [nn.BatchNorm1d, nn.BatchNorm2d], ids=lambda c: c.__name__)
def test_batch_norm_keeps_its_statistics(cls):
    """BatchNorm keeps mean, var, eps, weight and bias, each bit-identical to the module's."""
    module = bn(cls, 3, eps=1e-4).eval()
    ir = convert_and_compare(At("features.batch_norm", module).eval(),
                             (3,) if cls is nn.BatchNorm1d else (3, 2, 2))
    node = only_op(ir)
    for attr, tensor in [("mean", module.running_mean), ("var", module.running_var),
                         ("weight", module.weight), ("bias", module.bias)]:
        lifted = ir.constants[node.attrs[attr]]
        assert lifted.dtype == tensor.dtype and torch.equal(lifted, tensor), attr
    assert node.attrs["eps"] == module.eps


def test_batch_norm_without_affine():
    module = bn(nn.BatchNorm1d, 4, affine=False).eval()
    node = only_op(convert_and_compare(At("features.batch_norm", module).eval(), (4,)))
    assert node.op_type == "BatchNorm"
    assert node.attrs["weight"] is None and node.attrs["bias"] is None


def test_linear_weight_is_the_module_weight():
    module = reseed(nn.Linear(4, 3))
    ir = convert_and_compare(At("block.linear", module).eval(), (4,))
    assert torch.equal(ir.constants["block.linear.weight"], module.weight)
    assert torch.equal(ir.constants["block.linear.bias"], module.bias)


# (spelling, module factory, per-sample shape, error class, code, module in training mode)
REJECTED_MODULE_ROWS = [
    ("nn.Dropout(train)", lambda: nn.Dropout(0.5), (3, 4),
     ncet.UnsupportedOperatorError, "dropout-training", True),
    ("nn.Dropout1d(train)", lambda: nn.Dropout1d(0.5), (3, 4),
     ncet.UnsupportedOperatorError, "dropout-training", True),
    ("nn.Dropout2d(train)", lambda: nn.Dropout2d(0.5), (2, 3, 3),
     ncet.UnsupportedOperatorError, "dropout-training", True),
    ("nn.Dropout3d(train)", lambda: nn.Dropout3d(0.5), (2, 2, 3, 3),
     ncet.UnsupportedOperatorError, "dropout-training", True),
    ("nn.ReLU(inplace=True)", lambda: nn.ReLU(inplace=True), (3, 4),
     ncet.UnsupportedOperatorError, "inplace", False),
    ("nn.LeakyReLU(inplace=True)", lambda: nn.LeakyReLU(0.1, inplace=True), (3, 4),
     ncet.UnsupportedOperatorError, "inplace", False),
    ("nn.Dropout(inplace=True)", lambda: nn.Dropout(0.5, inplace=True), (3, 4),
     ncet.UnsupportedOperatorError, "inplace", False),
    ("nn.BatchNorm1d(train)", lambda: bn(nn.BatchNorm1d, 4), (4,),
     ncet.SupportBoundaryError, "batch-norm-training", True),
    ("nn.BatchNorm2d(train)", lambda: bn(nn.BatchNorm2d, 2), (2, 3, 3),
     ncet.SupportBoundaryError, "batch-norm-training", True),
    ("nn.BatchNorm1d(track_running_stats=False)",
     lambda: nn.BatchNorm1d(4, track_running_stats=False).eval(), (4,),
     ncet.SupportBoundaryError, "batch-norm-no-running-stats", False),
    ("nn.BatchNorm2d(track_running_stats=False)",
     lambda: nn.BatchNorm2d(2, track_running_stats=False).eval(), (2, 3, 3),
     ncet.SupportBoundaryError, "batch-norm-no-running-stats", False),
    ("nn.LeakyReLU(1.5)", lambda: nn.LeakyReLU(1.5), (3, 4),
     ncet.SupportBoundaryError, "leaky-relu-slope", False),
    ("nn.LeakyReLU(-0.1)", lambda: nn.LeakyReLU(-0.1), (3, 4),
     ncet.SupportBoundaryError, "leaky-relu-slope", False),
    ("nn.LeakyReLU(nan)", lambda: nn.LeakyReLU(float("nan")), (3, 4),
     ncet.SupportBoundaryError, "leaky-relu-slope", False),
    ("nn.LeakyReLU(inf)", lambda: nn.LeakyReLU(float("inf")), (3, 4),
     ncet.SupportBoundaryError, "leaky-relu-slope", False),
    ("nn.Flatten(0)", lambda: nn.Flatten(0), (2, 3),
     ncet.SupportBoundaryError, "batch-axis", False),
    # Image layers on a per-sample rank-2 input: eager PyTorch would read the batch axis as
    # the channel axis of one unbatched image.
    ("nn.Conv2d(rank 3 batched)", lambda: nn.Conv2d(2, 3, 3), (2, 5),
     ncet.SupportBoundaryError, "rank", False),
    ("nn.MaxPool2d(rank 3 batched)", lambda: nn.MaxPool2d(2), (4, 4),
     ncet.SupportBoundaryError, "rank", False),
    ("nn.AvgPool2d(rank 3 batched)", lambda: nn.AvgPool2d(2), (4, 4),
     ncet.SupportBoundaryError, "rank", False),
    ("nn.AdaptiveAvgPool2d(rank 3 batched)", lambda: nn.AdaptiveAvgPool2d(2), (4, 4),
     ncet.SupportBoundaryError, "rank", False),
    ("nn.Sigmoid", lambda: nn.Sigmoid(), (3, 4),
     ncet.UnsupportedOperatorError, "unsupported-module", False),
    ("nn.Conv1d", lambda: nn.Conv1d(2, 3, 3), (2, 5),
     ncet.UnsupportedOperatorError, "unsupported-module", False),
]


def module_model(module, path="m", train=False, post=None):
    """The model holding `module` at `path`, in eval mode unless `train`."""
    model = At(path, module, post)
    return model.train() if train else model.eval()


@pytest.mark.parametrize(("factory", "shape", "cls", "code", "train"),
                         [row[1:] for row in REJECTED_MODULE_ROWS],
                         ids=[row[0] for row in REJECTED_MODULE_ROWS])
def test_module_rejected(factory, shape, cls, code, train):
    model = module_model(factory(), train=train)
    assert_rejected(model, [shape], cls, code, fx_module_node(model, "m"))


def test_max_pool_return_indices_rejected():
    model = module_model(nn.MaxPool2d(2, return_indices=True), "max_pool",
                         post=lambda pair: pair[0])
    assert_rejected(model, [(2, 4, 4)], ncet.SupportBoundaryError, "pool-return-indices",
                    fx_module_node(model, "max_pool"))


def test_eval_is_required_but_never_set():
    """A training-mode model is rejected, and NCET leaves it in training mode."""
    model = At("dropout", nn.Dropout(0.5))
    assert model.training
    with pytest.raises(ncet.UnsupportedOperatorError):
        ncet.convert(model, (3, 4))
    assert model.training and model.dropout.training
