"""The spelling-table row behind a model's one call node, found as FX records it.

The spec tests use it to check that a handler's op_type is in the row's op_type column.
"""

from __future__ import annotations

import torch.fx as fx
from torch import nn

from ncet.frontend.spellings import FUNCTION_SPELLINGS, METHOD_SPELLINGS, MODULE_SPELLINGS
from tests.conftest import fx_trace


def table_key(model: nn.Module) -> object:
    """The spelling-table key of the single call node FX records for `model`: the module's
    type, the callable, or the method name."""
    graph_module = fx_trace(model)
    (node,) = [n for n in graph_module.graph.nodes if n.op.startswith("call_")]
    return _key(graph_module, node)


def _key(graph_module: fx.GraphModule, node: fx.Node) -> object:
    if node.op == "call_module":
        return type(graph_module.get_submodule(node.target))
    return node.target


def op_type_column(model: nn.Module) -> tuple[str, ...]:
    """The op_type column of the spelling-table row `model`'s single call node uses."""
    key = table_key(model)
    for table in (MODULE_SPELLINGS, FUNCTION_SPELLINGS, METHOD_SPELLINGS):
        if key in table:
            return table[key].op_types
    raise AssertionError(f"{key!r} is in no spelling table")
