"""Hostile files (issue 21): load bounds what a file implies before the meaning check allocates
or runs anything, never raises anything but GraphIRFormatError, and checks meaning strictly.

The files of findings 2 and 5 are built in tests/hostile_files.py, which also measures them
(`python -m tests.hostile_files` prints the table); tests/test_io.py holds the format rows.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import ncet
import ncet.format.consistency
from ncet.cli import main
from ncet.errors import GraphIRFormatError
from ncet.evaluate import EVALUATORS
from ncet.examples import EXAMPLES, load_example
from ncet.format.budget import COST_RULES, MEMORY_FLOOR, budget_for, estimate
from ncet.ir import GraphIR, IRNode, Source
from tests.hostile_files import (
    HOSTILE_FILES,
    MIB,
    constant,
    measure,
    node,
    output,
    pack,
    pooling,
    relu_on_input,
    warm_up_file,
    write,
)
from tests.test_io import edit, node_of, split

REFUSED = [h for h in HOSTILE_FILES if h.refusal is not None]


def _never_run(ir, batch):
    raise AssertionError("the meaning check ran a graph it should have refused first")


# --- Bounded load (finding 2) and no raw exceptions (finding 5) --------------------------------


@pytest.mark.parametrize("hostile", REFUSED, ids=[h.name for h in REFUSED])
def test_hostile_file_is_refused_before_the_check_runs(hostile, tmp_path, monkeypatch):
    path = write(hostile, tmp_path)
    monkeypatch.setattr(ncet.format.consistency, "_run", _never_run)
    with pytest.raises(GraphIRFormatError, match=re.escape(repr(str(path)))) as info:
        ncet.load(path)
    assert hostile.refusal in str(info.value)
    if "limit" in str(info.value):  # names the limit, what the file implies and the fix
        assert re.search(r"would (hold up to|take about) \S+", str(info.value))
        assert re.search(r"ncet\.load\(path, max_check_(bytes|work)=\d+\)", str(info.value))


@pytest.mark.parametrize("hostile", [h for h in HOSTILE_FILES if h.refusal is None],
                         ids=lambda h: h.name)
def test_large_but_honest_files_load(hostile, tmp_path):
    ir = ncet.load(write(hostile, tmp_path))
    assert ir.nodes[-1].op_type == "Output"


@pytest.mark.parametrize("hostile", REFUSED, ids=[h.name for h in REFUSED])
def test_show_refuses_hostile_files_in_one_line(hostile, tmp_path, capsys):
    path = write(hostile, tmp_path)
    assert main(["show", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ncet show: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_hostile_files_cost_a_small_multiple_of_their_size(tmp_path):
    """Measured in a fresh process: every file costs at most 8x its size + 64 MiB of resident
    memory, a refused one before the check runs; a file that loads costs its size (its
    constants, read once), the parsed header (about 7x the header) and the check."""
    paths = [warm_up_file(tmp_path)] + [write(h, tmp_path) for h in HOSTILE_FILES]
    results = {m.name: m for m in measure(paths)}
    assert len(results) == len(HOSTILE_FILES), results
    for hostile in HOSTILE_FILES:
        m = results[hostile.name]
        assert m.peak <= 8 * m.size + 64 * MIB, m
        if hostile.refusal is not None:
            assert m.outcome == "refused" and hostile.refusal in m.message, m
        else:
            assert m.outcome == "loaded", m
        if hostile.sparse_tail:  # one copy of the data: no second buffer, no float64 copy
            assert m.peak <= m.size + 64 * MIB, m


# --- The limits ---------------------------------------------------------------------------------


def _limit_in(message: str, name: str) -> int:
    return int(re.search(rf"{name}=(\d+)\)", message).group(1))


def test_the_memory_limit_says_how_to_raise_it_and_raising_it_works(tmp_path):
    path = tmp_path / "wide.ncet"
    path.write_bytes(relu_on_input([2**24]))  # 2 x 16 Mi float64 values per node at batch 2
    with pytest.raises(GraphIRFormatError, match="memory limit") as info:
        ncet.load(path)
    needed = _limit_in(str(info.value), "max_check_bytes")
    assert needed >= 2 * 2 * 2**24 * 8  # two nodes at batch size 2, in float64
    with pytest.raises(GraphIRFormatError, match="max_check_bytes allows"):
        ncet.load(path, max_check_bytes=needed - 1)
    assert ncet.load(path, max_check_bytes=needed).inputs[0].shape == (2**24,)


def test_the_work_limit_says_how_to_raise_it_and_raising_it_works(tmp_path):
    path = tmp_path / "pool.ncet"
    path.write_bytes(pooling(64, 40))
    with pytest.raises(GraphIRFormatError, match="work limit") as info:
        ncet.load(path, max_check_work=10**5)
    needed = _limit_in(str(info.value), "max_check_work")
    window, out = 40 * 40, (64 - 40 + 1) ** 2
    assert needed >= (1 + 2) * out * window  # every window visited, at batch sizes 1 and 2
    ncet.load(path, max_check_work=needed)


@pytest.mark.parametrize("value, error", [("1", TypeError), (True, TypeError), (1.5, TypeError),
                                          (0, ValueError), (-1, ValueError)])
@pytest.mark.parametrize("name", ["max_check_bytes", "max_check_work"])
def test_limits_are_positive_ints(name, value, error, tmp_path):
    path = tmp_path / "g.ncet"
    path.write_bytes(relu_on_input([4]))
    with pytest.raises(error, match=name):
        ncet.load(path, **{name: value})


def test_verify_false_neither_checks_nor_allocates(tmp_path, monkeypatch):
    path = tmp_path / "huge.ncet"
    path.write_bytes(relu_on_input([2**40]))
    monkeypatch.setattr(ncet.format.consistency, "_run", _never_run)
    assert ncet.load(path, verify=False).inputs[0].shape == (2**40,)


def test_every_bundled_model_loads_with_the_default_limits(tmp_path):
    for name, example in EXAMPLES.items():
        if example.converts:
            model, shapes = load_example(name)
            ncet.save(ncet.convert(model, *shapes), tmp_path / f"{name}.ncet")
            assert ncet.load(tmp_path / f"{name}.ncet").nodes, name


def test_the_default_memory_limit_is_a_floor_plus_a_multiple_of_the_size():
    small, large = budget_for(1_000), budget_for(10**6)
    assert small.bytes == MEMORY_FLOOR + 16 * 1_000 and large.bytes - small.bytes == 16 * 999_000
    assert budget_for(10**12).bytes == 4 * 2**30  # the cap
    assert budget_for(10**12, max_check_bytes=2**40).bytes == 2**40  # raised by the caller


# --- The cost rules bound what PyTorch computes -------------------------------------------------


def _src(name):
    return Source(name, "call_module", name)


def _op(op_type, attrs, constants=None, rank=3, inputs=1):
    """One op node on `inputs` Input nodes; its declared shape is a placeholder."""
    return IRNode("op", op_type, ("x",) * inputs, attrs, (), "float64", _src("op")), constants or {}


_POOL = {"kernel_size": [3, 2], "stride": [2, 3], "padding": [1, 1], "ceil_mode": True}
COSTED = [  # op node, input per-sample shape(s), what varies
    ("conv-uneven-padding", _op("Conv2d", {
        "weight": "w", "bias": None, "stride": [2, 1], "padding": [3, 0, 1, 2],
        "dilation": [1, 2], "groups": 2, "padding_mode": "reflect"},
        {"w": torch.zeros(4, 2, 3, 3)}), [(4, 9, 8)]),
    ("conv-zeros", _op("Conv2d", {
        "weight": "w", "bias": "b", "stride": [1, 1], "padding": [2, 2, 2, 2],
        "dilation": [2, 1], "groups": 1, "padding_mode": "zeros"},
        {"w": torch.zeros(3, 4, 2, 5), "b": torch.zeros(3)}), [(4, 6, 7)]),
    ("max-pool-ceil-dilated", _op("MaxPool2d", {**_POOL, "dilation": [2, 1]}), [(2, 11, 9)]),
    ("avg-pool-ceil", _op("AvgPool2d", {**_POOL, "count_include_pad": False,
                                        "divisor_override": None}), [(2, 10, 13)]),
    ("adaptive-pool-up", _op("AdaptiveAvgPool2d", {"output_size": [7, 5]}), [(2, 3, 4)]),
    ("adaptive-pool-down", _op("AdaptiveAvgPool2d", {"output_size": [2, 3]}), [(2, 9, 7)]),
    ("linear-rank-3", _op("Linear", {"weight": "w", "bias": None}, {"w": torch.zeros(5, 4)}),
     [(3, 2, 4)]),
    ("affine-broadcast", _op("ElementwiseAffine", {
        "kind": "mul", "tensor_position": 0, "scalar": None, "constant": "c", "alpha": 1.0},
        {"c": torch.zeros(1, 5, 1, 3)}), [(1, 4, 1)]),
    ("add-broadcast", _op("Add", {"alpha": 1.0}, inputs=2), [(4, 1), (1, 6)]),
    ("concat", _op("Concat", {"axis": 1}, inputs=2), [(2, 3), (2, 5)]),
]


@pytest.mark.parametrize("node, constants, shapes", [row[1] + (row[2],) for row in COSTED],
                         ids=[row[0] for row in COSTED])
@pytest.mark.parametrize("batch", [1, 2])
def test_cost_rules_bound_what_pytorch_computes(node, constants, shapes, batch):
    xs = [torch.zeros(batch, *s, dtype=torch.float64) for s in shapes]
    if node.op_type == "Add":
        node = dataclasses.replace(node, inputs=("x", "y"))
    consts = {k: t.double() for k, t in constants.items()}
    with FlopCounterMode(display=False) as flops:
        result = EVALUATORS[node.op_type](node, xs, consts)
    cost = COST_RULES[node.op_type](node, [tuple(x.shape) for x in xs],
                                    {k: tuple(t.shape) for k, t in constants.items()})
    assert result.numel() <= cost.out
    assert flops.get_total_flops() // 2 <= cost.work  # PyTorch counts a multiply-add as 2
    if node.op_type in ("Conv2d", "Linear"):
        assert flops.get_total_flops() > 0


def _recording(rule, held: dict[int, int]):
    """An evaluator rule that adds the bytes of each result to `held`, per batch size."""
    def run(node, xs, c):
        value = rule(node, xs, c)
        held[xs[0].shape[0]] = held.get(xs[0].shape[0], 0) + value.nbytes
        return value
    return run


def test_the_estimate_covers_every_value_of_both_runs(monkeypatch):
    """Record what the check's runs really hold (every result at batch sizes 1 and 2) and
    compare with the estimate, on the bundled models."""
    for name, example in EXAMPLES.items():
        if not example.converts:
            continue
        ir, held = ncet.convert(*_example(name)), {}
        monkeypatch.setattr(ncet.format.consistency, "EVALUATORS",
                            {k: _recording(v, held) for k, v in EVALUATORS.items()})
        ncet.format.consistency.check_consistency(ir)
        cost = estimate(ir, ncet.format.consistency.BATCH_SIZES)
        inputs = sum(math.prod(n.shape) for n in ir.inputs) * 8
        assert sorted(held) == [1, 2] and max(held[b] + b * inputs for b in held) <= cost.bytes


def _example(name):
    model, shapes = load_example(name)
    return (model, *shapes)


# --- Strict meaning (finding 7) -----------------------------------------------------------------


class Zoo(nn.Module):
    """The op_types whose attributes have rules beyond their kind, each once."""

    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.linspace(-1, 1, 4, dtype=torch.float64))
        self.pool = nn.AvgPool2d(2)

    def forward(self, x):  # per sample (3, 4)
        mixed = torch.cat([x * 0.5, x / 4.0], dim=1)
        swapped = mixed.transpose(1, 2).permute(0, 2, 1)
        added = F.leaky_relu(swapped, 0.1) + swapped
        pooled = self.pool(added.reshape(-1, 1, 6, 4))
        return (added[:, 1:5, 0], swapped.mean(dim=2, keepdim=True), added[:, 2, 3],
                x - self.shift, torch.add(x, x.reshape(-1, 3, 4)), pooled.flatten(1))


@pytest.fixture(scope="module")
def zoo_file(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("strict") / "zoo.ncet"
    ncet.save(ncet.convert(Zoo(), (3, 4)), path)
    return path.read_bytes()


def named(h: dict, name: str) -> dict:
    return next(n for n in h["nodes"] if n["name"] == name)


def attrs(name: str, **values):
    return edit(lambda h: named(h, name)["attrs"].update(values))


def declared(name: str, **fields):
    return edit(lambda h: named(h, name).update(fields))


def _constant_shape(shape):
    def change(h):
        h["constants"][0]["shape"] = shape
        named(h, "sub")["shape"] = [1, 3, 4]
    return edit(change)


def _ranks_differ(h):
    named(h, "reshape_1")["attrs"]["shape"] = named(h, "reshape_1")["shape"] = [1, 3, 4]


STRICT = [  # one row per gap of finding 7 and per rule of ncet.ir.ATTR_RULES and NODE_RULES
    ("affine-kind-banana", attrs("sub", kind="banana"),
     "attribute kind='banana' (kind 'str') must be one of ('add', 'sub', 'mul', 'div')"),
    ("affine-tensor-position-7", attrs("sub", tensor_position=7),
     "attribute tensor_position=7 (kind 'int') must be one of (0, 1)"),
    ("output-two-inputs-tuple-false", edit(lambda h: node_of(h, "Output")["attrs"].update(
        tuple=False)), "it returns 6 values with tuple false"),
    ("affine-scalar-and-constant", attrs("sub", scalar=2.0), "exactly one of scalar and constant"),
    ("affine-neither", attrs("mul", scalar=None), "exactly one of scalar and constant"),
    ("affine-mul-position-1", attrs("mul", tensor_position=1),
     "kind 'mul' takes tensor_position 0 and alpha 1"),
    ("affine-div-alpha", attrs("truediv", alpha=2.0), "kind 'div' takes tensor_position 0"),
    ("affine-add-alpha-1-swapped", attrs("sub", kind="add", tensor_position=1),
     "add with alpha 1 is stored with tensor_position 0"),
    ("affine-divide-by-zero", attrs("truediv", scalar=0.0), "the divisor is zero"),
    ("leaky-slope-above-1", attrs("leaky_relu", negative_slope=1.5),
     "must be a number strictly between 0 and 1"),
    ("leaky-slope-0", attrs("leaky_relu", negative_slope=0), "strictly between 0 and 1"),
    ("concat-negative-axis", attrs("cat", axis=-1), "attribute axis=-1 (kind 'int') must be "
                                                    "an int >= 0"),
    ("concat-axis-past-rank", attrs("cat", axis=2), "axis 2 is out of range for per-sample rank 2"),
    ("transpose-negative-dim", attrs("transpose", dim0=-1), "dim0=-1 (kind 'int') must be"),
    ("transpose-dims-reversed", attrs("transpose", dim0=1, dim1=0), "dim0 1 comes after dim1 0"),
    ("transpose-dim-past-rank", attrs("transpose", dim1=2), "dim1 2 is out of range"),
    ("permute-repeats-an-axis", attrs("permute", perm=[0, 0]), "the axes 0..n-1 in some order"),
    ("permute-wrong-length", attrs("permute", perm=[0, 1, 2]), "does not have one entry per axis"),
    ("mean-negative-axis", attrs("mean", axes=[-1]), "strictly increasing list of axes >= 0"),
    ("mean-no-axes", attrs("mean", axes=[]), "a non-empty, strictly increasing list"),
    ("mean-axes-unsorted", attrs("mean", axes=[1, 0]), "strictly increasing"),
    ("mean-axis-past-rank", attrs("mean", axes=[2]), "axes [2] is out of range"),
    ("slice-stop-past-the-end", attrs("getitem", index=[[1, 9, 1], 0]),
     "index entry [1, 9, 1] is out of range for axis 0 of size 6"),
    ("slice-negative-start", attrs("getitem", index=[[-1, 5, 1], 0]), "0 <= start <= stop"),
    ("slice-step-zero", attrs("getitem", index=[[1, 5, 0], 0]), "step >= 1"),
    ("slice-of-ints-only", attrs("getitem", index=[1, 0]), "an index of ints only is a GetItem"),
    ("slice-too-many-axes", attrs("getitem", index=[[0, 1, 1], 0, 0]),
     "selects from more axes than the input's 2"),
    ("getitem-out-of-range", attrs("getitem_1", index=[2, 4]),
     "index entry 4 is out of range for axis 1 of size 4"),
    ("getitem-with-a-slice", attrs("getitem_1", index=[2, [0, 1, 1]]),
     "a GetItem index is a non-empty list of ints"),
    ("reshape-negative-size", attrs("reshape", shape=[-1, 4]), "must be a list of ints >= 0"),
    ("add-ranks-differ", edit(_ranks_differ), "its inputs have per-sample ranks [2, 3]"),
    ("pool-stride-zero", attrs("pool", stride=[0, 2]), "must be a list of 2 ints >= 1"),
    ("pool-three-paddings", attrs("pool", padding=[0, 0, 0]), "a list of 2 ints >= 0"),
    ("pool-divisor-zero", attrs("pool", divisor_override=0), "must be anything but 0"),
    ("flatten-negative-start", attrs("flatten", start_dim=-1), "start_dim=-1 (kind 'int')"),
    ("output-declares-a-dtype", edit(lambda h: node_of(h, "Output").update(dtype="float32")),
     "dtype 'float32' must be empty for Output"),
    # dtypes: PyTorch's promotion (x - a float64 buffer is float64) and no contradiction
    ("dtype-promotion-denied", declared("sub", dtype="float32"),
     "declares dtype float32 but computes float64 from input 'x' float32, constant 'shift' "
     "float64"),
    ("dtype-contradicts-input", declared("mean", dtype="float64"),
     "declares dtype float64 but computes float32 from input 'permute' float32"),
    # batch mixing: at batch size 1 a constant broadcasts like a sample, at 2 it does not
    ("constant-broadcasts-over-the-batch", _constant_shape([1, 1, 1, 4]),
     "computes a tensor of shape [1, 2, 3, 4], whose leading size is not the batch size"),
]


@pytest.mark.parametrize("make, message", [row[1:] for row in STRICT],
                         ids=[row[0] for row in STRICT])
def test_file_that_breaks_a_rule_is_rejected(make, message, zoo_file, tmp_path):
    path = tmp_path / "strict.ncet"
    path.write_bytes(make(*split(zoo_file)))
    with pytest.raises(GraphIRFormatError, match=r"strict\.ncet'.*node '") as info:
        ncet.load(path)
    assert message in str(info.value)
    ncet.load(path, verify=False)  # well-formed: only the meaning is wrong


def test_strict_table_has_unique_ids():
    assert len({row[0] for row in STRICT}) == len(STRICT)


def test_the_zoo_loads_and_evaluates_like_the_model(zoo_file, tmp_path):
    path = tmp_path / "zoo.ncet"
    path.write_bytes(zoo_file)
    x = torch.randn(5, 3, 4, dtype=torch.float64)
    with torch.no_grad():
        expected = Zoo().double()(x)
    for got, want in zip(ncet.evaluate(ncet.load(path), x), expected):
        assert got.shape == want.shape and torch.allclose(got, want)


def test_a_batch_axis_mismatch_says_what_differs(tmp_path):
    """Shapes that print alike per sample ([] and []) differ in the batch axis: say so."""
    nodes = (IRNode("x", "Input", (), {"index": 0}, (), "float32", _src("x")),
             IRNode("mul", "ElementwiseAffine", ("x",), {
                 "kind": "mul", "tensor_position": 0, "scalar": None, "constant": "c",
                 "alpha": 1.0}, (), "float32", _src("mul")),
             IRNode("output", "Output", ("mul",), {"tuple": False}, None, "", _src("output")))
    ncet.save(GraphIR(nodes, {"c": torch.ones(3)}), tmp_path / "g.ncet", verify=False)
    with pytest.raises(GraphIRFormatError) as info:
        ncet.load(tmp_path / "g.ncet")
    assert "declares per-sample shape [], so shape [1] at batch size 1, but computes a " \
           "tensor of shape [3], whose leading size is not the batch size" in str(info.value)
    assert "[] but computes []" not in str(info.value)


FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _layer(op_type: str, dtype, param) -> GraphIR:
    """Input (2, 3, 3) of `dtype` and one layer whose constants are of dtype `param`."""
    ones = dict(dtype=param)
    if op_type == "Linear":
        attrs, consts, shape = {"weight": "w", "bias": "b"}, {
            "w": torch.ones(2, 3, **ones), "b": torch.ones(2, **ones)}, (2, 3, 2)
    elif op_type == "Conv2d":
        attrs = {"weight": "w", "bias": "b", "stride": [1, 1], "padding": [0, 0, 0, 0],
                 "dilation": [1, 1], "groups": 1, "padding_mode": "zeros"}
        consts, shape = {"w": torch.ones(1, 2, 2, 2, **ones), "b": torch.ones(1, **ones)}, (1, 2, 2)
    else:
        attrs = {"mean": "m", "var": "v", "weight": "w", "bias": "b", "eps": 1e-5}
        consts = {k: torch.ones(2, **ones) for k in "mvwb"}
        shape = (2, 3, 3)
    nodes = (IRNode("x", "Input", (), {"index": 0}, (2, 3, 3), _name(dtype), _src("x")),
             IRNode("op", op_type, ("x",), attrs, shape, "", _src("op")),
             IRNode("output", "Output", ("op",), {"tuple": False}, None, "", _src("output")))
    return GraphIR(nodes, consts)


def _eager(op_type: str, x, c):
    if op_type == "Linear":
        return F.linear(x, c["w"], c["b"])
    if op_type == "Conv2d":
        return F.conv2d(x, c["w"], c["b"])
    return F.batch_norm(x, c["m"], c["v"], c["w"], c["b"], False, 0.0, 1e-5)


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


@pytest.mark.parametrize("param", FLOATS, ids=_name)
@pytest.mark.parametrize("dtype", FLOATS, ids=_name)
@pytest.mark.parametrize("op_type", ["Linear", "Conv2d", "BatchNorm"])
def test_layer_dtypes_follow_pytorch(op_type, dtype, param, tmp_path):
    """PyTorch is the oracle: a mix of dtypes it refuses is refused, and otherwise only the
    dtype it computes may be declared."""
    ir = _layer(op_type, dtype, param)
    try:
        result = _eager(op_type, torch.ones(2, 2, 3, 3, dtype=dtype), ir.constants).dtype
    except RuntimeError:
        result = None
    for declared_dtype in FLOATS:
        nodes = tuple(dataclasses.replace(n, dtype=_name(declared_dtype)) if n.name == "op"
                      else n for n in ir.nodes)
        graph = GraphIR(nodes, ir.constants)
        ncet.save(graph, tmp_path / "g.ncet", verify=False)
        if declared_dtype == result:
            ncet.load(tmp_path / "g.ncet")
            ncet.save(graph, tmp_path / "g.ncet")
        else:
            why = "PyTorch cannot compute it from these dtypes" if result is None else \
                "declares dtype"
            with pytest.raises(GraphIRFormatError, match=why):
                ncet.load(tmp_path / "g.ncet")
            with pytest.raises(ValueError, match=f"cannot save this GraphIR: node 'op'.*{why}"):
                ncet.save(graph, tmp_path / "g.ncet")  # save refuses what load refuses


CONSTANT_DTYPES = [*FLOATS, torch.int8, torch.int32, torch.int64, torch.uint8]


@pytest.mark.parametrize("rank", [0, 1], ids=["0-d", "1-d"])
@pytest.mark.parametrize("const", CONSTANT_DTYPES, ids=_name)
@pytest.mark.parametrize("dtype", FLOATS, ids=_name)
def test_affine_dtypes_follow_pytorch(dtype, const, rank, tmp_path):
    """x * c with a buffer c of any dtype and rank: convert records PyTorch's dtype; load
    accepts exactly that one."""

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("c", torch.full((4,) if rank else (), 2, dtype=const))

        def forward(self, x):
            return x * self.c

    ir = ncet.convert(Scale(), (4,), dtype=dtype)
    assert ir.nodes[1].dtype == _name(torch.result_type(torch.ones(2, 4, dtype=dtype),
                                                         Scale().c))
    ncet.save(ir, tmp_path / "g.ncet")
    ncet.load(tmp_path / "g.ncet")
    for other in FLOATS:
        if _name(other) != ir.nodes[1].dtype:
            header, data = split((tmp_path / "g.ncet").read_bytes())
            (tmp_path / "h.ncet").write_bytes(declared("mul", dtype=_name(other))(header, data))
            with pytest.raises(GraphIRFormatError, match="declares dtype"):
                ncet.load(tmp_path / "h.ncet")


# --- Files a second review built past the limits ----------------------------------------------


def test_raised_limits_give_no_raw_error_and_slow_kernels_run_on_meta(tmp_path):
    """With the limits raised out of the way, a graph of 2^40 elements per sample is refused
    in a sentence (not a raw allocator error), and a convolution of 10^6 groups, which
    PyTorch's CPU kernel loops over group by group, is checked on meta tensors."""
    path = tmp_path / "huge.ncet"
    path.write_bytes(relu_on_input([2**40]))
    with pytest.raises(GraphIRFormatError, match="cannot be allocated here.*limits given"):
        ncet.load(path, max_check_bytes=2**62, max_check_work=2**62)
    groups = 10**6
    grouped = tmp_path / "grouped.ncet"
    grouped.write_bytes(pack(
        [node("x", "Input", (), {"index": 0}, [groups, 1, 1], dtype="float16"),
         node("conv", "Conv2d", ["x"], {
             "weight": "w", "bias": None, "stride": [1, 1], "padding": [0, 0, 0, 0],
             "dilation": [1, 1], "groups": groups, "padding_mode": "zeros"},
             [groups, 1, 1], dtype="float16"),
         output("conv")],
        [constant("w", [groups, 1, 1, 1], dtype="float16", itemsize=2)],
        bytes(2 * groups)))
    ir = ncet.load(grouped, max_check_bytes=2**62, max_check_work=2**62)
    assert ir.node("conv").attrs["groups"] == groups


@pytest.mark.parametrize(("nodes", "says"), [
    ([node("x", "Input", (), {"index": 0}, [1]),
      node("s", "Slice", ["x"], {"index": [None] * 50_000}, [1]), output("s")],
     "gives a result of rank 50001, over the 64 limit"),
    ([node("x", "Input", (), {"index": 0}, [1]),
      node("c", "Concat", ["x"] * 70_000, {"axis": 0}, [70_000]), output("c")],
     "has 70000 inputs, over the 65536 limit"),
], ids=["slice of 50,000 nulls", "concat of 70,000 inputs"])
def test_pytorch_calls_that_take_time_per_entry_are_bounded(tmp_path, nodes, says):
    """PyTorch's indexing is quadratic in the nulls of an index, and its calls take time per
    input: both are refused from the header, before anything runs."""
    path = tmp_path / "long.ncet"
    path.write_bytes(pack(nodes))
    with pytest.raises(GraphIRFormatError, match=says):
        ncet.load(path)


def _conv_file(channels, side, weight, bias=None, groups=1) -> tuple[list, list, bytes]:
    out = weight[0]
    nodes = [node("x", "Input", (), {"index": 0}, [channels, side, side]),
             node("y", "Conv2d", ["x"], {
                 "weight": "w", "bias": "b" if bias else None, "stride": [1, 1],
                 "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": groups,
                 "padding_mode": "zeros"}, [out, side - weight[2] + 1, side - weight[3] + 1]),
             output("y")]
    consts = [constant("w", weight)]
    size = 4 * math.prod(weight)
    if bias:
        consts.append(constant("b", bias, offset=size))
        size += 4 * math.prod(bias)
    return nodes, consts, bytes(size)


def _layer_file(op_type, shape, attrs, out_shape, consts) -> tuple[list, list, bytes]:
    entries, offset = [], 0
    for name, const_shape in consts:
        entries.append(constant(name, const_shape, offset=offset))
        offset += 4 * math.prod(const_shape)
    return ([node("x", "Input", (), {"index": 0}, shape),
             node("y", op_type, ["x"], attrs, out_shape), output("y")], entries, bytes(offset))


# Constants that do not fit their layer: PyTorch's CPU kernels refuse them, but its meta
# kernels (which the check uses for expensive nodes) skip some of these checks, so the check
# has rules of its own. (case, file parts, what the refusal says)
LAYER_MISFITS = [
    ("conv out-channels not a multiple of groups", _conv_file(2, 4, [3, 1, 3, 3], groups=2),
     "weight of shape [3, 1, 3, 3] does not fit 2 group(s) of an input of 2 channels"),
    ("conv bias of the wrong length, grouped", _conv_file(2, 4, [2, 1, 3, 3], [7], groups=2),
     "bias of shape [7] for 2 output channels"),
    ("conv bias of the wrong length, on meta", _conv_file(16, 32, [16, 16, 3, 3], [5]),
     "bias of shape [5] for 16 output channels"),
    ("conv without output channels", _conv_file(16, 4, [0, 16, 3, 3]),
     "weight of shape [0, 16, 3, 3] does not fit 1 group(s)"),
    ("adaptive pool of an empty axis", _layer_file(
        "AdaptiveAvgPool2d", [1000, 0, 4], {"output_size": [2, 2]}, [1000, 2, 2], []),
     "an empty input axis"),
    ("batch norm mean of rank 2", _layer_file(
        "BatchNorm", [4, 2**21 + 1], {"mean": "m", "var": "v", "weight": None, "bias": None,
                                      "eps": 1e-5}, [4, 2**21 + 1], [("m", [4, 1]), ("v", [4])]),
     "mean has shape [4, 1], not [4]"),
]


@pytest.mark.parametrize(("parts", "says"), [c[1:] for c in LAYER_MISFITS],
                         ids=[c[0] for c in LAYER_MISFITS])
def test_constants_that_do_not_fit_their_layer_are_refused(tmp_path, parts, says):
    path = tmp_path / "misfit.ncet"
    path.write_bytes(pack(*parts))
    with pytest.raises(GraphIRFormatError, match=re.escape(says)):
        ncet.load(path)


def test_a_negative_batch_norm_eps_is_refused(tmp_path):
    """PyTorch refuses it when it runs; convert never writes one."""
    path = tmp_path / "eps.ncet"
    path.write_bytes(pack(*_layer_file(
        "BatchNorm", [4], {"mean": "m", "var": "v", "weight": None, "bias": None, "eps": -1.0},
        [4], [("m", [4]), ("v", [4])])))
    with pytest.raises(GraphIRFormatError, match=re.escape("eps=-1.0 (kind 'float') must be a "
                                                           "number >= 0")):
        ncet.load(path)
