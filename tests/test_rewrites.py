"""The opt-in rewrite rules (ncet/frontend/rewrites.py) on FX graphs: each rewritten graph
computes what the eager model computes, bit for bit, at two batch sizes; each refusal names
what would observe the in-place write."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ncet
from ncet.frontend.rewrites import (
    PRIVATE_MODULE,
    RULE_INPLACE,
    RULE_STATIC_BATCH,
    rewrite_graph,
)


def _rewrite(model: nn.Module):
    traced = torch.fx.symbolic_trace(copy.deepcopy(model))
    rewritten, refused = rewrite_graph(traced.graph, dict(traced.named_modules()))
    traced.graph.lint()  # a well-formed graph, every node's inputs before it
    for node in traced.graph.nodes:  # run NCET's private copies, as the frontend does
        if PRIVATE_MODULE in node.meta:
            traced.add_submodule(f"private_{node.name}", node.meta[PRIVATE_MODULE])
            node.target = f"private_{node.name}"
    traced.recompile()
    return traced, rewritten, refused


def _same_as_eager(model: nn.Module, traced: torch.fx.GraphModule, shape) -> None:
    for batch in (2, 3):
        x = torch.randn(batch, *shape, generator=torch.Generator().manual_seed(batch))
        assert torch.equal(traced(x.clone()), model(x.clone()))


class InplaceModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act = nn.Linear(4, 4), nn.ReLU(inplace=True)

    def forward(self, x):
        return self.fc(self.act(self.fc(x)))


class InplaceMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x).relu_()
        return y.add_(1.0).mul_(2.0)


class InplaceFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return F.leaky_relu(F.relu(self.fc(x), inplace=True), 0.1, True) + torch.relu_(self.fc(x))


class FlattenBySize(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)

    def forward(self, x):
        y = self.conv(x)
        a = y.view(y.size(0), -1)
        b = a.view((a.size()[0], -1))
        c = b.reshape(b.shape[0], 2, 16)
        return torch.reshape(c, (c.size(0), -1))


class SharedInplaceModule(nn.Module):
    """One nn.ReLU(True) called three times (as in a TRADES-style CNN)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.act = nn.Linear(4, 4), nn.Linear(4, 4), nn.ReLU(True)

    def forward(self, x):
        return self.act(self.fc2(self.act(self.fc1(self.act(self.fc1(x))))))


REWRITTEN = [
    # model, per-sample shape, {node: rule}
    (InplaceModule(), (4,), {"act": RULE_INPLACE}),
    (InplaceMethod(), (4,), {"relu_": RULE_INPLACE, "add_": RULE_INPLACE, "mul_": RULE_INPLACE}),
    (InplaceFunction(), (4,), {"relu": RULE_INPLACE, "leaky_relu": RULE_INPLACE,
                                "relu_": RULE_INPLACE}),
    (SharedInplaceModule(), (4,), {"act": RULE_INPLACE, "act_1": RULE_INPLACE,
                                   "act_2": RULE_INPLACE}),
    (FlattenBySize(), (1, 6, 6), {"view": RULE_STATIC_BATCH, "view_1": RULE_STATIC_BATCH,
                                  "reshape": RULE_STATIC_BATCH,
                                  "reshape_1": RULE_STATIC_BATCH}),
]


@pytest.mark.parametrize("model, shape, rules", REWRITTEN,
                         ids=[type(m).__name__ for m, _, _ in REWRITTEN])
def test_rewritten_graphs_compute_what_the_model_computes(model, shape, rules):
    model.eval()
    traced, rewritten, refused = _rewrite(model)
    assert not refused
    assert {name: r.rule for name, r in rewritten.items()} == rules
    _same_as_eager(model, traced, shape)
    for node in traced.graph.nodes:  # nothing in place, no size left
        assert not (node.op == "call_method" and str(node.target).endswith("_"))
        assert node.kwargs.get("inplace") in (None, False)
        assert not (node.op == "call_method" and node.target == "size")


class ReadThroughFlatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        v = torch.flatten(y, 1)  # may be a view of y
        y.relu_()
        return v + 1


class ReadAfter(nn.Module):
    def forward(self, x):
        y = x * 2
        z = y.relu_()
        return z + y  # y is read after its overwrite (eager sees relu(y) twice)


class ReadThroughView(nn.Module):
    def forward(self, x):
        y = x * 2
        v = y.view(-1)
        y.relu_()
        return v.sum() + y.sum()


class WritesInput(nn.Module):
    def forward(self, x):
        return x.relu_()


class WritesParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x + self.w.view(1, 4).mul_(2.0)


class SizeUsedArithmetically(nn.Module):
    def forward(self, x):
        return x.view(x.size(0) * 2, -1)


class TwoInferredSizes(nn.Module):
    def forward(self, x):  # view(-1, 2, -1) would infer two sizes: not static
        return x.view(x.size(0), 2, -1)


REFUSED = [
    (ReadAfter(), "relu_", "which node 'add' reads afterwards"),
    (ReadThroughView(), "relu_", "through 'view', which shares its memory"),
    (ReadThroughFlatten(), "relu_", "through 'flatten', which shares its memory"),
    (WritesInput(), "relu_", "the graph input 'x'"),
    (WritesParameter(), "mul_", "the parameter or buffer 'w'"),
]


@pytest.mark.parametrize("model, node, reason", REFUSED,
                         ids=[type(m).__name__ for m, _, _ in REFUSED])
def test_inplace_ops_that_could_be_observed_are_refused(model, node, reason):
    traced, rewritten, refused = _rewrite(model)
    assert node in refused and reason in refused[node].reason
    assert node not in rewritten
    assert any(n.name == node and n.target == node for n in traced.graph.nodes)


@pytest.mark.parametrize("model", [SizeUsedArithmetically(), TwoInferredSizes()],
                         ids=["arithmetic", "two-inferred"])
def test_a_size_used_other_than_as_the_batch_slot_is_left_alone(model):
    traced, rewritten, _ = _rewrite(model)
    assert not rewritten
    assert [n.target for n in traced.graph.nodes if n.op == "call_method"] == ["size", "view"]


def test_the_users_model_is_not_changed():
    model = InplaceModule()
    traced = torch.fx.symbolic_trace(model)  # shares the model's submodules
    rewrite_graph(traced.graph, dict(traced.named_modules()))
    assert model.act.inplace is True and traced.act is model.act
    private = next(n.meta[PRIVATE_MODULE] for n in traced.graph.nodes if n.name == "act")
    assert private is not model.act and private.inplace is False


# --- through convert and diagnose ---------------------------------------------------------------
class TorchvisionStyle(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.relu = nn.Conv2d(1, 2, 3), nn.ReLU(inplace=True)
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        out = self.relu(self.conv(x))
        return self.fc(out.view(out.size(0), -1))


def test_by_default_the_rejections_name_rewrite_true_where_it_applies():
    report = ncet.diagnose(TorchvisionStyle().eval(), (1, 6, 6))
    assert [(r.fx_name, r.code) for r in report.errors] == [
        ("relu", "inplace"), ("size", "unsupported-method"), ("view", "dynamic-argument")]
    for row in report.errors:
        assert "rewrite=True" in row.hint, row.hint
    assert all(not row.rewrite for row in report.rows)


def test_with_rewrite_true_the_model_converts_and_each_rewritten_row_names_its_rule():
    model = TorchvisionStyle().eval()
    report = ncet.diagnose(model, (1, 6, 6), rewrite=True)
    assert report.ok
    rules = {r.fx_name: r.rewrite for r in report.rows if r.rewrite}
    assert set(rules) == {"relu", "view"}
    assert rules["relu"].startswith(f"{RULE_INPLACE}: nn.ReLU(inplace=True), safe because")
    assert rules["view"].startswith(f"{RULE_STATIC_BATCH}: Tensor.view(relu.size(0), -1)")
    assert [n.op_type for n in report.graph.nodes] == [
        "Input", "Conv2d", "ReLU", "Flatten", "Linear", "Output"]
    assert model.relu.inplace is True  # the user's module is as it was
    assert ncet.check_exactness(model, report.graph).ok


def test_with_rewrite_true_a_refused_inplace_op_names_its_later_reader():
    report = ncet.diagnose(ReadAfter(), (4,), rewrite=True)
    (error,) = report.errors
    assert error.code == "inplace" and "which node 'add' reads afterwards" in error.message
    default = ncet.diagnose(ReadAfter(), (4,))
    assert "rewrite=True cannot make it out of place" in default.errors[0].message


def test_rewrite_must_be_a_bool():
    with pytest.raises(TypeError, match="rewrite must be True or False"):
        ncet.convert(TorchvisionStyle(), (1, 6, 6), rewrite="yes")


class DefaultedFlags(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, init_lambda=False, mask=None, scale=2.0):
        if init_lambda:
            x = x * 0
        if mask is not None:
            x = x * mask
        return self.fc(x) * scale


def test_forward_parameters_with_defaults_are_bound_to_them():
    model = DefaultedFlags().eval()
    ir = ncet.convert(model, (4,))
    assert [n.op_type for n in ir.nodes] == ["Input", "Linear", "ElementwiseAffine", "Output"]
    assert ncet.check_exactness(model, ir).ok  # against model(x), the defaults in force
    x = torch.randn(3, 4)
    assert torch.allclose(ncet.evaluate(ir, x).float(), model(x), atol=1e-6)


def test_the_command_line_and_the_workbench_take_rewrite(tmp_path, monkeypatch):
    from ncet.cli import main

    (tmp_path / "tv_nets.py").write_text(
        "from torch import nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc, self.relu = nn.Linear(4, 4), nn.ReLU(inplace=True)\n"
        "    def forward(self, x):\n"
        "        return self.relu(self.fc(x))\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    assert main(["inspect", "tv_nets.py:Net", "--input-shape", "4", "--eval"]) == 1
    assert main(["inspect", "tv_nets.py:Net", "--input-shape", "4", "--eval",
                 "--rewrite"]) == 0
    from ncet import widgets

    bench = widgets.Workbench(TorchvisionStyle().eval(), (1, 6, 6), rewrite=True)
    assert bench.report.ok
    __import__("sys").modules.pop("tv_nets", None)



# --- found by review: a rule whose premise fails for one node is refused there -----------------
class ReadsWhatItOverwrites(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        return h.add_(h[:, :1])


class PromotesInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("b", torch.ones(4, dtype=torch.float64))

    def forward(self, x):
        return self.fc(x).add_(self.b)  # stays float32 in place; x + b would be float64


class BroadcastsInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.fc2 = nn.Linear(4, 1), nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x).add_(self.fc2(x))  # fails eagerly: cannot broadcast into (N, 1)


class ViewsNonContiguous(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)

    def forward(self, x):
        y = self.conv(x).permute(0, 2, 3, 1)
        return y.view(y.size(0), -1)  # fails eagerly: flatten(1) would not


class OneDimensionalView(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)[:, 0]
        return y.view(y.size(0), -1)  # (N, 1): flatten(1) would fail


PREMISE_FAILS = [
    (ReadsWhatItOverwrites(), (4,), "inplace", "shares its memory"),
    (PromotesInPlace(), (4,), "inplace", "as written it gives torch.float32"),
    (BroadcastsInPlace(), (4,), "inplace", "as written it fails on the example inputs"),
    (ViewsNonContiguous(), (1, 6, 6), "dynamic-argument", "as written it fails"),
    (OneDimensionalView(), (4,), "rank", "which rewrite=True made Tensor.flatten"),
]


@pytest.mark.parametrize("model, shape, code, reason", PREMISE_FAILS,
                         ids=[type(m).__name__ for m, *_ in PREMISE_FAILS])
def test_a_rewrite_whose_premise_fails_for_the_node_is_refused(model, shape, code, reason):
    report = ncet.diagnose(model.eval(), shape, rewrite=True)
    assert not report.ok
    assert any(e.code == code and reason in e.message for e in report.errors), [
        (e.code, e.message) for e in report.errors]


class StatefulDefault(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, state=torch.zeros(4)):  # noqa: B008 (the point of the test)
        state.add_(1.0)
        return self.fc(x) + state


def test_a_mutable_default_is_not_bound_and_not_changed():
    model = StatefulDefault()
    default = StatefulDefault.forward.__defaults__[0]
    before = default.clone()
    report = ncet.diagnose(model, (4,))
    assert [e.code for e in report.errors] == ["input-count"]
    assert torch.equal(default, before)


def test_default_hints_for_many_inplace_nodes_take_linear_time():
    """The hint's alias analysis reuses one node order (found by review: it was rebuilt
    per rejected node); 400 in-place ReLUs all get the hint."""
    layers = []
    for _ in range(200):
        layers += [nn.Linear(4, 4), nn.ReLU(inplace=True)]
    report = ncet.diagnose(nn.Sequential(*layers).eval(), (4,))
    assert len(report.errors) == 200
    assert all("rewrite=True" in e.hint for e in report.errors)


def test_a_model_that_cannot_be_traced_has_one_row_named_trace():
    """Found by review: the row lost its fx_op "trace" when rows took a Source."""
    from ncet.cli.records import row_record

    report = ncet.diagnose(DefaultedFlags(), (4,), (4,))  # the flag is a traced tensor
    (row,) = report.rows
    assert (row.fx_op, row.status) == ("trace", "unsupported")
    assert report.to_pandas().fx_op.tolist() == ["trace"]
    assert row_record(row)["fx_op"] == "trace"


class IsinstanceBranch(nn.Module):
    """COLT-style: a branch on isinstance(x, torch.Tensor), which FX's Proxy fails."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if isinstance(x, torch.Tensor):
            return self.fc(x)
        return x.linear_forward(self.fc)


HINTS = [
    # model, per-sample shape, code, what the hint must say
    (IsinstanceBranch(), (4,), "not-a-tensor-method", "isinstance(x, torch.Tensor)"),
    (nn.Sequential(nn.Linear(4, 4), nn.ReLU6()), (4,), "unsupported-module",
     "write F.relu(x) - F.relu(x - 6.0)"),
    (nn.Sequential(nn.Linear(4, 4), nn.Sigmoid()), (4,), "unsupported-module",
     "not piecewise-linear (nn.Sigmoid)"),
    (nn.Sequential(nn.ZeroPad2d(1), nn.Conv2d(1, 1, 3)), (1, 4, 4), "unsupported-module",
     "give that Conv2d the padding itself"),
    (SizeUsedArithmetically(), (4,), "unsupported-method", "use a Python constant"),
]


@pytest.mark.parametrize("model, shape, code, hint", HINTS,
                         ids=["isinstance", "relu6", "sigmoid", "zeropad", "size-arithmetic"])
def test_hints_say_what_to_change(model, shape, code, hint):
    report = ncet.diagnose(model.eval(), shape)
    assert any(e.code == code and hint in e.hint for e in report.errors), [
        (e.code, e.hint) for e in report.errors]


def test_a_shape_with_the_batch_axis_is_told_to_drop_it():
    report = ncet.diagnose(nn.Sequential(nn.Conv2d(3, 4, 3)), (1, 3, 8, 8))
    (error,) = report.errors
    assert error.code == "rank" and "includes the batch axis, drop it" in error.hint


def test_a_sequential_child_is_located_by_its_index():
    """nn.Sequential's children have no line of the user's: the message names the module as
    Python reaches it from the model."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Sigmoid()))
    (row,) = ncet.diagnose(model, (4,)).errors
    assert row.error.location == "model[1][1]"
    assert "(call_module nn.Sigmoid, model[1][1])" in row.message


class TupleDefault(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, t=(1, 2)):
        return self.fc(x) * t[1]


def test_a_tuple_default_is_not_bound():
    """Found by review: FX's pytree code generator flattened the output for a tuple default,
    so the IR returned a 1-tuple where the model returns a tensor."""
    report = ncet.diagnose(TupleDefault(), (4,))
    assert [e.code for e in report.errors] == ["input-count"]


class FactoryOverwritten(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        z = torch.zeros((x.size(0), 4))
        z2 = z.add_(self.fc(x))
        return z + z2


def test_memory_a_factory_made_is_owned_by_it():
    """Found by review: a node with no tensor inputs (torch.zeros) owned no memory, so the
    later reader of what add_ overwrote went unseen."""
    from ncet.frontend.aliasing import overwrite_observer

    traced = torch.fx.symbolic_trace(FactoryOverwritten())
    order = {n: i for i, n in enumerate(traced.graph.nodes)}
    add_ = next(n for n in traced.graph.nodes if n.target == "add_")
    assert "which node 'add' reads afterwards" in overwrite_observer(
        add_, order, dict(traced.named_modules()))


def test_a_handler_rejection_of_a_rewritten_node_keeps_its_own_code():
    """Found by review: a training-mode dropout made out of place was reported as 'inplace'."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5, inplace=True)).train()
    codes = [e.code for e in ncet.diagnose(model, (4,), rewrite=True).errors]
    assert codes == ["dropout-training"]


MODULE_EXPRESSIONS = [
    # model, where its (rejected) Sigmoid is, as Python reaches it
    (nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Sigmoid())), "model[1][1]"),
    (nn.Sequential(__import__("collections").OrderedDict(
        [("lin", nn.Linear(4, 4)), ("act-1", nn.Sigmoid())])), "model[1]"),
    (nn.Sigmoid(), "model"),
]


@pytest.mark.parametrize("model, where", MODULE_EXPRESSIONS, ids=["nested", "named", "leaf"])
def test_a_module_without_a_line_is_located_by_the_path_python_takes(model, where):
    (row,) = ncet.diagnose(model, (4,)).errors
    assert row.error.location == where


class MethodOnASize(nn.Module):
    def forward(self, x):
        return x * x.size().count(4)


def test_a_method_called_on_a_size_is_not_called_a_missing_tensor_method():
    codes = {e.fx_name: e.code for e in ncet.diagnose(MethodOnASize(), (4,)).errors}
    assert codes.get("count") == "unsupported-method", codes
