"""A declared cut never relaxes the check beyond what `convert` itself cuts: check_exactness
plans the cut again on the model's trace from the `stop_at` / `cut_trailing` the Output node
stores, and refuses a GraphIR that leaves out other nodes, returns other nodes (swapped,
repeated, dropped), declares a cut without the arguments that made it, or explains its cut
with made-up reasons; the reasons reported are the plan's, never the file's."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import ncet
from ncet.frontend import trace_cache
from ncet.ir import GraphIR


class TwoHeads(nn.Module):
    """Returns the logits of one head and the sigmoid of the other."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x):
        return self.a(x), torch.sigmoid(self.b(x))


class ThreeHeads(nn.Module):
    """Three Linear heads and no activation: nothing to cut."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 3), nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x):
        return self.a(x), self.b(x), self.c(x)


def chain() -> nn.Sequential:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()


def edited(ir: GraphIR, outputs=None, drop: tuple[str, ...] = (), **attrs) -> GraphIR:
    """`ir` with other outputs, without the nodes `drop` (and their constants), and with
    the Output attributes `attrs` (None removes one)."""
    out = ir.nodes[-1]
    new = {k: v for k, v in {**out.attrs, **attrs}.items() if v is not None}
    nodes = tuple(n for n in ir.nodes[:-1] if n.name not in drop)
    constants = {k: v for k, v in ir.constants.items() if k.split(".")[0] not in drop}
    return GraphIR((*nodes, dataclasses.replace(
        out, inputs=tuple(ir.outputs if outputs is None else outputs), attrs=new)), constants)


def seeded(make):
    torch.manual_seed(0)
    return make().eval()


TRAILING = "trailing torch.sigmoid, cut_trailing=True"

FORGERIES = [
    # (id, model, convert's options, the edit, what the refusal says)
    ("swapped-outputs", TwoHeads, {"cut_trailing": True},
     lambda ir: edited(ir, ("b", "a")), r"returns \['b', 'a'\]"),
    ("repeated-output", TwoHeads, {"cut_trailing": True},
     lambda ir: edited(ir, ("a", "a")), r"returns \['a', 'a'\]"),
    ("dropped-output", TwoHeads, {"cut_trailing": True},
     lambda ir: edited(ir, ("b",)), r"returns \['b'\]"),
    ("a-linear-called-trailing", TwoHeads, {"cut_trailing": True},
     lambda ir: edited(ir, ("a",), drop=("b",), cut=[["sigmoid", TRAILING], ["b", TRAILING]]),
     "declares that it leaves out 'sigmoid', 'b'"),
    ("cut-without-its-arguments", ThreeHeads, {},
     lambda ir: edited(ir, ("b", "a"), drop=("c",), cut=[["c", TRAILING]]),
     "without the stop_at / cut_trailing that made it"),
    ("cut-the-arguments-do-not-make", ThreeHeads, {},
     lambda ir: edited(ir, ("b", "a"), drop=("c",), cut=[["c", TRAILING]], cut_trailing=True),
     "declares that it leaves out 'c', but convert's stop_at=None, cut_trailing=True leaves "
     "out nothing"),
    ("stop-at-another-node", chain, {"stop_at": "1"},
     lambda ir: edited(ir, ("_0",)), r"returns \['_0'\] .* returns \['_1'\]"),
    ("stop-at-edited", chain, {"stop_at": "1"},
     lambda ir: edited(ir, stop_at="0"), "declares that it leaves out '_2'"),
    ("stop-at-unknown", chain, {"stop_at": "1"},
     lambda ir: edited(ir, stop_at="nope"), "plans no cut on the model's trace"),
    ("tuple-structure-changed", TwoHeads, {"cut_trailing": True},
     lambda ir: edited(ir, tuple=False, cut_trailing=True),
     r"\(tuple False\), but .* \(tuple True\)"),
]


@pytest.mark.parametrize("make, options, forge, says",
                         [row[1:] for row in FORGERIES], ids=[row[0] for row in FORGERIES])
def test_a_forged_cut_is_refused(make, options, forge, says, monkeypatch):
    """Both with the trace convert recorded and with a fresh one."""
    model = seeded(make)
    ir = ncet.convert(model, (4,), **options)
    assert ncet.check_exactness(model, ir, samples_per_scale=2).ok  # as converted
    forged = forge(ir)
    with pytest.raises(ValueError, match=f"does not match the model: .*{says}"):
        ncet.check_exactness(model, forged, samples_per_scale=2)
    monkeypatch.setattr(trace_cache, "TRACE_CACHE", False)
    with pytest.raises(ValueError, match="does not match the model"):
        ncet.check_exactness(model, forged, samples_per_scale=2)


def test_a_forged_cut_saved_and_loaded_is_refused(tmp_path):
    model = seeded(TwoHeads)
    ir = ncet.convert(model, (4,), cut_trailing=True)
    ncet.save(edited(ir, ("b", "a")), tmp_path / "swapped.ncet")
    with pytest.raises(ValueError, match=r"does not match the model: it returns \['b', 'a'\]"):
        ncet.check_exactness(model, ncet.load(tmp_path / "swapped.ncet"), samples_per_scale=2)


def test_the_reasons_reported_are_the_plans_not_the_files():
    model = seeded(TwoHeads)
    ir = ncet.convert(model, (4,), cut_trailing=True)
    assert ir.nodes[-1].attrs["cut"] == [["sigmoid", TRAILING]]
    assert ir.nodes[-1].attrs["cut_trailing"] is True and "stop_at" not in ir.nodes[-1].attrs
    told = edited(ir, cut=[["sigmoid", "verified by hand, nothing to check"]])
    report = ncet.check_exactness(model, told, samples_per_scale=2)
    assert report.ok and dict(report.cut) == {"sigmoid": TRAILING}
    assert "verified by hand" not in report.summary()


@pytest.mark.parametrize("options, attrs", [
    ({"stop_at": "1"}, {"stop_at": "1", "cut_trailing": False}),
    ({"stop_at": "0", "cut_trailing": True}, {"stop_at": "0", "cut_trailing": True}),
])
def test_convert_stores_the_arguments_of_the_cut(options, attrs, tmp_path):
    model = chain()
    ir = ncet.convert(model, (4,), **options)
    assert {k: ir.nodes[-1].attrs.get(k) for k in attrs} == attrs
    ncet.save(ir, tmp_path / "cut.ncet")
    loaded = ncet.load(tmp_path / "cut.ncet")
    assert loaded.nodes[-1] == ir.nodes[-1]
    assert ncet.check_exactness(model, loaded, samples_per_scale=2).ok
