"""The verification-community zoo (tests/zoo_models.py, issue 18 item 4), as written and with
`rewrite=True`: `diagnose` reports exactly the expected reason codes, `convert` agrees with
it, and every model that converts passes `check_exactness` against the *original* model,
both on convert's own trace and, after a save/load round trip, on a fresh one."""

from __future__ import annotations

import pytest
import torch

import ncet
from ncet.errors import REASONS
from tests.zoo_models import CONVERTS, ZOO, ZooEntry


def _outcome(report: ncet.ConversionReport):
    """CONVERTS, or the report's reason codes deduplicated in order of first appearance."""
    if report.ok:
        return CONVERTS
    return tuple(dict.fromkeys(row.code for row in report.errors))


@pytest.mark.parametrize("entry", ZOO, ids=[e.name for e in ZOO])
def test_zoo_model_as_written(entry: ZooEntry):
    model = entry.factory()
    report = ncet.diagnose(model, *entry.shapes)
    assert _outcome(report) == entry.as_written, [
        (row.fx_name, row.code, row.message) for row in report.errors]
    if entry.as_written == CONVERTS:
        assert not report.errors
        ir = ncet.convert(model, *entry.shapes)
        assert [n.op_type for n in ir.nodes] == [n.op_type for n in report.graph.nodes]
        exactness = ncet.check_exactness(model, ir, samples_per_scale=4)
        assert exactness.ok, exactness.first_violation
    else:
        assert report.graph is None
        assert all(row.code in REASONS for row in report.errors)
        with pytest.raises(ncet.ConversionError) as raised:
            ncet.convert(model, *entry.shapes)
        assert raised.value.code == entry.as_written[0]


@pytest.mark.parametrize("entry", ZOO, ids=[e.name for e in ZOO])
def test_zoo_model_with_rewrite(entry: ZooEntry, tmp_path):
    model = entry.factory()
    report = ncet.diagnose(model, *entry.shapes, rewrite=True)
    assert _outcome(report) == entry.with_rewrite, [
        (row.fx_name, row.code, row.message) for row in report.errors]
    rewritten = [row for row in report.rows if row.rewrite]
    assert (entry.as_written == CONVERTS) <= (not rewritten)  # nothing to rewrite there
    if entry.with_rewrite != CONVERTS:
        with pytest.raises(ncet.ConversionError) as raised:
            ncet.convert(model, *entry.shapes, rewrite=True)
        assert raised.value.code == entry.with_rewrite[0]
        return
    ir = ncet.convert(model, *entry.shapes, rewrite=True)
    assert ncet.check_exactness(model, ir, samples_per_scale=4).ok
    ncet.save(ir, tmp_path / "net.ncet")  # no trace to reuse: check_exactness traces again
    assert ncet.check_exactness(model, ncet.load(tmp_path / "net.ncet"), samples_per_scale=4).ok


def _well_formed(outcome) -> bool:
    if outcome == CONVERTS:
        return True
    return (isinstance(outcome, tuple) and len(outcome) > 0
            and len(set(outcome)) == len(outcome) and all(c in REASONS for c in outcome))


def test_zoo_table():
    names = [e.name for e in ZOO]
    assert len(names) == len(set(names))
    assert len(ZOO) >= 30
    for entry in ZOO:
        assert entry.style and isinstance(entry.shapes, tuple), entry.name
        assert all(isinstance(s, tuple) and s for s in entry.shapes), entry.name
        assert _well_formed(entry.as_written), entry.name
        assert _well_formed(entry.with_rewrite), entry.name
    fixed = [e for e in ZOO if e.as_written != CONVERTS and e.with_rewrite == CONVERTS]
    kept = [e for e in ZOO if e.with_rewrite != CONVERTS]
    assert len(fixed) >= 8 and len(kept) >= 4
    # a rewrite only removes problems: nothing that converts stops converting, and a model
    # still refused is refused for reasons it already had
    for entry in ZOO:
        if entry.as_written == CONVERTS:
            assert entry.with_rewrite == CONVERTS, entry.name
        elif entry.with_rewrite != CONVERTS and "trace-failed" not in entry.as_written:
            assert set(entry.with_rewrite) <= set(entry.as_written), entry.name


def test_zoo_factories_are_deterministic_and_in_eval_mode():
    state = torch.random.get_rng_state()
    for entry in ZOO:
        first, second = entry.factory(), entry.factory()
        assert first is not second
        assert not any(m.training for m in first.modules()), entry.name
        a, b = first.state_dict(), second.state_dict()
        assert a.keys() == b.keys(), entry.name
        assert all(torch.equal(a[k], b[k]) for k in a), entry.name
    assert torch.equal(torch.random.get_rng_state(), state)
