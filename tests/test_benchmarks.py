"""Smoke test of benchmarks/scale.py at tiny sizes: it runs and its JSON has every key.

No timing is asserted: speed is measured by the benchmark itself, on demand.
"""

from __future__ import annotations

import copy
import inspect
import json
import mmap
import os
import subprocess
import sys

import pytest
import torch

import ncet
from benchmarks import eager_floor, memory, scale
from ncet.frontend.constants import ConstantLifter
from ncet.frontend.shape_propagation import ShapePropagation

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_models_convert_exactly_at_the_requested_size():
    for family, nodes in (("mlp", 60), ("resnet", 60)):
        model, shape = scale.build(family, nodes)
        traced = len(torch.fx.symbolic_trace(model).graph.nodes)
        assert abs(traced - nodes) <= 13, (family, traced)
        ir = ncet.convert(model, shape)
        x = scale.inputs(shape, 3, torch.float64)
        with torch.no_grad():
            expected = copy.deepcopy(model).double()(x)
        torch.testing.assert_close(ncet.evaluate(ir, x), expected)


def test_mlp_width_sets_the_layers_and_the_input():
    model, shape = scale.build("mlp", 30, mlp_width=96)
    assert shape == (96,)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.in_features for m in linears] == [96] * len(linears)
    assert linears[-1].out_features == 10
    ir = ncet.convert(model, shape)
    x = scale.inputs(shape, 3, torch.float64)
    with torch.no_grad():
        expected = copy.deepcopy(model).double()(x)
    torch.testing.assert_close(ncet.evaluate(ir, x), expected)


def _touch_mib(mib: int) -> None:
    """Map `mib` MiB of fresh anonymous memory, write one byte per page, unmap it: resident
    growth that neither glibc nor PyTorch can serve from memory they already hold."""
    size = mib * 2 ** 20
    with mmap.mmap(-1, size) as pages:
        for i in range(0, size, mmap.PAGESIZE):
            pages[i] = 1


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux peak reset")
def test_peak_growth_sees_an_allocation_after_an_earlier_peak():
    _touch_mib(96)  # an earlier 96 MiB peak, released before the calls
    assert memory.peak_growth_mib(lambda: None) < 16
    assert 40 < memory.peak_growth_mib(lambda: _touch_mib(48)) < 80


def test_memory_child_imports_as_a_package():
    # the child process runs `from benchmarks.scale import peak_child` at the repository root
    mib = scale.peak_memory("mlp", 30, 4, mlp_width=32)
    assert mib >= 0
    mib = memory.fresh_process_mib("import benchmarks.exactness; print(1.5)")
    assert mib == 1.5


@pytest.mark.parametrize("script", ["scale.py", "exactness.py", "eager_floor.py", "rewrite.py",
                                    "export.py", "onnx_import.py", "vnnlib_read.py",
                                    "adjudicate.py"])
def test_runs_as_a_script(script):
    # benchmarks/ itself, not the repository root, is on sys.path: the memory import must work
    out = subprocess.run([sys.executable, os.path.join(_ROOT, "benchmarks", script), "--help"],
                         capture_output=True, text=True, cwd="/", check=True)
    assert "usage:" in out.stdout


def test_vnnlib_read_script_times_both_readers(tmp_path, capsys):
    # benchmarks/vnnlib_read.py on two small corpus files, one repeat: every column, the
    # ratios the quotients of the times, alpha-beta-CROWN's cache never left in the corpus
    from benchmarks import vnnlib_read
    from tests.corpus import corpus_root

    root = corpus_root()
    files = ["acasxu/vnnlib/prop_6.vnnlib", "mnist_fc/vnnlib/prop_0_0.03.vnnlib"]
    out = tmp_path / "vnnlib.json"
    assert vnnlib_read.main(["--files", ",".join(files), "--repeats", "1",
                             "--synthetic-mb", "0.05", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert {"date", "cpu", "nproc", "git_head"} <= set(result["machine"])
    assert [r["file"] for r in result["rows"]] == [*files, "nn4sys_like_0.05MB.vnnlib"]
    assert result["rows"][2]["inputs"] == 154 and result["rows"][2]["bytes"] >= 50_000
    for row in result["rows"]:
        for key in ("ncet_s", "ncet_views_s", "abcrown_s", "abcrown_over_ncet"):
            assert row[key] > 0, key
        assert row["abcrown_over_ncet"] == pytest.approx(row["abcrown_s"] / row["ncet_s"])
        assert row["abcrown_moved_bounds"] >= row["abcrown_inward_bounds"] >= 0
    assert result["rows"][1]["inputs"] == 784
    assert not list(root.rglob("*.compiled"))
    printed = capsys.readouterr().out
    assert "abCROWN/ncet" in printed and "not timed" in printed


def test_rewrite_script_writes_both_comparisons(tmp_path):
    from benchmarks import rewrite

    out = tmp_path / "rewrite.json"
    assert rewrite.main(["--nodes", "41", "--repeats", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["fx_nodes"] == 41
    for key in ("no_rewrites", "every_relu_in_place"):
        assert result[key]["ratio"] > 0


def test_export_script_writes_every_ratio(tmp_path, capsys):
    # benchmarks/export.py at tiny sizes: every exporter, the to_onnx sweep and its fit, and
    # the check_onnx row (or its "not available"); the ratios are positive, no time asserted
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")  # torch.onnx.export's default, the dynamo exporter
    from benchmarks import export

    out = tmp_path / "export.json"
    assert export.main(["--families", "mlp", "--export-nodes", "21", "--sizes", "21,41",
                        "--repeats", "1", "--export-repeats", "1", "--check-models", "mlp",
                        "--check-nodes", "21", "--samples", "4", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result) == {"machine", "settings", "exporters", "to_onnx", "fits", "check_onnx"}
    assert {"date", "processor", "cpu", "nproc", "torch", "onnx", "onnxruntime",
            "git_head"} <= set(result["machine"])
    (row,) = result["exporters"]
    assert row["model"] == "mlp" and row["nodes"] == 21
    for key in ("ncet_s", "dynamo_s", "torchscript_s", "dynamo_over_ncet",
                "torchscript_over_ncet"):
        assert row[key] > 0, key
    assert row["dynamo_over_ncet"] == pytest.approx(row["dynamo_s"] / row["ncet_s"])
    assert row["onnx_nodes/ncet"] > 0 and row["onnx_nodes/dynamo"] > 0
    assert [r["nodes"] for r in result["to_onnx"]] == [21, 41]
    assert all(r["to_onnx_us_per_node"] > 0 and r["to_onnx_over_convert"] > 0
               for r in result["to_onnx"])
    assert set(result["fits"]) == {"mlp"}  # None: no two sizes >= 1,000 nodes
    printed = capsys.readouterr().out
    assert "dyn/ncet" in printed and "TS/ncet" in printed and "us/node" in printed
    assert "date " in printed and "nproc " in printed
    if not hasattr(ncet, "check_onnx"):
        assert result["check_onnx"] == "not available"
        assert "ncet.check_onnx: not available" in printed
        return
    (check,) = result["check_onnx"]
    assert check["samples"] == 4 and check["ok"], check["verdict"]
    for key in ("floor_s", "session_s", "forward_s", "evaluate_s", "check_s",
                "check_over_floor", "check_over_forward_and_evaluate", "check_exactness_s",
                "check_over_check_exactness", "minimal_s", "minimal_over_floor",
                "check_over_minimal"):
        assert check[key] > 0, key
    assert check["check_over_floor"] == pytest.approx(check["check_s"] / check["floor_s"])
    assert "chk/floor" in printed


# (nodes, width, samples): a shallow MLP, and one deep enough that the end-to-end radii leave
# float32 and the check takes the float64 carry
_MINIMAL_CASES = [(21, 16, 32), (101, 32, 40), (301, 64, 16)]


@pytest.mark.parametrize("nodes,width,samples", _MINIMAL_CASES)
def test_minimal_check_computes_what_check_exactness_reports(nodes, width, samples):
    # the lower bound in eager_floor.py is only a bound if it does the check's arithmetic:
    # its largest ratios equal the report's, node by node, bit for bit
    model, shape = scale.build("mlp", nodes, mlp_width=width)
    ir = ncet.convert(model, shape)
    x = scale.inputs(shape, samples)
    got = eager_floor.minimal_check(model, eager_floor.prepare(model, ir), x)
    report = ncet.check_exactness(model, ir, x)
    assert got == {e.name: (e.local_ratio, e.e2e_ratio) for e in report.entries}
    if nodes > 200:
        assert max(e.e2e_bound for e in report.entries) > torch.finfo(torch.float32).max


@pytest.mark.parametrize("nodes,width,samples", _MINIMAL_CASES)
def test_minimal_check_on_onnxruntimes_values_computes_what_check_onnx_reports(
        nodes, width, samples):
    # export.py's least check_onnx is a bound only if it does check_onnx's arithmetic
    pytest.importorskip("onnxruntime")
    from benchmarks import export
    from ncet.onnx.runtime import onnxruntime_runner

    model, shape = scale.build("mlp", nodes, mlp_width=width)
    ir = ncet.convert(model, shape)
    exported = ncet.to_onnx(ir)
    x = scale.inputs(shape, samples)
    steps = eager_floor.prepare(model, ir)
    values, _ = onnxruntime_runner(ir, exported, torch.get_num_threads())([x])
    got = eager_floor.minimal_check(model, steps, x, [values[n.name] for _, n, *_ in steps])
    report = ncet.check_onnx(ir, exported, x, threads=torch.get_num_threads())
    assert got == {e.name: (e.local_ratio, e.e2e_ratio) for e in report.entries}
    assert export.minimal_check_onnx(model, ir, exported, x)() == got


def test_eager_floor_script_writes_its_rows(tmp_path):
    out = tmp_path / "floor.json"
    assert eager_floor.main(["--nodes", "21", "--widths", "8", "--samples", "4,8",
                             "--repeats", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["width"], r["samples"]) for r in rows] == [(8, 4), (8, 8)]
    assert all(r[k] > 0 for r in rows for k in ("products_over_floor", "minimal_over_floor",
                                                   "check_over_floor", "check_over_minimal",
                                                   "products_in_check_over_floor"))


def test_products_in_check_times_every_product_and_restores_linear():
    # per Linear: PyTorch's traced layer, the float64 layer node-locally and end to end, the
    # float32 magnitude and carry products, the eager forward; the first layer's inputs are
    # exact, so it has no end-to-end evaluation (it reuses the node-local one) and no carry
    model, shape = scale.build("mlp", 21, mlp_width=16)
    ir = ncet.convert(model, shape)
    linears = sum(n.op_type == "Linear" for n in ir.nodes)
    original = torch.nn.functional.linear
    seconds, calls = eager_floor.products_in_check(model, ir, scale.inputs(shape, 8))
    assert calls == 6 * linears - 2
    assert seconds > 0
    assert torch.nn.functional.linear is original


def test_stages_add_up_to_the_conversion():
    model, shape = scale.build("mlp", 40)
    originals = [vars(owner)[name] for owner, name, _ in scale._TIMED]
    stages, total = scale.stage_seconds(model, shape)
    assert set(stages) == set(scale.STAGES)
    assert all(seconds >= 0 for seconds in stages.values())
    assert sum(stages.values()) == pytest.approx(total)
    assert stages["trace"] > 0 and stages["shape propagation"] > 0 and stages["lifting"] > 0
    # the timing wrappers are gone after the run
    assert [vars(owner)[name] for owner, name, _ in scale._TIMED] == originals
    assert {owner for owner, _, _ in scale._TIMED} >= {ShapePropagation, ConstantLifter}


def test_the_conversion_has_no_clock_of_its_own():
    # the stage timing lives in the benchmark: canonicalize takes no stages= and the walk
    # calls no clock
    import ncet.frontend.canonicalize as canonicalize

    assert "stages" not in inspect.signature(canonicalize.canonicalize).parameters
    assert not hasattr(canonicalize, "StageClock")


def test_fit_exponent_recovers_a_power_law():
    rows = [{"nodes": n, "t": 3e-6 * n ** 1.25} for n in (500, 1000, 4000, 16000)]
    assert abs(scale.fit_exponent(rows, "t") - 1.25) < 1e-9
    assert scale.fit_exponent(rows[:2], "t") is None  # one point at >= 1,000 nodes


def test_script_writes_every_key(tmp_path, capsys):
    out = tmp_path / "scale.json"
    assert scale.main(["--sizes", "30,60", "--repeats", "1", "--export-max-nodes", "0",
                       "--memory-nodes", "0", "--samples", "4", "--mlp-width", "32",
                       "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result) == {"machine", "settings", "conversion", "evaluation", "memory", "fits"}
    assert result["settings"]["mlp_width"] == 32
    assert result["settings"]["samples"] == 4
    assert [r["model"] for r in result["conversion"]] == ["mlp", "mlp", "resnet", "resnet"]
    for row in result["conversion"]:
        for key in ("nodes", "floor_s", "convert_s", "diagnose_s", "convert_over_floor",
                    "diagnose_over_convert", "convert_us_per_node", "floor_wall_s",
                    "convert_wall_s", *(f"stage_us_per_node/{s}" for s in scale.STAGES)):
            assert row[key] > 0 or key.startswith("stage_"), (key, row[key])
    assert len(result["evaluation"]) == 4
    for row in result["evaluation"]:
        assert row["samples"] == 4
        for key in ("evaluate_throughput_ratio/b1", "evaluate_throughput_ratio/b256",
                    "check_s", "check_floor_s", "check_over_floor", "check_s_10x",
                    "check_floor_s_10x", "check_over_floor_10x", "save_s", "load_s",
                    "torch_save_s", "file_bytes", "torch_save_bytes"):
            assert row[key] > 0, key
        for suffix in ("", "_10x"):
            assert row[f"check_over_floor{suffix}"] == pytest.approx(
                row[f"check_s{suffix}"] / row[f"check_floor_s{suffix}"])
    assert set(result["fits"]) == {"mlp", "resnet"}
    printed = capsys.readouterr().out
    assert "convert against its floor" in printed
    assert "mlp 32 wide" in printed and "c/f 10x" in printed


# --- benchmarks/cnn_check.py: torchvision's ResNet-18 (CIFAR), VGG-11-BN and ResNet-50 -------
def _resnet_parameters(block: str, layers: list[int], num_classes: int, cifar_stem: bool) -> int:
    """Parameters of torchvision's ResNet counted from its definition, layer by layer:
    convolutions without bias, BatchNorm weight + bias, a 1x1 conv + BatchNorm downsample
    wherever the stride or the width changes, Linear(512 * expansion, num_classes)."""
    def conv(cin, cout, k):
        return cin * cout * k * k

    def bn(c):
        return 2 * c

    expansion = 1 if block == "basic" else 4
    total = conv(3, 64, 3 if cifar_stem else 7) + bn(64)
    inplanes = 64
    for planes, blocks, stride in zip((64, 128, 256, 512), layers, (1, 2, 2, 2)):
        for i in range(blocks):
            out = planes * expansion
            if block == "basic":
                total += (conv(inplanes, planes, 3) + bn(planes) + conv(planes, planes, 3)
                          + bn(planes))
            else:
                total += (conv(inplanes, planes, 1) + bn(planes) + conv(planes, planes, 3)
                          + bn(planes) + conv(planes, out, 1) + bn(out))
            if i == 0 and (stride != 1 or inplanes != out):
                total += conv(inplanes, out, 1) + bn(out)
            inplanes = out
    return total + inplanes * num_classes + num_classes


def test_cnn_parameter_counts_follow_the_torchvision_definitions():
    # the brief's numbers, recomputed from the layer structure: 11,689,512 (torchvision's
    # resnet18) - 7,680 (7x7 -> 3x3 stem) - 507,870 (1000 -> 10 classes) = 11,173,962, and
    # 25,557,032 (resnet50) - 2,028,510 (1000 -> 10 classes) = 23,528,522
    assert _resnet_parameters("basic", [2, 2, 2, 2], 1000, False) == 11_689_512
    assert _resnet_parameters("bottleneck", [3, 4, 6, 3], 1000, False) == 25_557_032
    assert _resnet_parameters("basic", [2, 2, 2, 2], 10, True) == 11_173_962
    assert _resnet_parameters("bottleneck", [3, 4, 6, 3], 10, False) == 23_528_522


def _count(model, kind) -> int:
    return sum(isinstance(m, kind) for m in model.modules())


@pytest.mark.parametrize("name,parameters,convs,linears,maxpools,output", [
    ("resnet18_cifar", 11_173_962, 20, 1, 0, 10),
    ("vgg11_bn_cifar", 9_225_984 + 512 * 10 + 10, 8, 1, 5, 10),
    ("resnet50", 23_528_522, 53, 1, 1, 10)])
def test_cnn_models_have_the_torchvision_architecture(name, parameters, convs, linears,
                                                      maxpools, output):
    from benchmarks import cnn_check
    nn = torch.nn
    model, shape = cnn_check.build(name)
    assert sum(p.numel() for p in model.parameters()) == parameters
    assert _count(model, nn.Conv2d) == convs
    assert _count(model, nn.BatchNorm2d) == convs  # one BatchNorm per convolution
    assert _count(model, nn.Linear) == linears
    assert _count(model, nn.MaxPool2d) == maxpools
    assert _count(model, nn.ReLU) > 0
    assert not any(m.inplace for m in model.modules() if isinstance(m, nn.ReLU))
    assert not model.training
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert all(float(m.running_mean.abs().max()) > 0 for m in bns)
    assert all(0.5 <= float(m.running_var.min()) and float(m.running_var.max()) <= 1.5
               and float(m.running_var.std()) > 0 for m in bns)
    keys = set(model.state_dict())
    if name.startswith("resnet"):  # torchvision's state-dict names
        assert {"conv1.weight", "bn1.running_var", "layer1.0.conv1.weight",
                "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_mean",
                "layer4.1.bn2.weight", "fc.weight", "fc.bias"} <= keys
        # ResNet-50's first block widens 64 -> 256 channels: a downsample without a stride
        assert any(k.startswith("layer1.0.downsample") for k in keys) == (name == "resnet50")
        assert ("layer4.2.conv3.weight" in keys) == (name == "resnet50")
        stem = model.conv1
        assert (stem.kernel_size, stem.stride, stem.padding) == (
            ((7, 7), (2, 2), (3, 3)) if name == "resnet50" else ((3, 3), (1, 1), (1, 1)))
        first = model.layer2[0]  # Bottleneck (v1.5): the stride on the 3x3 conv, conv2
        assert (first.conv2 if name == "resnet50" else first.conv1).stride == (2, 2)
    else:  # make_layers(cfgs["A"], batch_norm=True): conv-BN-ReLU triples and 5 max pools
        assert len(model.features) == 29
        assert [i for i, m in enumerate(model.features) if isinstance(m, nn.Conv2d)] == \
            [0, 4, 8, 11, 15, 18, 22, 25]
        assert [m.out_channels for m in model.features if isinstance(m, nn.Conv2d)] == \
            [64, 128, 256, 256, 512, 512, 512, 512]
        assert sum(p.numel() for p in model.features.parameters()) == 9_225_984
    with torch.no_grad():
        assert tuple(model(scale.inputs(shape, 2)).shape) == (2, output)


def test_cnn_check_quick_writes_every_row(tmp_path, capsys):
    import math

    from benchmarks import cnn_check
    out = tmp_path / "cnn.json"
    assert cnn_check.main(["--quick", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["failures"] == []
    assert {"date", "cpu", "nproc", "git_head", "total_s"} <= set(result["machine"])
    rows = result["rows"]
    assert [r["model"] for r in rows] == list(cnn_check.MODELS)
    keys = ("fx_nodes", "samples", "convert_s", "floor_s", "check_s", "check_over_floor",
            "probes_ms", "probes_over_check_pct", "check_over_floor_cpu",
            "probes_in_check_ms")
    for row in rows:
        assert row["samples"] == 8
        assert row["verdict"].startswith("exact within the certified bounds")
        for key in keys:
            assert math.isfinite(row[key]) and row[key] > 0, (row["model"], key, row[key])
        assert row["check_over_floor"] == pytest.approx(row["check_s"] / row["floor_s"])
    printed = capsys.readouterr().out
    assert "| model | FX nodes | samples |" in printed
    assert all(f"| {name} |" in printed for name in cnn_check.MODELS)


def test_cnn_check_runs_as_a_script():
    out = subprocess.run([sys.executable, os.path.join(_ROOT, "benchmarks", "cnn_check.py"),
                          "--help"], capture_output=True, text=True, cwd="/", check=True)
    assert "usage:" in out.stdout and "--quick" in out.stdout


def test_corpus_import_prints_the_docs_table(tmp_path, capsys):
    """benchmarks/corpus_import.py on a corpus of two tiny files: one imported and
    certified, one refused; the markdown table and the JSON name both."""
    import onnx

    from benchmarks import corpus_import
    from tests.onnx_models import dense, node

    (tmp_path / "a" / "onnx").mkdir(parents=True)
    onnx.save(dense(["N", 3], [node("Relu", ["x"], ["y"])], "y", {}),
              tmp_path / "a" / "onnx" / "relu.onnx")
    onnx.save(dense(["N", 3], [node("Sigmoid", ["x"], ["y"])], "y", {}),
              tmp_path / "a" / "onnx" / "sigmoid.onnx")
    out = tmp_path / "out.json"
    assert corpus_import.main(["--corpus", str(tmp_path), "--check", "--no-times",
                               "--markdown", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| `a/onnx/relu.onnx` | imported, certified | 1 | 1 |  |" in text
    assert "| `a/onnx/sigmoid.onnx` | refused | 1 |  | `onnx-unsupported-op`: Sigmoid |" in text
    assert "1 of 2 imported, 1 certified" in text
    rows = json.loads(out.read_text())["rows"]
    assert [r["imported"] for r in rows] == [True, False]


# --- benchmarks/onnx_import.py: from_onnx against onnxruntime's session and onnx2torch -----
_IMPORT_NETWORKS = {  # network -> (outcome, onnx2torch's failure: None when it converts)
    "acasxu/onnx/ACASXU_run2a_1_1_batch_2000.onnx": ("imported", "NotImplementedError"),
    "reach_prob_density/onnx/gcas.onnx": ("imported", None),
    "eran/nets/ffnnSIGMOID__Point_6x200.onnx": ("refused", None),  # Sigmoid
}


def test_onnx_import_prints_a_row_per_network(tmp_path, capsys):
    # three small corpus networks, one timed run each: the table's structure, the outcomes,
    # onnx2torch's failure by its class, ratios that are the quotients of the times; no time
    # is asserted
    import importlib.util
    import math

    pytest.importorskip("onnxruntime")
    from benchmarks import onnx_import
    from tests.corpus import corpus_root

    out = tmp_path / "import.json"
    assert onnx_import.main(["--corpus", str(corpus_root()), "--networks",
                             ",".join(_IMPORT_NETWORKS), "--rounds", "1", "--check",
                             "--check-samples", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [r["network"] for r in rows] == sorted(_IMPORT_NETWORKS)
    installed = importlib.util.find_spec("onnx2torch") is not None
    for r in rows:
        outcome, failure = _IMPORT_NETWORKS[r["network"]]
        assert r["outcome"] == outcome and r["nodes"] > 0
        assert ("onnx-unsupported-op" in r["refusals"]) == (outcome == "refused")
        for key in ("ncet_s", "ort_s", "ort_noopt_s", "ncet_over_ort", "ncet_over_ort_noopt"):
            assert math.isfinite(r[key]) and r[key] > 0, (r["network"], key)
        assert r["ncet_over_ort"] == pytest.approx(r["ncet_s"] / r["ort_s"])
        assert r["ncet_over_ort_noopt"] == pytest.approx(r["ncet_s"] / r["ort_noopt_s"])
        assert r["onnx2torch_failure"] == (failure if installed else "not installed")
        if r["onnx2torch_failure"] is None:
            assert r["ncet_over_onnx2torch"] == pytest.approx(r["ncet_s"] / r["onnx2torch_s"])
        else:
            assert r["onnx2torch_s"] is None and r["ncet_over_onnx2torch"] is None
        assert set(r["stages"]) == set(onnx_import.STAGES)
        assert sum(r["stages"].values()) == pytest.approx(1)
    for key, peer in result["summary"].items():
        timed = [r for r in rows if r[key] is not None]
        assert peer["networks"] == len(timed)
        assert peer["met"] == sum(r[key] <= 1 for r in timed)
        assert peer["geomean"] == pytest.approx(
            math.prod(r[key] for r in timed) ** (1 / len(timed)))
        assert peer["worst"][1] == max(r[key] for r in timed)
    assert [(c["network"], c["samples_per_scale"], c["ok"]) for c in result["checks"]] == [
        (name, 1, True) for name in sorted(_IMPORT_NETWORKS)
        if _IMPORT_NETWORKS[name][0] == "imported"]
    assert all(c["check_over_floor"] > 0 for c in result["checks"])
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith("| ")]
    assert lines[0] == "| " + " | ".join(onnx_import.COLUMNS) + " |"
    assert [line.split(" | ")[0][2:] for line in lines[1:]] == sorted(_IMPORT_NETWORKS)
    assert all(line.count(" | ") == len(onnx_import.COLUMNS) - 1 for line in lines)
    assert "against onnxruntime's session (default options):" in printed
    assert "torchvision" not in sys.modules or importlib.util.find_spec("torchvision")


def test_blocked_medians_times_the_last_runs_of_each_block():
    from benchmarks import import_timing

    calls = {"a": 0, "b": 0}

    def count(name):
        def fn():
            calls[name] += 1
        return fn

    t = import_timing.blocked_medians({"a": count("a"), "b": count("b")}, rounds=2, block=3,
                                      lead=2)
    assert calls == {"a": 10, "b": 10}
    assert set(t) == {"a", "b", "a/wall", "b/wall"} and all(v >= 0 for v in t.values())


def test_stage_shares_add_up_and_restore_the_importer(tmp_path):
    # the wrappers exist for the call only; the shares cover the call
    from onnx import numpy_helper

    from benchmarks import import_timing
    from ncet.onnx import importer

    parts = import_timing._timed_parts()
    assert {stage for _, _, stage in parts} == set(import_timing.STAGES) - {"walk"}
    originals = [vars(owner)[name] for owner, name, _ in parts]
    path = tmp_path / "mlp.onnx"
    ncet.to_onnx(ncet.convert(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()),
                              (4,)), str(path))
    shares = import_timing.stage_shares(lambda: ncet.from_onnx(str(path)), runs=3)
    assert set(shares) == set(import_timing.STAGES)
    assert sum(shares.values()) == pytest.approx(1) and shares["read"] > 0
    assert [vars(owner)[name] for owner, name, _ in parts] == originals
    assert numpy_helper.to_array is originals[1] and importer.read_model is originals[0]


def test_onnx_import_says_when_the_corpus_is_missing(tmp_path, capsys):
    from benchmarks import onnx_import

    assert onnx_import.main(["--corpus", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "the VNN-COMP corpus is not at" in err and "../shared/vnncomp" in err
