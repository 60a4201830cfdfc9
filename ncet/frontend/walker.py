"""One walk over an FX graph: values kept per node, each dropped after its last use.

Like torch.fx's `Interpreter` and JAX's `eval_jaxpr`, a walk reads each node's operands from
an environment keyed by FX node and writes the node's own value there; the nodes whose
values a node uses for the last time are computed once per graph, so the environment holds
only the values still needed and memory follows the graph's width, not its depth.

The API, for shape propagation and the conversion walk (ncet/frontend/canonicalize.py) and
for any other walk (the certificate's checker, ncet/exactness/checker.py, can hold its
values the same way):

    walker = Walker(graph)              # the node order and the last uses, once per graph
    env: dict[torch.fx.Node, V] = {}    # one environment per walk (per chunk, say)
    for node in walker.walk(env):       # after the body, env drops what `node` used last
        env[node] = ...                 # read operands with env[n] or call_node(node, env)

`Walker.released(node)` lists the same nodes for a walk that keeps other, name-keyed tables
besides `env` and drops their entries too. What a value is (a tensor, a record of a node's
values at several batch sizes, a pair of a reference value and its radius) is the caller's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import torch
import torch.fx
from torch import nn


class Walker:
    """The nodes of one FX graph in order, with the values each node uses for the last time.

    Args:
        graph: The FX graph; it must not change while the walker is in use.
    """

    __slots__ = ("nodes", "_last_uses")

    def __init__(self, graph: torch.fx.Graph):
        self.nodes: tuple[torch.fx.Node, ...] = tuple(graph.nodes)
        self._last_uses = last_uses(graph)

    def released(self, node: torch.fx.Node) -> Sequence[torch.fx.Node]:
        """The nodes whose values `node` uses for the last time (empty when none)."""
        return self._last_uses.get(node, ())

    def walk(self, env: MutableMapping[torch.fx.Node, Any]) -> Iterator[torch.fx.Node]:
        """Yield every node in graph order; once the caller's body for a node is done, drop
        from `env` the values whose last use that node was (a value never set is skipped).
        A walk the caller leaves early (an exception, a `break`) drops nothing more."""
        last_uses_of = self._last_uses
        for node in self.nodes:
            yield node
            for used in last_uses_of.get(node, ()):
                env.pop(used, None)


def last_uses(graph: torch.fx.Graph) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """Node -> the nodes whose values are used for the last time by it (so a walk can free
    each value after its last use, and memory follows the graph's width, not its depth)."""
    last: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in graph.nodes:
        for used in node.all_input_nodes:
            last[used] = node
    release: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for used, node in last.items():
        release.setdefault(node, []).append(used)
    return release


def call_node(node: torch.fx.Node, env: Mapping[torch.fx.Node, Any],
              module: nn.Module | None = None, *, hooks: bool = True):
    """Run one call_* FX node on the values in `env` (keyed by FX node; anything with
    `__getitem__`); `module` is the submodule to call for call_module (the caller may pass a
    copy), with its hooks or, when not `hooks`, its forward() alone."""
    args = torch.fx.node.map_arg(node.args, env.__getitem__)
    kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
    if node.op == "call_module":
        return module(*args, **kwargs) if hooks else module.forward(*args, **kwargs)
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    return node.target(*args, **kwargs)
