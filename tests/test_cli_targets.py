"""TARGET forms of the command line (ncet/cli/targets.py): a factory called with literal
arguments, and a file's classes shown under the file's own module name."""

import sys
import textwrap

import pytest

from ncet.cli.targets import TargetError, load_target

NETS = textwrap.dedent('''
    from torch import nn


    class Net(nn.Module):
        def __init__(self, width=4, depth=1, act="relu"):
            super().__init__()
            self.body = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])
            self.width, self.act = width, act

        def forward(self, x):
            return self.body(x)


    def build(width, *, bias=True):
        return nn.Linear(width, 2, bias=bias)


    instance = nn.Linear(3, 3)
''')


@pytest.fixture
def nets(tmp_path, monkeypatch):
    (tmp_path / "zoo_nets.py").write_text(NETS)
    (tmp_path / "json.py").write_text(NETS)  # a stem that is another module's name
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = dict(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - set(before):
        del sys.modules[name]
    sys.modules.update(before)


CALLS = [
    # TARGET, what the model must be
    ("zoo_nets.py:Net", lambda m: m.width == 4 and len(m.body) == 1),
    ("zoo_nets.py:Net(width=8, depth=3)", lambda m: m.width == 8 and len(m.body) == 3),
    ("zoo_nets.py:Net(6, act='tanh')", lambda m: m.width == 6 and m.act == "tanh"),
    ("zoo_nets.py:build(5, bias=False)", lambda m: m.in_features == 5 and m.bias is None),
    ("zoo_nets.py:Net(width=(8))", lambda m: m.width == 8),
]


@pytest.mark.parametrize("text, check", CALLS, ids=[c[0] for c in CALLS])
def test_a_factory_is_called_with_the_literal_arguments_given(nets, text, check):
    assert check(load_target(text, ((4,),)).model)


REFUSED = [
    ("zoo_nets.py:Net(width=__import__('os').getpid())", "must be Python literals"),
    ("zoo_nets.py:Net(**{'width': 3})", "must be Python literals"),
    ("zoo_nets.py:Net(width=3", "must be Python literals"),
    ("zoo_nets.py:instance(3)", "gives arguments to a model instance"),
    ("zoo_nets.py:build(bias=False)", "with the arguments given failed: TypeError"),
]


@pytest.mark.parametrize("text, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_arguments_that_are_not_literals_or_do_not_fit_are_usage_errors(nets, text, message):
    with pytest.raises(TargetError, match=message.replace("(", r"\(")):
        load_target(text, ((4,),))


def test_a_files_classes_keep_the_files_own_module_name(nets):
    model = load_target("zoo_nets.py:Net", ((4,),)).model
    assert type(model).__module__ == "zoo_nets"
    assert sys.modules["zoo_nets"].Net is type(model)


def test_a_file_named_like_another_module_does_not_shadow_it(nets):
    import json

    model = load_target("json.py:Net", ((4,),)).model
    assert sys.modules["json"] is json
    assert type(model).__module__ == "_ncet_target_json"
