"""ncet.check_onnx (docs/exactness.md §6): onnxruntime's execution of an exported file held to
GraphIR's certified bounds node by node; faults seeded in the file are found at their node."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ncet
from ncet.examples import EXAMPLES

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _seeded(build):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build().eval()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d | nn.BatchNorm1d):
                m.running_mean.normal_(0.0, 0.2)
                m.running_var.uniform_(0.5, 2.0)
    return model


class Branches(nn.Module):
    """A square Linear, a padded Conv with BatchNorm, and a Concat of two different halves."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.square = nn.Linear(12, 12)

    def forward(self, x):
        y = self.bn(self.conv(x))
        z = torch.cat([torch.relu(y), y * 2.0], dim=1)
        return self.square(torch.flatten(z[:, :, :1, :2], 1))


def _branches():
    model = _seeded(Branches)
    return model, ncet.convert(model, (2, 4, 4))


def _nodes(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op_type]


def _attr(node: onnx.NodeProto, name: str) -> onnx.AttributeProto:
    return next(a for a in node.attribute if a.name == name)


def _transb_flipped(m):
    gemm = _nodes(m, "Gemm")[0]
    _attr(gemm, "transB").i = 0  # a square weight: the shapes cannot tell
    return gemm


def _weight_transposed(m):
    gemm = _nodes(m, "Gemm")[0]
    init = next(t for t in m.graph.initializer if t.name == gemm.input[1])
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).T.copy(), init.name))
    return gemm


def _epsilon_changed(m):
    bn = _nodes(m, "BatchNormalization")[0]
    _attr(bn, "epsilon").f = 1e-3
    return bn


def _pad_off_by_one(m):
    conv = _nodes(m, "Conv")[0]
    _attr(conv, "pads").ints[:] = [2, 1, 0, 1]  # the same output shape, shifted a row
    return conv


def _concat_swapped(m):
    cat = _nodes(m, "Concat")[0]
    cat.input[0], cat.input[1] = cat.input[1], cat.input[0]
    return cat


def _ir_node(onnx_node: onnx.NodeProto) -> str:
    return onnx_node.output[0].partition("/")[0]


SEEDED_FAULTS = [
    # (fault, what it does to the file)
    (_transb_flipped, "Gemm transB=0 on a square weight"),
    (_weight_transposed, "the square Gemm weight's initializer transposed"),
    (_epsilon_changed, "BatchNormalization epsilon 1e-5 -> 1e-3"),
    (_pad_off_by_one, "Conv pads [1, 1, 1, 1] -> [2, 1, 0, 1]"),
    (_concat_swapped, "Concat's two inputs swapped"),
]


@pytest.mark.parametrize(("fault", "what"), SEEDED_FAULTS, ids=[w for _, w in SEEDED_FAULTS])
def test_a_fault_seeded_in_the_file_is_found_at_its_node(fault, what):
    _, ir = _branches()
    exported = ncet.to_onnx(ir)
    assert ncet.check_onnx(ir, exported).ok, "the file as exported is certified"
    node = _ir_node(fault(exported))
    report = ncet.check_onnx(ir, exported)
    assert not report.ok
    assert report.first_violation is not None and report.first_violation.name == node, \
        f"{what}: first violation at {report.first_violation} instead of {node!r}"
    assert report.summary().startswith(f"VIOLATION at node {node!r}")


@pytest.mark.parametrize(("fault", "what"), SEEDED_FAULTS, ids=[w for _, w in SEEDED_FAULTS])
def test_the_numbers_alone_find_each_seeded_fault_too(fault, what):
    """Without the file read against the export, onnxruntime's values alone, held to the
    bound, still find each fault at its node."""
    from ncet.exactness.runtime_check import check_runtime
    from ncet.onnx.runtime import onnxruntime_runner, read_onnxruntime_arithmetic

    _, ir = _branches()
    exported = ncet.to_onnx(ir)
    node = _ir_node(fault(exported))
    report = check_runtime(ir, onnxruntime_runner(ir, exported), runtime="onnxruntime",
                           arithmetic=read_onnxruntime_arithmetic())
    assert report.first_violation is not None and report.first_violation.name == node, what
    assert report.first_violation.local_violations > 0, f"{what}: found by the numbers"


CONVERTING = [name for name, example in EXAMPLES.items() if example.converts]


@pytest.mark.parametrize("name", CONVERTING)
@pytest.mark.parametrize("batch", [None, 1])
def test_every_bundled_example_is_certified_in_onnxruntime(name, batch):
    example = EXAMPLES[name]
    ir = ncet.convert(example.build(), *example.input_shapes)
    report = ncet.check_onnx(ir, ncet.to_onnx(ir, batch=batch), samples_per_scale=4)
    assert report.ok, report.summary()
    assert report.runtime.startswith("onnxruntime ")
    assert not report.unchecked and len(report.entries) == len(ir.nodes) - len(ir.inputs) - 1
    assert "onnxruntime" in report.inputs and "ORT_DISABLE_ALL" in report.arithmetic.describe()


def test_the_report_is_check_exactness_report_on_the_same_inputs():
    model, ir = _branches()
    x = torch.randn(8, 2, 4, 4)
    ours = ncet.check_onnx(ir, ncet.to_onnx(ir), x)
    torchs = ncet.check_exactness(model, ir, x)
    assert type(ours) is type(torchs) and ours.ok and torchs.ok
    assert [e.name for e in ours.entries] == [e.name for e in torchs.entries]
    assert [e.location for e in ours.entries] == [e.location for e in torchs.entries]
    assert [(e.local_bound > 0) for e in ours.entries] == \
        [(e.local_bound > 0) for e in torchs.entries], "bounds where rounding happens"


def test_a_float64_graph_without_conv_is_checked():
    # eps a float32 value: ONNX's epsilon attribute is float32 (docs/export.md)
    model = _seeded(lambda: nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4, eps=2.0 ** -17),
                                          nn.ReLU(), nn.Linear(4, 2))).double()
    ir = ncet.convert(model, (5,), dtype=torch.float64)
    report = ncet.check_onnx(ir, ncet.to_onnx(ir), samples_per_scale=4)
    assert report.ok, report.summary()


def test_a_value_missing_from_the_file_leaves_its_node_unchecked():
    _, ir = _branches()
    exported = ncet.to_onnx(ir)
    relu = _nodes(exported, "Relu")[0]
    name = _ir_node(relu)
    renamed = relu.output[0] + "_renamed"
    for node in exported.graph.node:
        node.input[:] = [renamed if v == relu.output[0] else v for v in node.input]
    relu.output[0] = renamed
    for info in exported.graph.value_info:
        if info.name == name:
            info.name = renamed
    report = ncet.check_onnx(ir, exported, samples_per_scale=2)
    assert not report.ok
    entry = next(e for e in report.entries if e.name == name)
    assert entry.violated and "the file has no Relu node writing" in entry.note


def test_a_file_of_another_graph_is_refused_with_the_reason(tmp_path):
    _, ir = _branches()
    other = ncet.convert(_seeded(lambda: nn.Linear(3, 2)), (3,))
    with pytest.raises(ValueError, match="not the GraphIR's Input nodes|is .* of element type"):
        ncet.check_onnx(ir, ncet.to_onnx(other))
    hostile = tmp_path / "hostile.onnx"
    hostile.write_bytes(b"\x08\x07garbage" * 10)
    with pytest.raises(ValueError, match="not an ONNX model"):
        ncet.check_onnx(ir, hostile)
    with pytest.raises(TypeError):
        ncet.check_onnx(ir, 42)


def test_the_file_is_not_changed_by_the_check():
    _, ir = _branches()
    exported = ncet.to_onnx(ir)
    before = exported.SerializeToString()
    ncet.check_onnx(ir, exported, samples_per_scale=2)
    assert exported.SerializeToString() == before


def test_onnxruntimes_arithmetic_is_probed_on_its_threads():
    from ncet.onnx.runtime import probe_onnxruntime, read_onnxruntime_arithmetic

    assert probe_onnxruntime() == [], "this machine's onnxruntime keeps IEEE arithmetic"
    model = read_onnxruntime_arithmetic(threads=2)
    assert model.certified and model.flags["graph_optimization_level"] == "ORT_DISABLE_ALL"
    assert any(note.startswith("probed in onnxruntime's kernels") for note in model.notes)


def test_the_probes_run_once_per_process_and_floating_point_environment(monkeypatch):
    from ncet.onnx import runtime

    calls = []
    monkeypatch.setattr(runtime, "_PROBED", {})
    monkeypatch.setattr(runtime, "probe_onnxruntime",
                        lambda threads=0: calls.append(threads) or ["found"])
    assert runtime.probed_onnxruntime(1) == runtime.probed_onnxruntime(1) == ["found"]
    assert calls == [1]
    runtime.probed_onnxruntime(2)  # another thread count: probed again
    assert calls == [1, 2]
    # the calling thread's environment changed (flush-to-zero turned on, say): probed again
    environment = runtime._calling_thread_environment()
    assert not any(environment), "this thread keeps IEEE arithmetic"
    monkeypatch.setattr(runtime, "_calling_thread_environment",
                        lambda: (True, *environment[1:]))
    runtime.probed_onnxruntime(1)
    assert calls == [1, 2, 1]
    assert not runtime.read_onnxruntime_arithmetic(1).certified  # what was found is reported


# --- faults only the structure shows: the file read against the export of the GraphIR ----


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)) * 0.5)


def _small():
    return ncet.convert(_seeded(Small), (8,))


def _relu_as_clip(m):
    relu = _nodes(m, "Relu")[0]
    m.graph.initializer.extend([numpy_helper.from_array(np.float32(0), "relu/lo"),
                                numpy_helper.from_array(np.float32(1e9), "relu/hi")])
    relu.op_type = "Clip"  # the same values on every input below 1e9
    relu.input.extend(["relu/lo", "relu/hi"])
    return "relu"


def _relu_behind_an_if(m):
    relu = _nodes(m, "Relu")[0]
    at = list(m.graph.node).index(relu)
    then = helper.make_graph([helper.make_node("Relu", ["a"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    m.graph.initializer.append(numpy_helper.from_array(np.float32(1e8), "relu/threshold"))
    trojan = [helper.make_node("ReduceMax", ["a"], ["relu/max"], keepdims=0),
              helper.make_node("Less", ["relu/max", "relu/threshold"], ["relu/cond"]),
              helper.make_node("If", ["relu/cond"], ["relu"], then_branch=then,
                               else_branch=other)]  # Neg only where max(a) >= 1e8
    del m.graph.node[at]
    for k, node in enumerate(trojan):
        m.graph.node.insert(at + k, node)
    return "relu"


def _output_scaled(m):
    out = m.graph.output[0].name
    m.graph.initializer.append(numpy_helper.from_array(np.float32(1 + 2 ** -22), "k"))
    m.graph.node.append(helper.make_node("Mul", [out, "k"], ["scaled"]))
    m.graph.output[0].name = "scaled"  # an unowned node between the graph and its output
    return "b"


def _weight_copy_read(m):
    gemm = next(n for n in _nodes(m, "Gemm") if n.output[0] == "b")
    weight = next(t for t in m.graph.initializer if t.name == gemm.input[1])
    array = numpy_helper.to_array(weight).copy()
    array.flat[0] = np.nextafter(array.flat[0], np.float32(np.inf))  # one ulp
    m.graph.initializer.append(numpy_helper.from_array(array, "evil"))
    gemm.input[1] = "evil"  # the IR's constant stays in the file, bit for bit
    return "b"


def _scalar_one_ulp(m):
    scalar = next(t for t in m.graph.initializer if t.name.startswith("mul/"))
    array = numpy_helper.to_array(scalar).copy()
    scalar.CopyFrom(numpy_helper.from_array(np.nextafter(array, np.float32(1)), scalar.name))
    return "mul"


STRUCTURAL_FAULTS = [
    (_relu_as_clip, "Relu written as Clip(0, 1e9)"),
    (_relu_behind_an_if, "Relu behind an If that negates large inputs"),
    (_output_scaled, "the graph output scaled by an unowned Mul(1 + 2^-22)"),
    (_weight_copy_read, "the Gemm reads a one-ulp copy of its weight"),
    (_scalar_one_ulp, "the scalar 0.5 of x * 0.5 moved by one ulp"),
]


@pytest.mark.parametrize(("fault", "what"), STRUCTURAL_FAULTS,
                         ids=[w for _, w in STRUCTURAL_FAULTS])
def test_a_file_that_is_not_the_export_is_refused_at_its_node(fault, what):
    ir = _small()
    exported = ncet.to_onnx(ir)
    node = fault(exported)
    report = ncet.check_onnx(ir, exported, samples_per_scale=2)
    assert not report.ok, what
    assert report.first_violation is not None and report.first_violation.name == node, \
        f"{what}: first violation at {report.first_violation} instead of {node!r}"


def test_a_file_with_two_batch_sizes_is_refused():
    ir = ncet.convert(_seeded(TwoInputs), (3,), (3,))
    exported = ncet.to_onnx(ir, batch=1)
    exported.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 2
    with pytest.raises(ValueError, match="different batch sizes"):
        ncet.check_onnx(ir, exported, samples_per_scale=2)


class TwoInputs(nn.Module):
    def forward(self, x, y):
        return x + y


@pytest.mark.parametrize("fault", [None, _transb_flipped], ids=["as exported", "Gemm flipped"])
def test_samples_split_into_chunks_give_the_one_chunk_report(monkeypatch, fault):
    """A check over several chunks (forced by a small budget) sees every sample once, in
    chunks within one sample of each other, and reaches the verdict, the nodes checked and
    violated and the first violation of the check in one chunk."""
    from ncet.exactness import runtime_check
    from ncet.onnx.runtime import onnxruntime_runner, read_onnxruntime_arithmetic

    _, ir = _branches()
    exported = ncet.to_onnx(ir)
    if fault is not None:
        fault(exported)
    x = torch.randn(11, 2, 4, 4, generator=torch.Generator().manual_seed(3))
    runner, seen = onnxruntime_runner(ir, exported), []

    def run(chunk):
        seen.append(chunk[0].shape[0])
        return runner(chunk)

    def check():
        return runtime_check.check_runtime(ir, run, x, runtime="onnxruntime",
                                           arithmetic=read_onnxruntime_arithmetic())

    whole = check()
    assert seen == [11]
    held = sum(int(np.prod(n.shape)) for n in ir.nodes if n.shape is not None)
    monkeypatch.setattr(runtime_check, "RUNTIME_CHUNK_ELEMENTS", 3 * held)  # 3 samples
    seen.clear()
    split = check()
    assert seen == [3, 3, 3, 2], "four chunks, within one sample of each other, largest first"
    assert split.ok == whole.ok == (fault is None)
    def facts(report):
        return [(e.name, e.checked, e.local_violations > 0, e.e2e_violations > 0)
                for e in report.entries]

    assert facts(split) == facts(whole) and split.samples == whole.samples == 11
    if fault is not None:
        assert split.first_violation.name == whole.first_violation.name


def test_no_node_holds_more_than_its_budget_in_a_chunk(monkeypatch):
    from ncet.exactness import runtime_check
    from ncet.onnx.runtime import onnxruntime_runner, read_onnxruntime_arithmetic

    _, ir = _branches()
    runner, seen = onnxruntime_runner(ir, ncet.to_onnx(ir)), []
    largest = max(int(np.prod(n.shape)) for n in ir.nodes if n.shape is not None)
    monkeypatch.setattr(runtime_check, "RUNTIME_NODE_ELEMENTS", 2 * largest)  # 2 samples
    report = runtime_check.check_runtime(
        ir, lambda chunk: seen.append(chunk[0].shape[0]) or runner(chunk),
        torch.randn(5, 2, 4, 4), runtime="onnxruntime", arithmetic=read_onnxruntime_arithmetic())
    assert seen == [2, 2, 1] and report.ok and report.samples == 5


@pytest.mark.parametrize("batch", [0, -1, True, 2.0])
def test_a_fixed_batch_that_is_no_batch_size_is_refused(batch):
    from ncet.exactness.runtime_check import check_runtime

    _, ir = _branches()
    with pytest.raises(ValueError, match="positive int"):
        check_runtime(ir, lambda chunk: {}, torch.randn(4, 2, 4, 4), runtime="a runtime",
                      batch=batch)


def _two_class():
    model = _seeded(lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    return model, ncet.convert(model, (4,))


def test_a_two_class_verifier_export_is_checked_one_sample_per_run():
    # a fixed batch of 1: one run per sample, so a 2-element output's ratio sample is
    # thinned over more than 64 chunks (its stride once overflowed there)
    model, ir = _two_class()
    report = ncet.check_onnx(ir, ncet.to_onnx(ir, profile="verifier"), samples_per_scale=25)
    assert report.samples > 64 and report.ok, report.summary()
    assert ncet.check_exactness(model, ir, chunk_size=1, samples_per_scale=25).ok


class Passthrough(nn.Module):
    def forward(self, x):
        return x


def test_a_graph_without_operator_nodes_is_compared_with_its_export():
    # the file's Identity rewired through an added Max(x, -1e30): the samples never reach
    # -1e30, so only the comparison with the export can refuse it, and there is no operator
    # node to hold the fault
    ir = ncet.convert(Passthrough(), (4,))
    exported = ncet.to_onnx(ir)
    assert ncet.check_onnx(ir, exported, samples_per_scale=2).ok
    out = exported.graph.output[0].name
    exported.graph.node[0].output[0] = "pre"
    exported.graph.initializer.append(numpy_helper.from_array(np.float32(-1e30), "floor"))
    exported.graph.node.append(helper.make_node("Max", ["pre", "floor"], [out]))
    with pytest.raises(ValueError, match="no operator node to hold the fault.*Max node"):
        ncet.check_onnx(ir, exported, samples_per_scale=2)


def _value_info(m, name):
    return next(v for v in m.graph.value_info if v.name == name)


def test_a_value_info_entry_that_is_not_the_exports_is_a_fault_at_its_node():
    ir = _small()
    exported = ncet.to_onnx(ir)
    exported.graph.value_info.remove(_value_info(exported, "relu"))  # onnxruntime loads it
    report = ncet.check_onnx(ir, exported, samples_per_scale=2)
    assert not report.ok and report.first_violation.name == "relu"
    assert "value_info entry 'relu' is missing" in report.first_violation.note


def test_a_file_onnxruntime_cannot_load_as_given_is_refused():
    # a graph output declared for every IR node overrides the value_info in the check's
    # copy: the file itself must load
    from ncet.onnx.onnx_file import ONNXFileError

    ir = _small()
    exported = ncet.to_onnx(ir)
    _value_info(exported, "relu").type.tensor_type.elem_type = TensorProto.DOUBLE
    with pytest.raises(ONNXFileError, match="cannot load the file: .*value_info entry 'relu'"
                       ) as caught:
        ncet.check_onnx(ir, exported, samples_per_scale=2)
    assert caught.value.code == "onnx-unloadable"


class ReluReshape(nn.Module):
    def forward(self, x):
        return torch.relu(x).reshape(-1, 8)


def test_a_file_onnxruntime_cannot_run_is_refused_at_its_node():
    from ncet.onnx.onnx_file import ONNXFileError

    ir = ncet.convert(ReluReshape(), (2, 4))
    exported = ncet.to_onnx(ir)
    shape = next(t for t in exported.graph.initializer if t.name == "reshape/shape")
    shape.CopyFrom(numpy_helper.from_array(np.array([0, 5], np.int64), shape.name))
    with pytest.raises(ONNXFileError, match="cannot run the file at IR node 'reshape'.*"
                       "initializer 'reshape/shape'") as caught:
        ncet.check_onnx(ir, exported, samples_per_scale=2)
    assert caught.value.code == "onnx-run-failed" and caught.value.name == "reshape"


def test_inputs_that_require_grad_are_checked_as_check_exactness_checks_them():
    model, ir = _two_class()
    x = torch.randn(6, 4, requires_grad=True)
    assert ncet.check_exactness(model, ir, x).ok
    report = ncet.check_onnx(ir, ncet.to_onnx(ir), x)
    assert report.ok and report.samples == 6, report.summary()


def test_generated_samples_are_rounded_up_to_the_files_fixed_batch():
    _, ir = _two_class()
    exported = ncet.to_onnx(ir, batch=5)
    report = ncet.check_onnx(ir, exported)  # 3 scales x 32 = 96 samples: rounded up to 105
    assert report.ok and report.samples == 105, report.summary()
    report = ncet.check_onnx(ir, exported, samples_per_scale=4)
    assert report.ok and report.samples == 15, report.summary()
    with pytest.raises(ValueError, match="7 samples do not split into batches of 5"):
        ncet.check_onnx(ir, exported, torch.randn(7, 4))


@pytest.mark.parametrize(("threads", "error"), [(1.5, TypeError), ("2", TypeError),
                                                (True, TypeError), (-1, ValueError)])
def test_a_thread_count_that_is_no_count_is_refused(threads, error):
    _, ir = _two_class()
    with pytest.raises(error, match=f"threads={threads!r}"):
        ncet.check_onnx(ir, ncet.to_onnx(ir), samples_per_scale=1, threads=threads)
