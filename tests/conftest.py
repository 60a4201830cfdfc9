"""Shared test helpers: tiny model builders, the eager-oracle comparison, IR signatures."""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable

import pytest
import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

import ncet
from ncet.ir import OP_SCHEMAS

BATCH = 5
"""Batch size of the random inputs the IR and the eager model are compared on."""

BOUNDARY_OPS = ("Input", "Output")


# --- tiny models -----------------------------------------------------------------------------


class Fn(nn.Module):
    """A one-input model whose forward is `fn(self, x)`; keyword tensors become state.

    `nn.Parameter` values are registered as parameters, other tensors as buffers, so the
    function reaches them as `m.name` (FX records them as get_attr nodes).
    """

    def __init__(self, fn: Callable, **state: torch.Tensor):
        super().__init__()
        self.fn = fn
        for name, value in state.items():
            if isinstance(value, nn.Parameter):
                self.register_parameter(name, value)
            else:
                self.register_buffer(name, value)

    def forward(self, x):
        return self.fn(self, x)


class Fn2(Fn):
    """A two-input model whose forward is `fn(self, x, y)`."""

    def forward(self, x, y):
        return self.fn(self, x, y)


class At(nn.Module):
    """Holds `module` at the dotted `path` (e.g. "block.linear") and calls it on the input.

    `post`, if given, is applied to the module's result (e.g. `lambda y: y[0]`).
    """

    def __init__(self, path: str, module: nn.Module, post: Callable | None = None):
        super().__init__()
        parent: nn.Module = self
        *heads, last = path.split(".")
        for head in heads:
            child = nn.Module()
            parent.add_module(head, child)
            parent = child
        parent.add_module(last, module)
        self.path = path
        self.post = post

    def forward(self, x):
        y = self.get_submodule(self.path)(x)
        return y if self.post is None else self.post(y)


def seeded(*shape: int, seed: int = 0, positive: bool = False, nonzero: bool = False):
    """A fixed float32 tensor drawn from a local generator (never the global RNG)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g)
    if positive:
        return t.abs() + 0.5
    if nonzero:
        return torch.where(t.abs() < 0.25, t.sign() * 0.25 + t, t)
    return t


def reseed(module: nn.Module, seed: int = 0) -> nn.Module:
    """Refill a module's floating-point parameters and buffers from a local generator.

    Variances (`running_var`) stay positive. Returns the module, for chaining.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            if not tensor.is_floating_point():
                continue
            values = torch.randn(tensor.shape, generator=g)
            if name.endswith("running_var"):
                values = values.abs() + 0.5
            tensor.copy_(values)
    return module


# --- inspecting the IR -----------------------------------------------------------------------


def op_nodes(ir) -> list:
    """The operator nodes of `ir`: everything but Input and Output."""
    return [n for n in ir.nodes if n.op_type not in BOUNDARY_OPS]


def only_op(ir):
    """The single operator node of `ir` (asserts that there is exactly one)."""
    ops = op_nodes(ir)
    assert len(ops) == 1, f"expected one operator node, got {[n.op_type for n in ops]}\n{ir!r}"
    return ops[0]


def plain(value):
    """Tuples to lists, recursively, so attribute values compare regardless of sequence type."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def assert_attrs(node, expected: dict) -> None:
    """Each attribute named in `expected` has the expected value (sequence type ignored)."""
    for key, want in expected.items():
        assert key in node.attrs, f"{node!r} has no attribute {key!r}"
        got = plain(node.attrs[key])
        assert got == plain(want), f"{node!r}: attrs[{key!r}] is {got!r}, expected {want!r}"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


ATTR_KINDS: dict[str, Callable] = {
    "int": _is_int,
    "int?": lambda v: v is None or _is_int(v),
    "float": _is_real,
    "float?": lambda v: v is None or _is_real(v),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "ints": lambda v: isinstance(v, (list, tuple)) and all(_is_int(i) for i in v),
    "ints?": lambda v: isinstance(v, (list, tuple)) and all(i is None or _is_int(i) for i in v),
    "index": lambda v: v is not None,
}


def check_schema(ir) -> None:
    """Every attribute has its schema kind; constant attributes name lifted constants."""
    for n in ir.nodes:
        for key, kind in OP_SCHEMAS[n.op_type][1].items():
            value = n.attrs[key]
            assert not isinstance(value, torch.Tensor), f"{n!r}: tensor in attrs[{key!r}]"
            if kind in ("const", "const?"):
                assert (value is None and kind == "const?") or value in ir.constants, (
                    f"{n!r}: attrs[{key!r}] = {value!r} is not a constant name")
            else:
                assert ATTR_KINDS[kind](value), f"{n!r}: attrs[{key!r}] = {value!r} is no {kind}"


def ir_signature(ir) -> list:
    """`ir` up to names: per node op_type, input positions, shape, dtype and attributes.

    Constant-name attributes are replaced by the constant itself (dtype, shape, values), so
    two spellings that lift the same tensor under different names compare equal.
    """
    position = {n.name: i for i, n in enumerate(ir.nodes)}
    signature = []
    for n in ir.nodes:
        schema = OP_SCHEMAS[n.op_type][1]
        attrs = {}
        for key, value in sorted(n.attrs.items()):
            if schema.get(key) in ("const", "const?") and value is not None:
                t = ir.constants[value]
                value = ("constant", str(t.dtype), list(t.shape), t.tolist())
            attrs[key] = plain(value)
        signature.append((n.op_type, [position[i] for i in n.inputs],
                          plain(n.shape), n.dtype, attrs))
    return signature


# --- the eager oracle ------------------------------------------------------------------------


@contextlib.contextmanager
def model_unchanged(model: nn.Module):
    """Assert that the block leaves the model's state and training flags as they were."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    dtypes = {k: v.dtype for k, v in model.state_dict().items()}
    flags = [(name, m.training) for name, m in model.named_modules()]
    yield
    after = model.state_dict()
    assert sorted(after) == sorted(state), "NCET added or removed model state"
    for key, before in state.items():
        assert after[key].dtype == dtypes[key], f"NCET changed the dtype of {key}"
        assert _same(after[key], before), f"NCET changed the model's {key}"
    assert [(name, m.training) for name, m in model.named_modules()] == flags, (
        "NCET changed a training flag")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-level equality that also holds for meta tensors (no values) and sparse ones."""
    if a.device.type == "meta" or b.device.type == "meta":
        return (a.device, a.shape, a.dtype) == (b.device, b.shape, b.dtype)
    if a.layout != torch.strided or b.layout != torch.strided:
        return a.layout == b.layout and _same(a.to_dense(), b.to_dense())
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():  # bytes, so that NaN payloads and -0.0 compare as stored
        return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
    return torch.equal(a, b)


def batched_inputs(*shapes, seed: int = 0, batch: int = BATCH) -> list[torch.Tensor]:
    """Random float64 inputs with a leading batch axis, from a local generator."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn((batch, *shape), generator=g, dtype=torch.float64) for shape in shapes]


def as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def check_node_shapes(ir, model: nn.Module, inputs, dtype) -> None:
    """Each IR node named after an FX node has that node's per-sample shape and dtype.

    The reference is FX's ShapeProp on a copy of the model, run at the conversion dtype.
    """
    model = copy.deepcopy(model)
    if fx.Tracer().is_leaf_module(model, ""):  # a bare nn.Linear etc.: trace it as one call
        model = At("root", model)
    traced = fx_trace(model)
    with torch.no_grad():
        ShapeProp(traced).propagate(*[x.to(dtype) for x in inputs])
    metas = {n.name: n.meta.get("tensor_meta") for n in traced.graph.nodes}
    for node in ir.nodes[:-1]:
        meta = metas.get(node.name)
        if isinstance(meta, TensorMetadata):
            assert tuple(node.shape) == tuple(meta.shape[1:]), (
                f"{node!r}: FX per-sample shape is {tuple(meta.shape[1:])}")
            assert node.dtype == str(meta.dtype).removeprefix("torch."), (
                f"{node!r}: FX dtype is {meta.dtype}")


def convert_and_compare(model: nn.Module, *shapes, dtype=torch.float32):
    """Convert `model`, evaluate the IR in float64 and compare with the eager model in float64;
    `check_exactness` must find no violation (no false alarms on correct conversions).

    The caller's model is never mutated (checked). Also checks the Input/Output structure and
    that each output node's per-sample shape is the eager output's. Returns the GraphIR.
    """
    with model_unchanged(model):
        ir = ncet.convert(model, *shapes, dtype=dtype)
    assert [n.op_type for n in ir.inputs] == ["Input"] * len(shapes)
    assert list(ir.nodes[:len(shapes)]) == list(ir.inputs), "Input nodes must come first"
    assert [tuple(n.shape) for n in ir.inputs] == [tuple(s) for s in shapes]
    assert ir.nodes[-1].op_type == "Output"
    assert all(n.op_type != "Output" for n in ir.nodes[:-1]), "one Output node, last"
    check_schema(ir)

    inputs = batched_inputs(*shapes)
    check_node_shapes(ir, model, inputs, dtype)
    reference = copy.deepcopy(model).double()
    with torch.no_grad():
        want = reference(*inputs)
    got = ncet.evaluate(ir, *inputs)
    assert isinstance(got, tuple) == isinstance(want, (tuple, list)), (type(got), type(want))
    got, want = as_tuple(got), as_tuple(want)
    assert len(got) == len(want) == len(ir.outputs)
    for name, g, w in zip(ir.outputs, got, want, strict=True):
        assert g.dtype == torch.float64, f"evaluate returned {g.dtype}, expected float64"
        assert tuple(ir.node(name).shape) == tuple(w.shape[1:]), (
            f"IR shape of {name} is {ir.node(name).shape}, eager per-sample {tuple(w.shape[1:])}")
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    with model_unchanged(model):
        exactness = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert exactness.ok, f"false alarm on a correct conversion:\n{exactness!r}"
    return ir


def spec_row(spelling: str, fn: Callable, shapes, op_type: str, attrs: dict | None = None,
             **state: torch.Tensor):
    """One table row: a model `fn(m, *inputs)` with fixed `state`, built fresh for each test.

    The row is `(build, shapes, op_type, attrs)` with id `spelling`; `build()` returns an
    eval-mode `Fn` (one input) or `Fn2` (two inputs) with copies of the state tensors.
    """
    def build() -> nn.Module:
        cls = Fn2 if len(shapes) == 2 else Fn
        fresh = {k: nn.Parameter(v.detach().clone()) if isinstance(v, nn.Parameter)
                 else v.clone() for k, v in state.items()}
        return cls(fn, **fresh).eval()

    return pytest.param(build, list(shapes), op_type, attrs or {}, id=spelling)


def affine(kind: str, position: int, scalar=None, constant=None, **more) -> dict:
    """Expected ElementwiseAffine attributes (add `alpha=...` where the spelling has one)."""
    return {"kind": kind, "tensor_position": position, "scalar": scalar, "constant": constant,
            **more}


def param(*shape: int, seed: int = 0) -> nn.Parameter:
    """A fixed parameter drawn from a local generator."""
    return nn.Parameter(seeded(*shape, seed=seed))


# --- errors ----------------------------------------------------------------------------------


class BufferProxyTracer(fx.Tracer):
    """symbolic_trace, with buffers proxied like parameters.

    Then `c - x` on a buffer `c` is recorded as `operator.sub(c, x)`, as the spec's
    function table has it, rather than as the method call `c.sub(x)`.
    """

    proxy_buffer_attributes = True


def fx_trace(model: nn.Module) -> fx.GraphModule:
    """`model` traced by FX as the spec describes (see BufferProxyTracer)."""
    tracer = BufferProxyTracer()
    graph = tracer.trace(model)
    return fx.GraphModule(tracer.root, graph)


def fx_names(model: nn.Module) -> set[str]:
    """The FX node names of `model` (to check expected names in tables)."""
    return {n.name for n in fx_trace(model).graph.nodes}


def fx_op_of(model: nn.Module) -> str:
    """The `node.op` of the single call node FX records for `model`."""
    (op,) = [n.op for n in fx_trace(model).graph.nodes if n.op.startswith("call_")]
    return op


def fx_module_node(model: nn.Module, path: str) -> str:
    """The FX node name of the call to the submodule at `path`."""
    graph = fx_trace(model).graph
    (name,) = [n.name for n in graph.nodes if n.op == "call_module" and n.target == path]
    return name


def codes(code) -> set[str]:
    """A table cell holding one code or a set of acceptable codes, as a set."""
    return {code} if isinstance(code, str) else set(code)


def assert_rejected(model: nn.Module, shapes, cls, code, node) -> ncet.ConversionError:
    """`convert` raises `cls` with `code`, at FX node `node` (a name, or a set of names)."""
    with model_unchanged(model), pytest.raises(cls) as info:
        ncet.convert(model, *shapes)
    error = info.value
    assert error.code in codes(code), f"code {error.code!r}, expected {code!r}: {error}"
    assert error.node, f"error names no node: {error}"
    assert error.node in codes(node), f"node {error.node!r}, expected {node!r}: {error}"
    assert error.node in str(error), f"message does not name the node: {error}"
    assert error.spelling, f"error carries no spelling: {error}"
    assert re.search(r"\.py:\d+$", error.location), f"no source line: {error.location!r}"
    assert error.location in str(error), f"message does not name the source line: {error}"
    return error


# --- hypothesis profiles ---------------------------------------------------------------------
# "ci" (the default, and always when CI=true): derandomized, so every run tests the same
# examples and a failure reproduces; "dev" (HYPOTHESIS_PROFILE=dev): ten times the examples,
# freshly random each run, with the example database. Tests scale their max_examples from
# settings.default.max_examples (100 under "ci", 1000 under "dev").

import os  # noqa: E402

from hypothesis import HealthCheck, settings  # noqa: E402

_SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          print_blob=True, suppress_health_check=_SLOW_IS_FINE)
settings.register_profile("dev", max_examples=1000, deadline=None, print_blob=True,
                          suppress_health_check=_SLOW_IS_FINE)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true"
                      else os.environ.get("HYPOTHESIS_PROFILE", "ci"))
