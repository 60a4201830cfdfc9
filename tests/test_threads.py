"""NCET under threads: concurrent calls give the results of sequential ones, and a trace in
one thread never disturbs eager calls of any model in another (issue 21, item 1)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import pytest
import torch
from torch import nn

import ncet
from ncet.examples import load_example

TIMEOUT = 120  # seconds a thread may take before the test calls it hung


def file_bytes(ir, tmp_path, name: str) -> bytes:
    path = tmp_path / name
    ncet.save(ir, path)
    return path.read_bytes()


def run_threads(targets) -> list:
    """Run each callable in its own thread; return their results, re-raising the first
    exception (a hung thread fails the test)."""
    results: list = [None] * len(targets)
    errors: list = []

    def body(i, target):
        try:
            results[i] = target()
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i, t), daemon=True)
               for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]
    return results


def module_call_is_pristine() -> bool:
    """nn.Module's __call__ and __getattr__ are PyTorch's own, not a tracer's patch."""
    return (nn.Module.__call__ is nn.Module._wrapped_call_impl
            and nn.Module.__dict__["__getattr__"].__qualname__ == "Module.__getattr__")


class PausesWhileTraced(nn.Module):
    """A model whose forward() stops halfway through its trace until told to go on, so that
    another thread can act while FX has nn.Module patched."""

    def __init__(self, paused: threading.Event, resume: threading.Event):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 3)
        self.paused, self.resume = paused, resume

    def forward(self, x):
        y = self.fc1(x).relu()
        if isinstance(x, torch.fx.Proxy):
            self.paused.set()
            assert self.resume.wait(TIMEOUT), "never resumed"
        return self.fc2(y)


@contextlib.contextmanager
def converting_mid_trace():
    """For the body, another thread converting a `PausesWhileTraced`, held inside FX's
    trace; yields that model and a dict that gets the GraphIR ("ir") once the body ends."""
    paused, resume = threading.Event(), threading.Event()
    model = PausesWhileTraced(paused, resume).eval()
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("ir", ncet.convert(model, (4,))),
                              daemon=True)
    thread.start()
    try:
        assert paused.wait(TIMEOUT), "the trace never reached forward()"
        yield model, result
    finally:
        resume.set()
        thread.join(TIMEOUT)


def test_eager_calls_in_another_thread_are_undisturbed_mid_trace():
    """While one thread is inside FX's trace (nn.Module patched), another thread calls
    models eagerly, including a submodule of the very model being traced: each call runs
    as PyTorch runs it, and nothing of it leaks into the trace."""
    torch.manual_seed(0)
    other, _ = load_example("residual_cnn")
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = other(x)
    with converting_mid_trace() as (traced, result):
        with torch.no_grad():
            during = other(x)
            fc2 = traced.fc2(torch.ones(1, 4))
        assert isinstance(during, torch.Tensor) and torch.equal(during, expected)
        assert isinstance(fc2, torch.Tensor) and fc2.shape == (1, 3)
    ir = result["ir"]
    assert [n.op_type for n in ir.nodes] == ["Input", "Linear", "ReLU", "Linear", "Output"]
    assert module_call_is_pristine()


def test_a_failed_trace_leaves_pytorch_unpatched():
    class Fails(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: FX raises mid-trace
                return x
            return -x

    with pytest.raises(ncet.TraceError) as caught:
        ncet.convert(Fails(), (4,))
    assert caught.value.code == "trace-failed"
    assert module_call_is_pristine()


def test_concurrent_calls_give_the_sequential_results(tmp_path):
    """Two threads converting and diagnosing, one checking, one running the model eagerly,
    all at once and repeatedly: every result is the sequential one."""
    model, shapes = load_example("residual_cnn")
    x = torch.randn(4, *shapes[0], generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        eager_expected = model(x)
    reference = file_bytes(ncet.convert(model, *shapes), tmp_path, "reference.ncet")
    rejected, rejected_shapes = load_example("many_problems")
    diagnosed = (ncet.diagnose(model, *shapes).summary(),
                 [(r.fx_name, r.code) for r in ncet.diagnose(rejected, *rejected_shapes).errors])
    ir = ncet.convert(model, *shapes)
    rounds = 6
    rng = torch.random.get_rng_state()

    def converter(k):
        return [file_bytes(ncet.convert(model, *shapes), tmp_path, f"t{k}_{i}.ncet")
                for i in range(rounds)]

    def diagnoser():  # the accepted model and one with every kind of problem, in turn
        return [(ncet.diagnose(model, *shapes).summary(),
                 [(r.fx_name, r.code) for r in ncet.diagnose(rejected, *rejected_shapes).errors])
                for _ in range(rounds)]

    def checker():
        return [ncet.check_exactness(model, ir, samples_per_scale=2).ok for _ in range(2)]

    def eager():
        outputs = []
        for _ in range(4 * rounds):
            with torch.no_grad():
                outputs.append(model(x))
        return outputs

    saved_a, saved_b, summaries, checks, eagers = run_threads(
        [lambda: converter(0), lambda: converter(1), diagnoser, checker, eager])
    assert saved_a == [reference] * rounds and saved_b == [reference] * rounds
    assert summaries == [diagnosed] * rounds
    assert checks == [True, True]
    assert all(torch.equal(out, eager_expected) for out in eagers)
    assert module_call_is_pristine()
    assert torch.equal(torch.random.get_rng_state(), rng), "the global RNG state changed"


class Draws(nn.Module):
    """forward() draws from the global RNG while traced: the drawn tensor is frozen into
    the graph as a constant, so it shows which RNG state each conversion started from."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x):
        return self.fc(x) + torch.randn(64)


def test_concurrent_conversions_each_start_from_the_callers_rng_state():
    """convert forks the process-wide RNG and restores it: without one call at a time, a
    conversion would start from another's forked state and freeze other numbers."""
    torch.manual_seed(0)
    model = Draws().eval()
    rng = torch.random.get_rng_state()
    expected = ncet.convert(model, (64,)).constants["_tensor_constant0"]
    assert torch.equal(torch.random.get_rng_state(), rng)

    def converter():
        return [ncet.convert(model, (64,)).constants["_tensor_constant0"] for _ in range(20)]

    frozen = [c for result in run_threads([converter] * 3) for c in result]
    assert all(torch.equal(c, expected) for c in frozen)
    assert torch.equal(torch.random.get_rng_state(), rng)


def plain_fx_code(model: nn.Module) -> str:
    return torch.fx.symbolic_trace(model).code


def test_ncet_refuses_to_trace_while_a_plain_fx_trace_runs():
    """FX itself is not thread-safe: while a torch.fx.symbolic_trace of someone else's runs
    in another thread, convert refuses (saying why) instead of tracing under its patches,
    and that trace still gets its own graph."""
    paused, resume = threading.Event(), threading.Event()
    plain = PausesWhileTraced(paused, resume).eval()
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("code", plain_fx_code(plain)),
                              daemon=True)
    thread.start()
    try:
        assert paused.wait(TIMEOUT)
        with pytest.raises(ncet.TraceError) as caught:
            ncet.convert(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (4,))
        assert caught.value.code == "trace-failed"
        assert "another torch.fx trace is running" in str(caught.value)
    finally:
        resume.set()
        thread.join(TIMEOUT)
    resume.set()
    assert result["code"] == plain_fx_code(plain)
    assert module_call_is_pristine()
    assert ncet.convert(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (4,)).nodes[1].op_type == \
        "Linear"


def test_a_plain_fx_trace_that_overlaps_ncets_is_reported_not_absorbed():
    """A plain torch.fx trace that starts in another thread while NCET traces patches
    nn.Module over NCET's gates: NCET's trace reports it (no graph it may have disturbed),
    the plain trace gets its own graph, and afterwards every call is PyTorch's own."""
    paused, resume = threading.Event(), threading.Event()
    traced = PausesWhileTraced(paused, resume).eval()
    plain = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    result = {}

    def convert():
        try:
            result["ir"] = ncet.convert(traced, (4,))
        except ncet.TraceError as error:
            result["error"] = error

    thread = threading.Thread(target=convert, daemon=True)
    thread.start()
    try:
        assert paused.wait(TIMEOUT)
        patched = {}
        original_call = nn.Module.__dict__["__call__"]

        class Watches(nn.Module):  # resumes NCET's trace while this plain trace runs
            def __init__(self):
                super().__init__()
                self.plain = plain

            def forward(self, x):
                patched["call"] = nn.Module.__dict__["__call__"] is not original_call
                resume.set()
                thread.join(TIMEOUT)
                return self.plain(x)

        graph = torch.fx.symbolic_trace(Watches()).graph
    finally:
        resume.set()
        thread.join(TIMEOUT)
    assert patched["call"]
    assert "another torch.fx trace patched nn.Module" in str(result["error"])
    assert [(n.op, n.target) for n in graph.nodes if n.op == "call_module"] == [
        ("call_module", "plain.0"), ("call_module", "plain.1")]
    x = torch.ones(2, 4)
    with torch.no_grad():
        assert torch.equal(plain(x), torch.relu(plain[0](x)))
    assert ncet.convert(traced, (4,)).nodes[1].op_type == "Linear"
    assert module_call_is_pristine()  # the gate the plain trace put back is gone


def test_compiled_models_in_other_threads_run_while_ncet_traces():
    """torch.compile refuses to run while FX traces (FX's process-wide tracing flag):
    NCET's trace sets that flag for its own thread only."""
    compiled = torch.compile(nn.Linear(4, 4), backend="eager")
    x = torch.ones(2, 4)
    expected = compiled(x)
    with converting_mid_trace():
        assert not torch.fx._symbolic_trace.is_fx_tracing()
        assert torch.equal(compiled(x), expected)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_child_forked_mid_trace_converts():
    """os.fork while another thread is inside a trace (multiprocessing's fork start method,
    a preloading server): the child has no such thread, so no lock is held and no gate is
    live there; it converts and runs models eagerly."""
    with converting_mid_trace():
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if everything works
            code = 1
            try:
                signal.alarm(60)
                ir = ncet.convert(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (4,))
                ok = threading.Thread(target=lambda: nn.Linear(4, 2)(torch.ones(1, 4)))
                ok.start()
                ok.join()
                code = 0 if module_call_is_pristine() and len(ir.nodes) == 4 else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
