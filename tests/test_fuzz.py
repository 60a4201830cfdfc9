"""Property tests on random models built from the spec's spellings (tests/model_strategies.py).

Whatever the model, `convert` returns a GraphIR that passes `check_exactness` or raises a
ConversionError naming a real FX node (or none, for the whole trace) with a documented reason
code, at the first node the support boundary rejects; `diagnose` never raises and reports
that problem too; the model is untouched; spellings of one group give identical IR; saved
files are byte-identical and load back to the same graph. The CI profile is derandomized
(tests/conftest.py); HYPOTHESIS_PROFILE=dev runs ten times as many models.
"""

from __future__ import annotations

import copy
import os
import pickle
import tempfile
import tracemalloc
from dataclasses import replace

import pytest
import torch
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

import ncet
import ncet.format.file as nio
import ncet.format.header
from ncet.errors import REASONS
from ncet.examples import EXAMPLES, load_example
from ncet.ir import OP_SCHEMAS
from tests.conftest import ir_signature
from tests.model_strategies import build, node_steps, programs, respell
from tests.test_io import MAGIC, NAMES, PREFIX, Trap, json_paths, pack, replacements, split
from tests.test_no_mutation import assert_same, snapshot

SCALE = settings.default.max_examples / 100
"""1 in the CI profile, 10 in the dev profile."""


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


def converts(model, program):
    """(GraphIR, None) or (None, the ConversionError); any other exception propagates."""
    try:
        return ncet.convert(model, *program.shapes, dtype=program.dtype), None
    except ncet.ConversionError as error:
        return None, error


def check_report(report, program, where: dict | None) -> None:
    """`diagnose` rows are the FX nodes; every clean step (see Program.clean) has exactly its
    verdict: an error with one of its codes if it is rejected, no error if it is accepted."""
    if where is None or len(report.rows) == 1:  # the trace failed: one row for the model
        return
    assert {r.fx_name for r in report.rows} == set(where), "diagnose rows are not the FX nodes"
    found: dict[str, set[str]] = {}
    for row in report.errors:
        found.setdefault(where[row.fx_name], set()).add(row.code)
    for i, (step, clean) in enumerate(zip(program.steps, program.clean())):
        got = found.get(f"step {i}", set())
        if clean and step.expect:
            assert got & step.expect, f"diagnose misses step {i}: {sorted(step.expect)}, {got}"
        elif clean:
            assert not got, f"diagnose reports {sorted(got)} at accepted step {i}"


def check_error(error: ncet.ConversionError, program, where: dict | None, report) -> None:
    """The error has a documented code of its class, names a real FX node (or none for the
    trace), is where the program's first problem is, and `diagnose` reports it too."""
    assert error.code in REASONS, f"undocumented reason code {error.code!r}: {error}"
    assert type(error).__name__ == REASONS[error.code].error, (type(error), error.code)
    expected = program.expected()
    assert expected is not None, f"rejected a model that is inside the boundary: {error}"
    step, codes = expected
    assert error.code in codes, f"expected one of {sorted(codes)} at {step}, got: {error}"
    if step == "":
        assert error.node == "", error
    else:
        assert where is not None and error.node in where, f"no FX node {error.node!r}: {error}"
        assert where[error.node] == step, f"expected the error at {step}, got: {error}"
        assert f"node {error.node!r}" in str(error) and error.spelling, error
        assert error.location in str(error), error
    problems = {(r.fx_name, r.code) for r in report.errors}
    assert (error.node, error.code) in problems, (
        f"diagnose does not report convert's error {(error.node, error.code)}: {problems}")
    assert not report.ok and report.graph is None


@settings(max_examples=examples(1500))
@given(program=programs())
def test_convert_gives_exact_ir_or_names_the_node(program):
    note(repr(program))
    model = build(program)
    where = node_steps(model)
    before = snapshot(model)
    ir, error = converts(model, program)
    assert_same(before, snapshot(model))
    report = ncet.diagnose(model, *program.shapes, dtype=program.dtype)  # never raises
    assert_same(before, snapshot(model))
    check_report(report, program, where)
    outcome = "accepted" if error is None else error.code
    event(f"outcome: {outcome}")  # the mix of outcomes: pytest --hypothesis-show-statistics
    if error is not None:
        check_error(error, program, where, report)
        return
    assert program.expected() is None, f"accepted, but expected {program.expected()}"
    assert report.ok and ir_signature(report.graph) == ir_signature(ir)
    exactness = ncet.check_exactness(model, ir, samples_per_scale=4)
    assert_same(before, snapshot(model))
    if program.hooks:  # hooks are not part of the GraphIR: never certified
        assert exactness.first_violation is None and exactness.unchecked, exactness.summary()
        return
    assert exactness.ok, exactness.summary()


@settings(max_examples=examples(300))
@given(program=programs(accepted_only=True), seed=st.integers(0, 2 ** 16))
def test_saved_files_are_identical_and_load_evaluates_identically(program, seed,
                                                                    tmp_path_factory):
    note(repr(program))
    model = build(program)
    first = ncet.convert(model, *program.shapes, dtype=program.dtype)
    again = ncet.convert(model, *program.shapes, dtype=program.dtype)
    rebuilt = ncet.convert(build(program), *program.shapes, dtype=program.dtype)
    folder = tmp_path_factory.getbasetemp()
    blobs = []
    for i, ir in enumerate((first, again, rebuilt)):
        ncet.save(ir, folder / f"{i}.ncet")
        blobs.append((folder / f"{i}.ncet").read_bytes())
    assert blobs[0] == blobs[1] == blobs[2], "converting the same model twice changed the file"
    loaded = ncet.load(folder / "0.ncet")
    assert ir_signature(loaded) == ir_signature(first)
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn((4, *s), generator=g, dtype=program.dtype) for s in program.inputs]
    want, got = ncet.evaluate(first, *inputs), ncet.evaluate(loaded, *inputs)
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    assert len(want) == len(got)
    for w, h in zip(want, got):
        assert w.dtype == h.dtype and torch.equal(w, h), "load(save(ir)) evaluates differently"


@settings(max_examples=examples(500))
@given(data=st.data())
def test_spellings_of_one_group_give_identical_ir(data):
    program = data.draw(programs(accepted_only=True), label="program")
    other = respell(data.draw, program)
    note(repr(program))
    event(f"steps: {len(program.steps)}")
    respelled = f"respelled as:\n{other!r}"
    first = ncet.convert(build(program), *program.shapes, dtype=program.dtype)
    second = ncet.convert(build(other), *other.shapes, dtype=other.dtype)
    assert ir_signature(first) == ir_signature(second), respelled


@settings(max_examples=examples(200))
@given(program=programs(accepted_only=True))
def test_a_module_converts_alone_as_inside_a_model(program):
    """A leaf module given as the model is traced as one call, like the same call inside a
    model (containers add no node)."""
    note(repr(program))
    steps = [s for s in program.steps if not s.body and s.spelling.module
             and all(0 not in shape for shape in s.in_shapes)]  # convert needs sizes > 0
    if not steps:
        return
    step = replace(steps[0], args=(0,))
    alone = step.spelling.attrs()[""]
    inside = build(replace(program, inputs=step.in_shapes, steps=(step,), outputs=(1,),
                           output_form="single", extra_shape=False))
    for model in (alone, inside):
        model.eval()
        model.training = getattr(model, "_train", False)
    first = ncet.convert(alone, *step.in_shapes, dtype=program.dtype)
    second = ncet.convert(inside, *step.in_shapes, dtype=program.dtype)
    assert ir_signature(first) == ir_signature(second), repr(step)


# --- hostile files: structure-aware mutations of real files (tests/test_io.py has the rest) ---


def real_files() -> dict[str, bytes]:
    """Files saved from the bundled models that convert, and from one random program."""
    files = {}
    for name, example in EXAMPLES.items():
        if example.converts:
            model, shapes = load_example(name)
            files[name] = file_bytes(ncet.convert(model, *shapes))
    return files


def file_bytes(ir) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "g.ncet")
        ncet.save(ir, path)
        with open(path, "rb") as f:
            return f.read()


REAL_FILES = real_files()


def load_bytes(blob: bytes, folder) -> tuple[str, object]:
    """("loaded", GraphIR) or ("rejected", message); the peak Python allocation while
    loading must stay within a small multiple of the file's size."""
    path = folder / "hostile.ncet"
    path.write_bytes(blob)
    tracemalloc.start()
    try:
        try:
            result = "loaded", ncet.load(path)
        except ncet.GraphIRFormatError as error:
            result = "rejected", str(error)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(blob) + 2 ** 22, f"load allocated {peak} bytes for {len(blob)}"
    return result


def _rename(header: dict, old: str, new: str) -> None:
    """Rename a node and every reference to it."""
    for node in header["nodes"]:
        node["name"] = new if node["name"] == old else node["name"]
        node["inputs"] = [new if i == old else i for i in node["inputs"]]


def _rename_constant(header: dict, old: str, new: str) -> None:
    for entry in header["constants"]:
        entry["name"] = new if entry["name"] == old else entry["name"]
    for node in header["nodes"]:
        for key, value in node["attrs"].items():
            if value == old and isinstance(value, str):
                node["attrs"][key] = new


@st.composite
def mutated_files(draw) -> bytes:
    """A real file with 1-3 structure-aware edits of its header, nodes, constants or data."""
    base = draw(st.sampled_from(sorted(REAL_FILES)))
    header, data = split(REAL_FILES[base])
    data = bytearray(data)
    nodes, constants = header["nodes"], header["constants"]
    kinds = draw(st.lists(st.sampled_from(["value", "node", "constant", "data", "splice",
                                           "prefix"]), min_size=1, max_size=3))
    # Structural edits first, on well-typed nodes and constants; then any JSON value; the
    # prefix last, on the packed bytes.
    for kind in sorted(kinds, key=["node", "constant", "data", "splice", "value",
                                   "prefix"].index):
        i = draw(st.integers(0, len(nodes) - 1)) if nodes else 0
        j = draw(st.integers(0, len(nodes) - 1)) if nodes else 0
        c = draw(st.integers(0, len(constants) - 1)) if constants else None
        if kind == "value":  # any JSON value, or one close to the old one
            paths = list(json_paths(header))[1:]
            *parent, key = draw(st.sampled_from(paths))
            target = header
            for step in parent:
                target = target[step]
            target[key] = draw(replacements(target[key]))
        elif kind == "node" and nodes:
            edit = draw(st.sampled_from(["drop", "duplicate", "swap", "rename", "rename-all",
                                         "op_type", "inputs"]))
            if edit == "drop":
                nodes.pop(i)
            elif edit == "duplicate":
                nodes.insert(j, copy.deepcopy(nodes[i]))
            elif edit == "swap":
                nodes[i], nodes[j] = nodes[j], nodes[i]
            elif edit == "rename":
                nodes[i]["name"] = draw(NAMES)
            elif edit == "rename-all":
                _rename(header, nodes[i]["name"], draw(st.text(min_size=1, max_size=8)))
            elif edit == "op_type":
                nodes[i]["op_type"] = draw(st.sampled_from(sorted(OP_SCHEMAS)))
            else:
                nodes[i]["inputs"] = [n["name"] for n in draw(st.lists(
                    st.sampled_from(nodes), max_size=3))]
        elif kind == "constant" and c is not None:
            edit = draw(st.sampled_from(["dtype", "shape", "swap", "drop", "rename-all"]))
            entry = constants[c]
            if edit == "dtype":
                entry["dtype"] = draw(st.sampled_from(sorted(nio.DTYPES)))
            elif edit == "shape":
                entry["shape"] = draw(st.permutations(entry["shape"])) + draw(
                    st.lists(st.sampled_from([1, 2]), max_size=1))
            elif edit == "swap":
                other = constants[draw(st.integers(0, len(constants) - 1))]
                entry["name"], other["name"] = other["name"], entry["name"]
            elif edit == "drop":
                constants.pop(c)
            else:
                _rename_constant(header, entry["name"], draw(st.text(min_size=1, max_size=8)))
        elif kind == "data" and data:
            for _ in range(draw(st.integers(1, 8))):
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        elif kind == "splice":
            data = bytearray(split(REAL_FILES[draw(st.sampled_from(sorted(REAL_FILES)))])[1])
        elif kind == "prefix":
            blob = pack(header, bytes(data))
            at = draw(st.integers(0, PREFIX.size - 1))
            return blob[:at] + bytes([draw(st.integers(0, 255))]) + blob[at + 1:]
    return pack(header, bytes(data))


@settings(max_examples=examples(500))
@given(blob=mutated_files())
def test_mutated_real_files_load_or_raise_format_error(blob, tmp_path_factory):
    outcome, value = load_bytes(blob, tmp_path_factory.getbasetemp())
    event(outcome)  # how many loaded: pytest --hypothesis-show-statistics
    if outcome == "loaded":  # load accepts only what save writes, byte for byte
        assert file_bytes(value) == blob, "a loaded file does not save back to its own bytes"
        # and what it accepts computes: evaluate gives every output its declared shape (B5).
        shapes = {n.name: n.shape for n in value.nodes}
        xs = [torch.randn(2, *n.shape, dtype=torch.float64) for n in value.inputs]
        ys = ncet.evaluate(value, *xs)
        ys = ys if isinstance(ys, tuple) else (ys,)
        assert [tuple(y.shape) for y in ys] == [(2, *shapes[n]) for n in value.nodes[-1].inputs]


SIZES = [2 ** 31, 2 ** 40, 2 ** 62, 2 ** 63 - 1]


def declared(field: str, size: int):
    """An edit declaring `size` somewhere a loader could trust a size."""
    def edit(header, data):
        first, last = header["constants"][0], header["constants"][-1]
        if field == "header-length":
            return PREFIX.pack(MAGIC, 1, size) + pack(header, data)[PREFIX.size:]
        if field == "nbytes":  # with a matching shape, so only the file size can refute it
            width = nio.DTYPES[last["dtype"]].itemsize
            last.update(shape=[size // width], nbytes=size // width * width)
        elif field == "shape":
            first.update(shape=[size, 0], nbytes=0)  # no elements: only the shape is large
        elif field == "offset":
            last["offset"] = size - size % 8
        elif field == "rank":  # one element, but more axes than MAX_RANK
            first.update(shape=[1] * (ncet.format.header.MAX_RANK + 1 + size % 1000),
                         nbytes=nio.DTYPES[first["dtype"]].itemsize)
        return pack(header, data)
    return edit


@pytest.mark.parametrize("base", sorted(REAL_FILES))
@pytest.mark.parametrize("field", ["header-length", "nbytes", "shape", "offset", "rank"])
def test_declared_sizes_are_never_trusted(base, field, tmp_path):
    for size in SIZES:
        blob = declared(field, size)(*split(REAL_FILES[base]))
        outcome, message = load_bytes(blob, tmp_path)
        assert outcome == "rejected", f"{field}={size} loaded"


ESCAPES = ["../../escaped", "/etc/passwd", "..\\..\\escaped", "a/../../b", "C:\\Windows\\x",
           "~/.bashrc", "\x00hidden", "line\nbreak", "x" * 10_000, "ünïcode/ŝ", ".", ""]


@pytest.mark.parametrize("name", ESCAPES, ids=[repr(n)[:24] for n in ESCAPES])
def test_path_like_names_stay_names(name, tmp_path, monkeypatch):
    """Node and constant names that look like paths are data: load writes nothing anywhere,
    and save of what it loaded writes exactly the one file it is given."""
    monkeypatch.chdir(tmp_path)
    header, data = split(REAL_FILES["mlp"])
    _rename(header, header["nodes"][1]["name"], name)
    _rename_constant(header, header["constants"][0]["name"], name + ".w")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    outcome, value = load_bytes(pack(header, data), tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted({*before, "hostile.ncet"})
    if name == "":
        assert outcome == "rejected"
        return
    assert outcome == "loaded", value
    assert value.nodes[1].name == name and name + ".w" in value.constants
    (tmp_path / "out").mkdir()
    ncet.save(value, tmp_path / "out" / "g.ncet")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["g.ncet"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        {*before, "hostile.ncet", "out", "g.ncet"})


def pickled_trap(marker) -> bytes:
    return pickle.dumps(Trap(marker))


@pytest.mark.parametrize("where", ["as-a-constant", "after-the-file", "as-the-header",
                                   "as-the-data", "torch-save-of-the-constants"])
def test_pickle_payloads_inside_files_are_never_unpickled(where, tmp_path):
    marker = tmp_path / "unpickled"
    payload = pickled_trap(marker)
    header, data = split(REAL_FILES["mlp"])
    if where == "as-a-constant":  # a valid file whose uint8 constant holds the pickle
        header["constants"].append({"name": "payload", "dtype": "uint8", "shape": [len(payload)],
                                    "offset": len(data), "nbytes": len(payload)})
        blob = pack(header, data + payload)
    elif where == "after-the-file":
        blob = pack(header, data) + payload
    elif where == "as-the-header":
        blob = PREFIX.pack(MAGIC, 1, len(payload)) + payload
    elif where == "as-the-data":
        blob = pack(header, payload)
    else:
        model, shapes = load_example("mlp")
        torch.save({"constants": dict(ncet.convert(model, *shapes).constants),
                    "trap": Trap(marker)}, tmp_path / "g.pt")
        blob = (tmp_path / "g.pt").read_bytes()
    outcome, value = load_bytes(blob, tmp_path)
    assert not marker.exists(), "load unpickled part of the file"
    if where == "as-a-constant":
        assert outcome == "loaded" and bytes(value.constants["payload"].tolist()) == payload
    else:
        assert outcome == "rejected"

