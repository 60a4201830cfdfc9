"""Does a GraphIR correspond to the model's traced graph? The structure check that comes before
`check_exactness` compares a single number.

`convert` names every IR node after the FX node it comes from, takes its operands from that
node's tensor arguments (parameters, buffers and constants become constants, not nodes), and
keeps forward()'s arguments and return values in order. A GraphIR that breaks any of this was
not converted from this model, or was edited since: the numeric checks, which run the traced
graph and look up each IR node by name, would not see a node the trace does not have.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch.fx
from torch import nn
from torch.fx.node import map_arg

from ..errors import TraceError
from ..frontend.cut import plan_cut
from ..ir import GraphIR, declared_cut


def check_inputs_and_outputs(ir: GraphIR, graph: torch.fx.Graph,
                             returned: list[str] | None = None) -> None:
    """The IR's Input nodes are forward()'s arguments, and its outputs are the values
    forward() returns (or `returned`, the nodes a GraphIR cut short returns), in the same
    order.

    Raises:
        ValueError: They differ, with both lists in the message.
    """
    placeholders = [n.name for n in graph.nodes if n.op == "placeholder"]
    inputs = [n.name for n in ir.inputs]
    if inputs != placeholders:
        raise ValueError(f"the GraphIR does not match the model: its Input nodes are {inputs}, "
                         f"but the model's forward() takes {placeholders}, in that order")
    misplaced = [n.name for i, n in enumerate(ir.inputs) if n.attrs.get("index") != i]
    if misplaced:
        raise ValueError(f"the GraphIR is malformed: Input node(s) {misplaced} carry an index "
                         "other than their position among the Input nodes")
    returned = _returned(graph) if returned is None else returned
    nodes = {n.name: n for n in ir.nodes}
    for name, traced in zip(ir.outputs, returned):
        if name not in nodes:
            raise ValueError(f"the GraphIR is malformed: it returns {name!r}, which is none of "
                             "its nodes")
        if nodes[name].op_type == "Input" and name != traced:
            raise ValueError(f"the GraphIR does not match the model: it returns its input "
                             f"{name!r} where the model's trace returns {traced!r}")
    if list(ir.outputs) != returned and sorted(ir.outputs) == sorted(returned):
        raise ValueError(f"the GraphIR does not match the model: it returns {list(ir.outputs)}, "
                         f"the model's trace returns {returned}, in that order")
    if len(ir.outputs) != len(returned):
        raise ValueError(f"the GraphIR does not match the model: it returns "
                         f"{len(ir.outputs)} value(s) {list(ir.outputs)}, the model's trace "
                         f"{len(returned)} {returned}")


def replanned_cut(ir: GraphIR, graph: torch.fx.Graph,
                  modules: Mapping[str, nn.Module]) -> dict[str, str] | None:
    """The cut of a GraphIR cut short, planned again on the model's trace from the arguments
    its Output node stores (`stop_at`, `cut_trailing`): FX node name -> why, from the plan,
    never from the file (empty when the plan leaves nothing out); None for a GraphIR of the
    whole model, one whose Output node declares no cut.

    The GraphIR must leave out exactly the nodes the plan leaves out and return exactly the
    nodes the plan returns, position for position (each of forward()'s results, or the node
    a cut activation takes in its place; for `stop_at`, that node alone), with the plan's
    tuple structure.

    Raises:
        ValueError: Anything else ("the GraphIR does not match the model"): a cut declared
            without the arguments that made it, other nodes left out, other outputs.
    """
    attrs = ir.nodes[-1].attrs
    declared = list(declared_cut(ir))
    if "cut" not in attrs and "stop_at" not in attrs and "cut_trailing" not in attrs:
        return None
    stop_at, trailing = attrs.get("stop_at"), attrs.get("cut_trailing")
    if not isinstance(trailing, bool) or not (stop_at is None or isinstance(stop_at, str)):
        raise ValueError("the GraphIR does not match the model: its Output node declares a "
                         f"cut of {', '.join(map(repr, declared[:5])) or 'nothing'} without "
                         "the stop_at / cut_trailing that made it, so the cut cannot be "
                         "planned again on the model: convert the model with them again")
    spelled = f"convert's stop_at={stop_at!r}, cut_trailing={trailing}"
    try:
        plan = plan_cut(graph, modules, stop_at=stop_at, cut_trailing=trailing) \
            if stop_at is not None or trailing else None
    except TraceError as error:
        raise ValueError(f"the GraphIR does not match the model: its cut was made by "
                         f"{spelled}, which plans no cut on the model's trace ({error})") \
            from None
    planned = {} if plan is None else dict(plan.nodes)
    if sorted(declared) != sorted(planned):
        raise ValueError(f"the GraphIR does not match the model: its Output node declares "
                         f"that it leaves out {', '.join(map(repr, declared[:5])) or 'nothing'}"
                         f", but {spelled} leaves out "
                         f"{', '.join(map(repr, list(planned)[:5])) or 'nothing'} of the "
                         "model's traced graph")
    if plan is None:
        return None
    outputs = [n.name for n in plan.outputs]
    if list(ir.outputs) != outputs or attrs.get("tuple") is not plan.as_tuple:
        raise ValueError(f"the GraphIR does not match the model: it returns "
                         f"{list(ir.outputs)} (tuple {attrs.get('tuple')}), but {spelled} on "
                         f"the model's trace returns {outputs} (tuple {plan.as_tuple}), in "
                         "that order")
    return planned


def structural_faults(ir: GraphIR, graph: torch.fx.Graph,
                      returned: list[str] | None = None) -> dict[str, str]:
    """Per IR operator node, what about it does not correspond to the traced graph: a node
    the trace does not have, operands other than the traced node's, an output the trace does
    not return. Empty when the structure corresponds."""
    fx = {n.name: n for n in graph.nodes}
    faults: dict[str, str] = {}
    for node in ir.nodes:
        if node.op_type in ("Input", "Output"):
            continue
        traced = fx.get(node.name)
        if traced is None or not traced.op.startswith("call_"):
            faults[node.name] = ("structure: the model's traced graph has no node "
                                 f"{node.name!r}, so nothing in the model computes this "
                                 f"{node.op_type} (an IR node the model does not have)")
            continue
        operands = sorted({a.name for a in traced.all_input_nodes if a.op != "get_attr"})
        if sorted(set(node.inputs)) != operands:
            faults[node.name] = (f"structure: its operands are {sorted(set(node.inputs))} in "
                                 f"the IR, {operands} in the model's traced graph")
    returned = _returned(graph) if returned is None else returned
    for name, traced_name in zip(ir.outputs, returned):
        if name != traced_name and name not in faults:
            faults[name] = (f"structure: the IR returns {name!r} where the model's trace "
                            f"returns {traced_name!r}")
    return faults


def _returned(graph: torch.fx.Graph) -> list[str]:
    """The names of the nodes the traced graph returns, in order."""
    (output,) = [n for n in graph.nodes if n.op == "output"]
    names: list[str] = []
    map_arg(output.args[0], lambda n: names.append(n.name))
    return names
