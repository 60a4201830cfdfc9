"""The passes that fold elementwise affine nodes into a Linear or Conv2d and merge affine
layers: BatchNorm into the layer before it, an input normalisation into the first layer,
a Linear into the Linear after it, and a scale or shift into the layer before it."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import GraphIR, IRNode
from .affine_forms import MOVES, Form, elementwise_step, identity_form, move_step
from .carried import Carried
from .graph_edits import consumers, fresh_name, rebuild, sole_consumer
from .layer_folds import absorb_input, absorb_output, refit
from .records import Change

LAYERS = ("Linear", "Conv2d")
ELEMENTWISE = ("ElementwiseAffine", "BatchNorm")

Attempt = Callable[[GraphIR, IRNode, dict], "tuple[GraphIR, Change] | Change | None"]


def apply_everywhere(ir: GraphIR, attempt: Attempt, pass_name: str
                     ) -> tuple[GraphIR, list[Change]]:
    """Try `attempt` at every node in order; after a rewrite start again on the new graph.
    A node where it refused (a Change with `refused`, or an ArithmeticError: a division by
    a value within its error of zero) is not tried again."""
    changes: list[Change] = []
    refused: set[str] = set()
    while True:
        used = consumers(ir)
        for node in ir.nodes:
            if node.name in refused:
                continue
            try:
                result = attempt(ir, node, used)
            except ArithmeticError as error:  # a constant without a bounded fold
                result = Change(pass_name, (node.name,), (), note=f"a computed constant has "
                                f"no certified bound ({error})", refused=True)
            if result is None:
                continue
            if isinstance(result, Change):
                refused.add(node.name)
                changes.append(result)
                continue
            ir, change = result
            changes.append(change)
            break
        else:
            return ir, changes


def _refused(pass_name: str, nodes: tuple[str, ...], why: str) -> Change:
    return Change(pass_name, nodes, (), note=why, refused=True)


def _form_text(nodes: list[IRNode]) -> str:
    return " then ".join(f"{n.name} ({n.op_type})" for n in nodes)


# --- fold_batchnorm -----------------------------------------------------------------------
def _fold_batchnorm(ir: GraphIR, bn: IRNode, used) -> tuple[GraphIR, Change] | Change | None:
    if bn.op_type != "BatchNorm":
        return None
    layer = ir.node(bn.inputs[0])
    if layer.op_type not in LAYERS:
        return None
    name = "fold_batchnorm"
    if sole_consumer(ir, layer.name, used) is not bn:
        return _refused(name, (layer.name, bn.name), f"{layer.name}'s value is also read "
                        "elsewhere (or returned), and the fold would change it")
    if layer.dtype != bn.dtype:
        return _refused(name, (layer.name, bn.name), f"dtypes differ ({layer.dtype}, "
                        f"{bn.dtype})")
    consts = ir.constants
    form = elementwise_step(bn, identity_form(bn.shape), consts)
    folded = absorb_output(layer, form, consts)
    if isinstance(folded, str):
        return _refused(name, (layer.name, bn.name), folded)
    a = bn.attrs
    scale = f"{a['weight'] or '1'} / sqrt({a['var']} + {a['eps']!r})"
    bias = layer.attrs["bias"] or "0"
    how = {"weight": f"{layer.attrs['weight']} * {scale} (per output channel)",
           "bias": f"({bias} - {a['mean']}) * {scale} + {a['bias'] or '0'}"}
    built = refit(ir, layer, bn.name, folded, layer.inputs, bn.shape, how)
    if isinstance(built, str):
        return _refused(name, (layer.name, bn.name), built)
    node, tensors, records = built
    new = rebuild(ir, {layer.name: [], bn.name: [node]}, constants=tensors)
    return new, Change(name, (layer.name, bn.name), (bn.name,), records,
                       f"{bn.name} folded into {layer.name}; the {layer.op_type} is named "
                       f"{bn.name}, whose value it computes")


# --- fold_input_normalisation -------------------------------------------------------------
def _normalisation(ir: GraphIR, start: IRNode, used) -> tuple[list, list, Form, IRNode] | str:
    """From the first node after an input: the affine nodes and moves up to a Linear or
    Conv2d, their form, and the layer; or why the chain does not reach one."""
    form = identity_form(ir.node(start.inputs[0]).shape)
    affine: list[IRNode] = []
    moves: list[IRNode] = []
    node: IRNode | None = start
    while node is not None:
        if node.op_type in ELEMENTWISE:
            step = elementwise_step(node, form, ir.constants)
            if isinstance(step, str):
                return f"{node.name}: {step}"
            form = step
            affine.append(node)
        elif node.op_type in MOVES:
            form = move_step(node, form)
            moves.append(node)
        else:
            break
        after = sole_consumer(ir, node.name, used)
        if after is None:
            return f"{node.name}'s value is read by more than the next node (or returned)"
        node = after
    if not affine:
        return ""
    if node.op_type not in LAYERS:
        return f"the normalisation reaches {node.name} ({node.op_type}), not a Linear or " \
               "Conv2d"
    return affine, moves, form, node


def _fold_input_normalisation(ir: GraphIR, x: IRNode, used
                              ) -> tuple[GraphIR, Change] | Change | None:
    if x.op_type != "Input":
        return None
    name = "fold_input_normalisation"
    for reader in used[x.name]:
        if reader == "<output>" or ir.node(reader).op_type not in (*ELEMENTWISE, *MOVES):
            continue
        found = _normalisation(ir, ir.node(reader), used)
        if found == "":
            continue
        if isinstance(found, str):
            return _refused(name, (x.name,), found)
        affine, moves, form, layer = found
        chain = [n for n in ir.nodes if n in affine or n in moves]
        if any(n.dtype != layer.dtype for n in chain):
            return _refused(name, tuple(n.name for n in affine), "dtypes differ along the "
                            "normalisation")
        shape = ir.node(layer.inputs[0]).shape
        folded = absorb_input(layer, form, ir.constants, shape)
        if isinstance(folded, str):
            return _refused(name, tuple(n.name for n in affine), folded)
        text = _form_text(affine)
        how = {"weight": f"{layer.attrs['weight']} * a (per input), y = a x + b the form of "
                         f"{text}",
               "bias": f"{layer.attrs['bias'] or '0'} + {layer.attrs['weight']} b, y = a x + "
                       f"b the form of {text}"}
        built = refit(ir, layer, layer.name, folded, layer.inputs, layer.shape, how)
        if isinstance(built, str):
            return _refused(name, tuple(n.name for n in affine), built)
        node, tensors, records = built
        taken = {n.name for n in ir.nodes}
        first = chain.index(affine[0])
        replaced: dict[str, list[IRNode]] = {n.name: [] for n in affine}
        rerouted = {n.name: n.inputs[0] for n in affine}
        renamed = []
        for move in chain[first:]:
            if move in moves:  # it now moves the raw input: a new value, a new name
                new_name = fresh_name(f"{move.name}.unnormalised", taken)
                taken.add(new_name)
                replaced[move.name] = [IRNode(new_name, move.op_type, move.inputs,
                                              move.attrs, move.shape, move.dtype, move.source)]
                rerouted[move.name] = new_name
                renamed.append(new_name)
        replaced[layer.name] = [node]
        new = rebuild(ir, replaced, rerouted, tensors)
        removed = tuple(n.name for n in chain[first:])
        return new, Change(name, removed + (layer.name,), (*renamed, layer.name), records,
                           f"{text} folded into {layer.name}")
    return None


# --- merge_affine_layers ------------------------------------------------------------------
def merged_bias(w2: Carried, b1: Carried | None, b2: Carried | None) -> Carried | None:
    """W2 b1 + b2 (None when neither layer has a bias)."""
    if b1 is None:
        return b2
    inner = w2.matmul(b1)
    return inner if b2 is None else inner + b2


def _merge_linears(ir: GraphIR, second: IRNode, used):
    first = ir.node(second.inputs[0])
    if first.op_type != "Linear" or sole_consumer(ir, first.name, used) is not second:
        return None
    if first.dtype != second.dtype:
        return _refused("merge_affine_layers", (first.name, second.name), "dtypes differ")
    c = ir.constants
    w1, w2 = Carried.of(c[first.attrs["weight"]]), Carried.of(c[second.attrs["weight"]])
    weight = w2.matmul(w1)
    b1, b2 = (None if first.attrs["bias"] is None else Carried.of(c[first.attrs["bias"]]),
              None if second.attrs["bias"] is None else Carried.of(c[second.attrs["bias"]]))
    bias = merged_bias(w2, b1, b2)
    names = (first.attrs["weight"], second.attrs["weight"], first.attrs["bias"],
             second.attrs["bias"])
    how = {"weight": f"{names[1]} @ {names[0]}",
           "bias": f"{names[1]} @ {names[2] or '0'} + {names[3] or '0'}"}
    built = refit(ir, second, second.name, (weight, bias), first.inputs, second.shape, how)
    if isinstance(built, str):
        return _refused("merge_affine_layers", (first.name, second.name), built)
    node, tensors, records = built
    new = rebuild(ir, {first.name: [], second.name: [node]}, constants=tensors)
    return new, Change("merge_affine_layers", (first.name, second.name), (second.name,),
                       records, f"{first.name} and {second.name} merged into one Linear")


def _merge_scale_into_layer(ir: GraphIR, layer: IRNode, used):
    after = sole_consumer(ir, layer.name, used)
    if after is None or after.op_type != "ElementwiseAffine" or after.dtype != layer.dtype:
        return None
    form, chain, node = identity_form(layer.shape), [], after
    while node is not None and node.op_type == "ElementwiseAffine" \
            and node.dtype == layer.dtype:
        step = elementwise_step(node, form, ir.constants)
        if isinstance(step, str):
            break
        form = step
        chain.append(node)
        node = sole_consumer(ir, node.name, used)
    if not chain:
        return None
    last = chain[-1]
    folded = absorb_output(layer, form, ir.constants)
    if isinstance(folded, str):
        return _refused("merge_affine_layers", (layer.name, *(n.name for n in chain)), folded)
    text = _form_text(chain)
    how = {"weight": f"a * {layer.attrs['weight']}, a x + b the form of {text}",
           "bias": f"a * {layer.attrs['bias'] or '0'} + b, a x + b the form of {text}"}
    built = refit(ir, layer, last.name, folded, layer.inputs, last.shape, how)
    if isinstance(built, str):
        return _refused("merge_affine_layers", (layer.name, *(n.name for n in chain)), built)
    new_node, tensors, records = built
    replaced = {layer.name: [], **{n.name: [] for n in chain[:-1]}, last.name: [new_node]}
    new = rebuild(ir, replaced, constants=tensors)
    return new, Change("merge_affine_layers", (layer.name, *(n.name for n in chain)),
                       (last.name,), records, f"{text} folded into {layer.name}")


def _merge_affine_layers(ir: GraphIR, node: IRNode, used):
    if node.op_type == "Linear":
        merged = _merge_linears(ir, node, used)
        if merged is not None:
            return merged
    if node.op_type in LAYERS:
        return _merge_scale_into_layer(ir, node, used)
    return None


def fold_batchnorm(ir: GraphIR) -> tuple[GraphIR, list[Change]]:
    """Every BatchNorm whose input is a Conv2d or Linear read by it alone, folded in."""
    return apply_everywhere(ir, _fold_batchnorm, "fold_batchnorm")


def fold_input_normalisation(ir: GraphIR) -> tuple[GraphIR, list[Change]]:
    """Every elementwise affine chain (ElementwiseAffine, BatchNorm, with moves between)
    from an input to a Linear or Conv2d, folded into that layer."""
    return apply_everywhere(ir, _fold_input_normalisation, "fold_input_normalisation")


def merge_affine_layers(ir: GraphIR) -> tuple[GraphIR, list[Change]]:
    """Linear then Linear merged; a Linear or Conv2d then a per-channel scale or shift
    (ElementwiseAffine) merged."""
    return apply_everywhere(ir, _merge_affine_layers, "merge_affine_layers")
