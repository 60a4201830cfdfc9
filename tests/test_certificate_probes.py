"""The certificate never rests on an unprobed assumption: arithmetic outside the declared model
is found where it runs (every intra-op thread, the rounding mode, oneDNN's math mode, the
low-precision kernels) and makes the report NOT CERTIFIED with the reason; and nothing is
certified that was not checked (no samples, no chunk, both checks off, inputs that do not
match the IR), nor is the caller's input written.

Flushing of subnormals (on a thread, in low-precision kernels, in a reduced-precision mode)
is inside the model: the bounds carry the underflow term, the report says so, and seeded
faults are still found. The cases that change a thread's floating-point state run in a fresh
interpreter: an OpenMP worker keeps the state it started with for the life of the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import ncet
from ncet.exactness import probes
from ncet.exactness.arithmetic import read_arithmetic_model
from ncet.examples import load_example

PRELUDE = """
import json, torch, ncet
from torch import nn

class Scale(nn.Module):
    def forward(self, x):
        return x * 1e30

def verdict(report):
    return {"ok": report.ok, "certified": report.arithmetic.certified,
            "summary": report.summary()}
"""


def isolated(*parts: str, env: dict[str, str] | None = None) -> dict:
    """Run the code `parts` (after PRELUDE) in a fresh interpreter, with `env` added to the
    environment; the code prints one JSON object last."""
    code = "\n".join(textwrap.dedent(part) for part in (PRELUDE, *parts))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


SUBNORMAL_CHECK = """
model = Scale().eval()
ir = ncet.convert(model, (8,))
x = torch.full((64, 8), 6e-39)  # subnormal float32: x * 1e30 = 6e-9
report = ncet.check_exactness(model, ir, x)
"""


# --- 1. flush-to-zero / denormals-are-zero on the intra-op worker threads ---------------------


def test_flush_to_zero_left_on_a_worker_thread_is_certified_with_the_underflow_term():
    """The flush is real (forced: some x * 1e30 read x as 0 on a worker), and the bounds carry
    the underflow term instead of withholding the certificate; the scalar changed by half a
    bf16 ulp is still found in the same process."""
    found = isolated("""
        torch.set_num_threads(2)
        torch.set_flush_denormal(True)
        _ = torch.randn(1 << 20) * 2       # the OpenMP workers start, and copy the state
        torch.set_flush_denormal(False)    # ... which resets the calling thread only
    """, SUBNORMAL_CHECK, """
        big = torch.full((1 << 18,), 6e-39)
        flushed = bool(((big * 1e30) == 0).any())
        ir_node = next(n for n in ir.nodes if n.op_type == "ElementwiseAffine")
        import dataclasses
        faulty = ncet.GraphIR(tuple(dataclasses.replace(n, attrs={**n.attrs, "scalar":
            1e30 * (1 + 2 ** -8)}) if n is ir_node else n for n in ir.nodes), ir.constants)
        # at a normal scale: where the values are subnormal the term hides any fault
        fault = ncet.check_exactness(model, faulty, torch.cat([x, torch.randn(64, 8)]))
        print(json.dumps({**verdict(report), "flushed": flushed,
                          "fault": fault.first_violation.name if fault.first_violation
                          else None, "node": ir_node.name}))
    """)
    assert found["flushed"], "the workers did not flush: the test would prove nothing"
    assert found["ok"] and found["certified"], found["summary"]
    assert "flush-to-zero seen" in found["summary"] and "intra-op threads" in found["summary"]
    assert "denormals-are-zero" in found["summary"]
    assert found["fault"] == found["node"]


def test_the_same_check_with_ieee_subnormals_is_certified_without_the_term():
    found = isolated("torch.set_num_threads(2)", SUBNORMAL_CHECK,
                     "print(json.dumps(verdict(report)))")
    assert found["ok"] and found["certified"], found["summary"]
    assert "flush-to-zero seen" not in found["summary"]


def test_a_subnormal_weight_under_flushing_is_not_certified(monkeypatch):
    """A subnormal weight read as zero changes a product by |w| |x|, which no term bounds."""
    monkeypatch.setattr(probes, "probe_subnormals",
                        lambda: "denormals-are-zero is set on the calling thread (forced)")
    model = nn.Sequential(nn.Linear(4, 2)).eval()
    with torch.no_grad():
        model[0].weight[0, 0] = 1e-40
    ir = ncet.convert(model, (4,))
    report = ncet.check_exactness(model, ir, samples_per_scale=2)
    assert not report.ok and not report.arithmetic.certified
    assert "subnormal constants (_0.weight)" in report.summary()
    from ncet.exactness.enclosure import enclose
    with pytest.raises(RuntimeError, match=r"subnormal constants \(_0.weight\)"):
        enclose(ir, torch.ones(1, 4))


def test_float16_weights_subnormal_in_float16_are_certified_under_flushing(monkeypatch):
    """CPU float16 kernels compute in float32 (opmath), where a float16 subnormal weight is
    a normal number that no flag flushes: a default-initialised float16 Linear (which holds
    some) is certified under flushing; a bfloat16 subnormal (subnormal in float32 too) and a
    float16 one where the float16 kernels were seen flushing their operands are not."""
    monkeypatch.setattr(probes, "probe_subnormals",
                        lambda: "denormals-are-zero is set on the calling thread (forced)")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 10)).eval().half()
    w = model[0].weight
    assert bool(((w.abs() < torch.finfo(torch.float16).tiny) & (w != 0)).any())
    ir = ncet.convert(model, (256,), dtype=torch.float16)
    report = ncet.check_exactness(model, ir, samples_per_scale=2)
    assert report.ok and report.arithmetic.certified, report.summary()
    monkeypatch.setattr(probes, "probe_low_precision_subnormals",
                        lambda dtype: f"{dtype} matrix products flush (forced)")
    report = ncet.check_exactness(model, ir, samples_per_scale=2)
    assert not report.arithmetic.certified and "subnormal constants (_0.weight)" in \
        report.summary()
    monkeypatch.setattr(probes, "probe_low_precision_subnormals", lambda dtype: None)
    bf16 = nn.Sequential(nn.Linear(4, 2)).eval().bfloat16()
    with torch.no_grad():
        bf16[0].weight[0, 0] = 2.0 ** -130
    report = ncet.check_exactness(bf16, ncet.convert(bf16, (4,), dtype=torch.bfloat16),
                                  samples_per_scale=2)
    assert not report.arithmetic.certified and "subnormal constants (_0.weight)" in \
        report.summary()


def test_float16_subnormal_weights_are_not_flushed_by_denormals_are_zero():
    """The fact behind the previous test, on this host: with denormals-are-zero on every
    thread a float16 Linear, Conv2d and product keep a weight of 2^-20 (float16 subnormal),
    and the check certifies them."""
    found = isolated("""
        torch.set_num_threads(2)
        torch.set_flush_denormal(True)
        _ = torch.randn(1 << 20) * 2       # the OpenMP workers start, and copy the state
        lin = nn.Linear(8, 1, bias=False).half().eval()
        conv = nn.Conv2d(1, 1, 2, bias=False).half().eval()
        with torch.no_grad():
            lin.weight.fill_(2.0 ** -20)
            conv.weight.fill_(2.0 ** -20)
        x = torch.full((64, 8), 2.0 ** 10, dtype=torch.float16)
        image = torch.full((64, 1, 3, 3), 2.0 ** 10, dtype=torch.float16)
        with torch.no_grad():
            kept = [float(lin(x).min()) == 2.0 ** -7, float(conv(image).min()) == 2.0 ** -8,
                    float((x * lin.weight[0]).min()) == 2.0 ** -10]
        reports = [ncet.check_exactness(lin, ncet.convert(lin, (8,), dtype=torch.float16), x),
                   ncet.check_exactness(conv, ncet.convert(conv, (1, 3, 3),
                                                          dtype=torch.float16), image)]
        print(json.dumps({"kept": kept, "flush": [r.arithmetic.flush for r in reports],
                          "verdicts": [verdict(r) for r in reports]}))
    """)
    assert all(found["kept"]), found["kept"]
    assert all(found["flush"])
    for got in found["verdicts"]:
        assert got["ok"] and got["certified"], got["summary"]


# --- 3, 4, 5. reduced precision: PyTorch's flags, both APIs, and oneDNN's environment --------


@pytest.mark.parametrize(("setting", "named"), [
    ("torch.set_float32_matmul_precision('medium')", "float32_matmul_precision=medium"),
    ("torch.backends.mkldnn.conv.fp32_precision = 'bf16'", "mkldnn.conv.fp32_precision=bf16"),
    ("torch.backends.mkldnn.matmul.fp32_precision = 'bf16'",
     "mkldnn.matmul.fp32_precision=bf16"),
    ("torch.backends.mkldnn.fp32_precision = 'bf16'", "mkldnn.matmul.fp32_precision=bf16"),
])
def test_reduced_precision_modes_carry_the_underflow_term_and_never_crash(setting, named):
    """oneDNN flushes subnormal float32 operands in these modes: the widened bounds carry the
    underflow term and are certified, saying which arithmetic they assumed."""
    found = isolated(setting, SUBNORMAL_CHECK, "print(json.dumps(verdict(report)))")
    assert found["ok"] and found["certified"], found["summary"]
    assert named in found["summary"] and "flush-to-zero seen" in found["summary"]


def test_the_new_precision_api_set_to_ieee_is_read_without_crashing():
    found = isolated("torch.backends.fp32_precision = 'ieee'", SUBNORMAL_CHECK,
                     "print(json.dumps(verdict(report)))")
    assert found["ok"] and found["certified"], found["summary"]


@pytest.mark.parametrize(("variable", "value", "certified"), [
    ("ONEDNN_DEFAULT_FPMATH_MODE", "BF16", True), ("DNNL_DEFAULT_FPMATH_MODE", "bf16", True),
    ("ONEDNN_DEFAULT_FPMATH_MODE", "TF32", True),
    ("ONEDNN_DEFAULT_FPMATH_MODE", "F16", False), ("ONEDNN_DEFAULT_FPMATH_MODE", "ANY", False),
    ("ONEDNN_DEFAULT_FPMATH_MODE", "FP8", False),
])
def test_onednn_math_mode_from_the_environment_is_read(monkeypatch, variable, value,
                                                       certified):
    """Modes whose operands keep float32's exponent range (bf16, tf32) are certified with
    the widened bound and the underflow term; float16 operands (F16, ANY) and an unknown
    mode are not (a float16 operand below 6.1e-5 is subnormal, above 65504 inf)."""
    monkeypatch.setenv(variable, value)  # read here; oneDNN itself never sees it in this process
    arithmetic = read_arithmetic_model()
    assert arithmetic.certified == certified, arithmetic.describe()
    assert arithmetic.operand_u > 0 and arithmetic.flush
    assert f"{variable}={value}" in arithmetic.describe()
    if not certified:
        assert "exponent range" in arithmetic.describe()


def test_a_cnn_under_onednns_bf16_math_mode_is_certified_and_a_fault_still_found():
    """In a fresh interpreter started with the variable, where oneDNN may act on it: the
    widened bounds with the underflow term certify lenet, and a one-bf16-ulp fault of an
    elementwise constant (which the mode does not widen) is still found."""
    found = isolated("""
        import dataclasses
        from ncet.examples import load_example
        model, shapes = load_example("lenet")
        report = ncet.check_exactness(model, ncet.convert(model, *shapes), samples_per_scale=2)

        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(16, 8)
                self.register_buffer("c", torch.ones(8))
            def forward(self, x):
                return torch.relu(self.lin(x) * self.c)

        torch.manual_seed(0)
        scaled = Scaled().eval()
        ir = ncet.convert(scaled, (16,))
        clean = ncet.check_exactness(scaled, ir, samples_per_scale=8)
        name = next(n.attrs["constant"] for n in ir.nodes if n.op_type == "ElementwiseAffine")
        faulty = ncet.GraphIR(ir.nodes, {**ir.constants,
                                         name: torch.full((8,), 1 + 2 ** -7)})
        fault = ncet.check_exactness(scaled, faulty, samples_per_scale=8)
        print(json.dumps({**verdict(report), "clean": clean.ok,
                          "fault": getattr(fault.first_violation, "op_type", None)}))
    """, env={"ONEDNN_DEFAULT_FPMATH_MODE": "BF16"})
    assert found["ok"] and found["certified"], found["summary"]
    assert "ONEDNN_DEFAULT_FPMATH_MODE=BF16" in found["summary"]
    assert "flush-to-zero seen" in found["summary"]
    assert found["clean"] and found["fault"] == "ElementwiseAffine"


def test_strict_onednn_math_mode_is_ieee(monkeypatch):
    monkeypatch.setenv("ONEDNN_DEFAULT_FPMATH_MODE", "STRICT")
    assert read_arithmetic_model().certified


# --- 6. the rounding mode ----------------------------------------------------------------------


def test_directed_rounding_is_not_certified():
    found = isolated("""
        import ctypes, ctypes.util
        libm = ctypes.CDLL(ctypes.util.find_library("m"))
        FE_UPWARD, FE_TONEAREST = 0x800, 0x0  # x86-64 glibc
        model, x = nn.Sequential(nn.Linear(4, 4)).eval(), torch.randn(16, 4)
        ir = ncet.convert(model, (4,))
        torch.set_num_threads(2)
        _ = torch.randn(1 << 20) * 2  # the workers start now, rounding to nearest
        libm.fesetround(FE_UPWARD)    # on the calling thread only
        upward = verdict(ncet.check_exactness(model, ir, x))
        libm.fesetround(FE_TONEAREST)
        nearest = verdict(ncet.check_exactness(model, ir, x))
        print(json.dumps({"upward": upward, "nearest": nearest}))
    """)
    assert not found["upward"]["certified"] and not found["upward"]["ok"]
    assert "rounding mode" in found["upward"]["summary"]
    assert found["nearest"]["certified"] and found["nearest"]["ok"]


def test_the_probes_find_nothing_in_ieee_arithmetic():
    assert probes.probe_subnormals() is None and probes.probe_rounding() is None


# --- 2. low-precision kernels that flush subnormal operands ------------------------------------


def bf16_linear():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 8)).to(torch.bfloat16).eval()
    return model, ncet.convert(model, (16,), dtype=torch.bfloat16)


def test_a_low_precision_graph_on_kernels_that_flush_is_certified_with_the_term(monkeypatch):
    """The probe's logic, on any host: a flushing bf16 product turns on the underflow term,
    and the report says so."""
    seen = []

    def flushing(dtype):
        seen.append(dtype)
        return "bfloat16 matrix products flush subnormal operands to zero (probe)"

    monkeypatch.setattr(probes, "probe_low_precision_subnormals", flushing)
    model, ir = bf16_linear()
    report = ncet.check_exactness(model, ir, samples_per_scale=2)
    assert set(seen) == {torch.bfloat16}  # before the model runs, and again after it ran
    assert report.ok and report.arithmetic.certified and report.arithmetic.flush
    assert "flush subnormal operands" in report.summary()
    # the assumed arithmetic in the text, the HTML and the JSON of `ncet check --json`
    assert "flush-to-zero seen" in report.summary().splitlines()[0]
    assert "assumed: flush-to-zero seen, underflow term 2^-126 per product" in \
        report._repr_html_()
    from ncet.cli.records import exactness_record
    record = exactness_record(report)
    assert record["arithmetic"]["flush"] and record["arithmetic"]["certified"]
    assert any(n.startswith("flush-to-zero seen") for n in record["arithmetic"]["notes"])
    float32 = load_example("mlp")
    seen.clear()
    ncet.check_exactness(float32[0], ncet.convert(*float32[:1], *float32[1]),
                         samples_per_scale=2)
    assert seen == [], "a float32 graph does not need the low-precision probe"


def test_this_hosts_bf16_kernels_are_probed_and_certified():
    """On a host whose bf16 kernels flush, the term is on; on one that keeps subnormals, it
    is off; a clean bf16 Linear is certified either way."""
    flushes = probes.probe_low_precision_subnormals(torch.bfloat16) is not None
    model, ir = bf16_linear()
    report = ncet.check_exactness(model, ir, samples_per_scale=32)
    assert report.ok and report.arithmetic.certified, report.summary()
    assert report.arithmetic.flush == flushes


# --- 13, 14. nothing certified that was not checked; inputs validated, never written ----------


@pytest.fixture(scope="module")
def mlp():
    model, shapes = load_example("mlp")
    return model, ncet.convert(model, *shapes), shapes


@pytest.mark.parametrize(("options", "says"), [
    ({"chunk_size": -1}, "chunk_size"),
    ({"chunk_size": 0}, "chunk_size"),
    ({"local": False, "end_to_end": False}, "check nothing"),
    ({"samples_per_scale": 0}, "samples_per_scale"),
])
def test_options_that_check_nothing_are_value_errors(mlp, options, says):
    model, ir, _ = mlp
    with pytest.raises(ValueError, match=says):
        ncet.check_exactness(model, ir, **options)


def test_inputs_are_validated_against_the_ir(mlp):
    model, ir, shapes = mlp
    (shape,) = shapes
    good = torch.randn(4, *shape)
    with pytest.raises(ValueError, match="no samples"):
        ncet.check_exactness(model, ir, torch.randn(0, *shape))
    with pytest.raises(ValueError, match="per-sample shape"):
        ncet.check_exactness(model, ir, torch.randn(4, shape[0] + 1))
    with pytest.raises(ValueError, match="2 input"):
        ncet.check_exactness(model, ir, good, good)
    with pytest.raises(ValueError, match="float64"):
        ncet.check_exactness(model, ir, good.double())
    with pytest.raises(TypeError, match="GraphIR"):
        ncet.check_exactness(model, "net.ncet", good)
    with pytest.raises(TypeError, match="not a tensor"):
        ncet.check_exactness(model, ir, good.tolist())


@pytest.mark.parametrize(("options", "error", "says"), [
    ({"samples_per_scale": "8"}, TypeError, "samples_per_scale must be an int"),
    ({"samples_per_scale": 2.0}, TypeError, "samples_per_scale must be an int"),
    ({"seed": True}, TypeError, "seed must be an int"),
    ({"chunk_size": 1.5}, TypeError, "chunk_size must be an int"),
    ({"keep_samples": -1}, ValueError, "keep_samples=-1"),
    ({"keep_samples": 10**30}, ValueError, "keep_samples=1e\\+30: give an int from 0"),
    ({"seed": 2**64}, ValueError, "seed=1.8.*give an int from 0"),
    ({"seed": -1}, ValueError, "seed=-1: give an int from 0"),
    ({"local": 1}, TypeError, "local must be True or False"),
    ({"end_to_end": "yes"}, TypeError, "end_to_end must be True or False"),
], ids=["samples as str", "samples as float", "seed as bool", "chunk as float",
        "negative keep", "huge keep", "huge seed", "negative seed", "local as int",
        "end_to_end as str"])
def test_options_of_the_wrong_type_are_named(mlp, options, error, says):
    model, ir, _ = mlp
    with pytest.raises(error, match=says):
        ncet.check_exactness(model, ir, **options)


def test_numpy_integers_are_ints(mlp):
    import numpy as np  # a dependency of pandas, which the test extras install
    model, ir, _ = mlp
    assert ncet.check_exactness(model, ir, samples_per_scale=np.int64(2),
                                chunk_size=np.int32(3), seed=np.uint8(1)).ok


def test_inputs_off_the_cpu_are_refused(mlp):
    model, ir, shapes = mlp
    with pytest.raises(ValueError, match="input 0 is a torch.strided tensor on meta"):
        ncet.check_exactness(model, ir, torch.randn(4, *shapes[0], device="meta"))
    with pytest.raises(ValueError, match="input 0 is a torch.sparse_coo tensor"):
        ncet.check_exactness(model, ir, torch.randn(4, *shapes[0]).to_sparse())


def test_a_relu_model_with_inputs_of_the_wrong_shape_is_refused():
    model = nn.Sequential(nn.ReLU()).eval()
    ir = ncet.convert(model, (4,))
    with pytest.raises(ValueError, match="per-sample shape"):
        ncet.check_exactness(model, ir, torch.randn(3, 5))


def test_the_callers_input_is_never_written():
    class AddsIntoItsInput(nn.Module):
        def forward(self, x):
            x += 1  # in place on the caller's tensor in eager PyTorch; FX traces x = x + 1
            return x.relu()

    model = AddsIntoItsInput().eval()
    ir = ncet.convert(model, (4,))
    x = torch.randn(8, 4)
    before = x.clone()
    report = ncet.check_exactness(model, ir, x)
    assert torch.equal(x, before)
    assert report.ok, report.summary()


def test_a_model_changed_since_convert_is_a_value_error():
    model, shapes = load_example("mlp")
    ir = ncet.convert(model, *shapes)
    model = model.double()
    with pytest.raises(ValueError, match=r"model.double\(\)"):
        ncet.check_exactness(model, ir, samples_per_scale=2)


def test_ncet_check_states_the_assumed_arithmetic():
    """`ncet check` under oneDNN's bf16 math mode (which flushes subnormal operands): the
    verdict and the JSON say which arithmetic the certificate assumed."""
    env = {**os.environ, "ONEDNN_DEFAULT_FPMATH_MODE": "BF16"}
    command = [sys.executable, "-m", "ncet", "check", "lenet", "--samples", "2"]
    text = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert text.returncode == 0, text.stderr[-2000:]
    verdict = next(line for line in text.stdout.splitlines() if line.startswith("exact within"))
    assert "assumed: flush-to-zero seen, underflow term 2^-126 per product" in verdict
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)["exactness"]
    assert record["ok"] and record["arithmetic"]["flush"] and record["arithmetic"]["certified"]


@pytest.mark.parametrize("name", ["mlp", "lenet", "residual_cnn"])
def test_the_bundled_models_in_bfloat16_are_certified(name):
    """On any host: where the bf16 kernels flush, with the underflow term (the verdict says
    so); where they do not, without it."""
    model, shapes = load_example(name)
    model = model.to(torch.bfloat16)
    report = ncet.check_exactness(model, ncet.convert(model, *shapes, dtype=torch.bfloat16),
                                  samples_per_scale=8)
    assert report.ok and report.arithmetic.certified, report.summary()
    flushes = probes.probe_low_precision_subnormals(torch.bfloat16) is not None
    assert report.arithmetic.flush == flushes
    assert ("flush-to-zero seen" in report.summary().splitlines()[0]) == flushes


# --- 3. arithmetic the model itself changes while it is checked ---------------------------------


def test_a_forward_that_turns_flushing_on_is_not_certified():
    """The arithmetic is read before the model runs: a forward() that sets flush-to-zero
    (weights 2^100, subnormal inputs 2^-140: PyTorch gives 0, the exact value is 3.6e-12)
    must not pass as exact under the bounds of IEEE subnormals. Run in a fresh interpreter:
    the flag set inside forward() would stay on this process's threads."""
    found = isolated("""
        torch.set_num_threads(1)
        class SetsFlush(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1, bias=False)
                with torch.no_grad():
                    self.fc.weight.fill_(2.0 ** 100)
            def forward(self, x):
                self.supported = torch.set_flush_denormal(True)
                return self.fc(x)
        model = SetsFlush().eval()
        ir = ncet.convert(model, (4,))
        torch.set_flush_denormal(False)
        x = torch.full((8, 4), 2.0 ** -140)
        x[4:] = torch.randn(4, 4)
        try:
            report = ncet.check_exactness(model, ir, x, chunk_size=2)
        finally:
            torch.set_flush_denormal(False)
        print(json.dumps({**verdict(report), "supported": model.supported}))
    """)
    if not found["supported"]:  # a CPU without FTZ/DAZ: nothing changed, nothing to refuse
        assert found["ok"], found["summary"]
        return
    assert not found["ok"] and not found["certified"], found["summary"]
    assert found["summary"].startswith("NOT CERTIFIED: the model changed the floating-point "
                                       "environment during the check"), found["summary"]
    assert "flush_denormal: False -> True" in found["summary"]


class _SetsPrecision(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        torch.set_float32_matmul_precision("medium")
        return self.fc(x)


@pytest.mark.parametrize("chunk_size", [None, 4])
def test_a_forward_that_lowers_the_matmul_precision_is_not_certified(chunk_size):
    """Any CPU: a precision flag set by forward() after the flags were read (one chunk, or
    several: read again after the first and the last) leaves the report NOT CERTIFIED,
    naming the flag; the caller's state is left as the model set it."""
    model = _SetsPrecision().eval()
    ir = ncet.convert(model, (4,))
    try:
        torch.set_float32_matmul_precision("highest")
        report = ncet.check_exactness(model, ir, samples_per_scale=4, chunk_size=chunk_size)
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision("highest")
    assert not report.ok and not report.arithmetic.certified
    assert "float32_matmul_precision: highest -> medium" in report.summary()
    assert "changed the floating-point environment during the check" in report.summary()
