"""Opt-in rewrites (`convert(..., rewrite=True)`): NCET's private copy of a traced graph made
to say, out of place and with static shapes, what the model computes.

Each rule is semantics-preserving by construction, and is applied only where that is proved
on the FX graph:

* **in-place to out-of-place** (`RULE_INPLACE`): `x.relu_()`, `x.add_(y)`, `torch.relu_(x)`,
  `F.relu(x, inplace=True)`, `nn.ReLU(inplace=True)`, ... . An in-place op and its out-of-place
  form give the same value; they differ only in that the first overwrites its input. So the
  rewrite is safe exactly when nothing can observe the overwrite: the mutated tensor is not
  a graph input, a parameter or a buffer (nor a view of one), and neither it nor any tensor
  that may share its memory is read after the op (or by the op itself). "May share" is
  decided conservatively, by frontend/aliasing.py. A call_module node
  keeps its target (the module is the user's, and is never changed); NCET calls a shallow
  copy of it with `inplace=False` instead, kept in `node.meta[PRIVATE_MODULE]`.
* **size-dependent reshapes to static** (`RULE_STATIC_BATCH`): `x.size(0)`, `x.size()[0]`
  and `x.shape[0]` that flow only into the leading (batch) slot of a `view`/`reshape` become
  static: `v.view(n, -1)` becomes `v.flatten(1)`, `v.view(n, d1, ..., dk)` becomes
  `v.view(-1, d1, ..., dk)`, where `n` is the leading size of `v` itself. Both forms give the
  same tensor whenever the original does (`-1` is inferred as that same leading size). Any
  other use of a size is left alone, and rejected as before.
* **clamp at zero to ReLU** (`RULE_CLAMP_RELU`): `torch.clamp(x, min=0)`, `x.clamp(min=0)`,
  `x.clamp_min(0)`, `torch.clamp_min(x, 0)` and the `clip` spellings, with a lower bound of
  +0 (the int 0 or 0.0) and no upper bound, become `torch.relu(x)`: PyTorch computes them bit
  for bit alike (relu is clamp_min(0) in ATen; tests/test_clamping.py compares the bits over
  signed zeros, subnormals, infinities and NaNs in four dtypes). A bound of -0.0 or a tensor
  bound is left alone: clamp then differs from relu in the sign of zero.

`rewrite_graph(graph, modules)` applies them, in place, to a graph NCET owns, and returns a
`Rewritten` record per changed node and a `Refusal` per in-place op it could not rewrite.
Then the conversion walk runs each rewritten node's spelling *as written* on the example
inputs too (`check_rewrite`): it must run and give the same dtype, shape and values, or the
node is rejected; this is where a premise that the graph alone cannot show is checked (an
in-place op keeps its operand's dtype and shape; the view it replaces is possible).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .aliasing import inplace_flag, overwrite_observer
from .clamping import relu_clamp_target

ORIGINAL = "ncet_original"
"""node.meta key of a rewritten node's form as traced: (op, target, args, kwargs), the size a
static reshape dropped replaced by `LEADING` (see `check_rewrite`)."""

LEADING = object()
"""Stands for "the viewed tensor's own leading size" in a static reshape's original form."""

PRIVATE_MODULE = "ncet_private_module"
"""node.meta key of the module NCET calls instead of the user's (an out-of-place copy)."""

RULE_INPLACE = "inplace-to-out-of-place"
RULE_STATIC_BATCH = "static-batch-reshape"
RULE_CLAMP_RELU = "clamp-at-zero-to-relu"

RULES: dict[str, str] = {
    RULE_INPLACE: "an in-place op becomes its out-of-place form where nothing reads the "
                  "overwritten tensor, or a tensor that may share its memory, afterwards (or "
                  "in the op), and it is not an input, parameter or buffer; the spelling as "
                  "written must give the same dtype, shape and values on the example inputs",
    RULE_STATIC_BATCH: "x.size(0), x.size()[0] or x.shape[0] used only as the leading size of "
                       "`Tensor.view`, `Tensor.reshape` or `torch.reshape` of a tensor with that "
                       "same leading size becomes -1 (or flatten(1) for (n, -1)); the spelling "
                       "as written must give the same tensor on the example inputs",
    RULE_CLAMP_RELU: "`torch.clamp`, `torch.clip`, `torch.clamp_min`, `Tensor.clamp`, "
                     "`Tensor.clip` or `Tensor.clamp_min` with a lower bound of +0 (the int 0 "
                     "or 0.0, not -0.0 or a tensor) and no upper bound becomes `torch.relu`, "
                     "which PyTorch computes bit for bit alike (relu is clamp_min(0) in ATen; "
                     "tested over signed zeros, subnormals, infinities and NaNs in float32, "
                     "float64, bfloat16 and float16); the spelling as written must give the "
                     "same dtype, shape and values on the example inputs",
}
"""The rewrite rules: name -> what it does and why it is safe (rendered in the docs)."""

INPLACE_METHODS: dict[str, str] = {
    "relu_": "relu", "add_": "add", "sub_": "sub", "mul_": "mul", "div_": "div",
    "unsqueeze_": "unsqueeze", "squeeze_": "squeeze", "transpose_": "transpose",
}
"""In-place tensor methods and their out-of-place twins (same arguments, same value), for
the twins NCET maps (others stay rejected as in-place forms: a rewrite would only trade
one rejection for another)."""

INPLACE_FUNCTIONS: dict[object, object] = {
    torch.relu_: torch.relu, F.relu_: F.relu, F.leaky_relu_: F.leaky_relu,
}
"""In-place functions and their out-of-place twins."""

INPLACE_FLAG_FUNCTIONS = (F.relu, F.leaky_relu, F.dropout, F.dropout1d, F.dropout2d,
                          F.dropout3d)
"""Functions with an `inplace=` argument NCET maps: out of place with `inplace=False`."""

INPLACE_FLAG_MODULES = (nn.ReLU, nn.LeakyReLU, nn.Dropout, nn.Dropout1d, nn.Dropout2d,
                        nn.Dropout3d)
"""Modules with an `inplace` attribute NCET maps."""

_VIEW_METHODS = ("view", "reshape")

@dataclass(frozen=True)
class Rewritten:
    """One node a rule changed: the rule, the spelling as written, and why that is safe."""

    node: str
    rule: str
    spelling: str
    why: str


@dataclass(frozen=True)
class Refusal:
    """An in-place op the rule could not rewrite, and the node or fact that prevents it."""

    node: str
    spelling: str
    reason: str


def rewrite_graph(graph: torch.fx.Graph, modules: dict[str, nn.Module]
                  ) -> tuple[dict[str, Rewritten], dict[str, Refusal]]:
    """Apply the rewrite rules to `graph` (NCET's own copy), in place.

    Args:
        graph: The traced graph; changed in place.
        modules: Submodule path -> module, for the call_module nodes.

    Returns:
        The rewritten nodes by name, and the in-place nodes left alone (with the reason).
    """
    rewritten: dict[str, Rewritten] = {}
    refused: dict[str, Refusal] = {}
    order = {node: i for i, node in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        outcome = inplace_rewrite(node, modules, order)
        if isinstance(outcome, Refusal):
            refused[node.name] = outcome
        elif outcome is not None:
            node.meta[ORIGINAL] = (node.op, node.target, node.args, dict(node.kwargs))
            _make_out_of_place(node, modules)
            rewritten[node.name] = outcome
    for node in list(graph.nodes):
        outcome = static_batch_rewrite(node)
        if outcome is not None:
            size = _batch_slot(node)
            node.meta[ORIGINAL] = (node.op, node.target, _swapped(node.args, size, LEADING),
                                   dict(node.kwargs))
            rest = _sizes(node)[1:]
            if rest == [-1]:  # v.flatten(1), or torch.flatten(v, 1)
                node.target = "flatten" if node.op == "call_method" else torch.flatten
                node.args, node.kwargs = (node.args[0], 1), {}
            elif node.op == "call_method":
                node.args = (node.args[0], -1, *rest)
            else:
                node.args = (node.args[0], (-1, *rest))
            _erase_unused(size)
            rewritten[node.name] = outcome
    for node in list(graph.nodes):
        outcome = clamp_relu_rewrite(node)
        if outcome is not None:
            node.meta[ORIGINAL] = (node.op, node.target, node.args, dict(node.kwargs))
            node.op, node.target, node.args, node.kwargs = \
                "call_function", torch.relu, (node.args[0],), {}
            rewritten[node.name] = outcome
    return rewritten, refused  # tests/test_rewrites.py lints every rewritten graph


def inplace_rewrite(node: torch.fx.Node, modules: dict[str, nn.Module],
                    order: dict[torch.fx.Node, int] | None = None) -> Rewritten | Refusal | None:
    """What `RULE_INPLACE` makes of `node` (nothing is changed): None when it is not an
    in-place op, a Refusal naming what could observe the overwrite, else the Rewritten
    record `rewrite_graph` would give it. `order`: node -> position, when already known."""
    spelling = _inplace_spelling(node, modules)
    if spelling is None:
        return None
    if order is None:
        order = {n: i for i, n in enumerate(node.graph.nodes)}
    obstacle = overwrite_observer(node, order, modules)
    if obstacle:
        return Refusal(node.name, spelling, obstacle)
    return Rewritten(node.name, RULE_INPLACE, spelling, (
        f"nothing reads {node.args[0].name!r} or a tensor sharing its memory after this "
        "node, and it is not an input, parameter or buffer"))


def static_batch_rewrite(node: torch.fx.Node) -> Rewritten | None:
    """What `RULE_STATIC_BATCH` makes of `node` (nothing is changed): the Rewritten record
    for a `v.view(n, ...)`/`v.reshape(n, ...)`/`torch.reshape(v, (n, ...))` whose `n` is v's
    own leading size and whose other sizes are static, else None."""
    if len(node.args) < 2 or not (
            (node.op == "call_method" and node.target in _VIEW_METHODS)
            or (node.op == "call_function" and node.target is torch.reshape)):
        return None
    sizes = _sizes(node)
    if not sizes or not _is_leading_size_of(sizes[0], node.args[0]):
        return None
    rest = sizes[1:]
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in rest) \
            or rest.count(-1) > (1 if rest == [-1] else 0):
        return None  # another traced size, or a second inferred one: not static
    shown = ", ".join([_size_spelling(sizes[0]), *map(str, rest)])
    spelling = f"Tensor.{node.target}({shown})" if node.op == "call_method" else \
        f"torch.reshape({node.args[0].name}, ({shown}))"
    return Rewritten(node.name, RULE_STATIC_BATCH, spelling, (
        f"the size is {node.args[0].name!r}'s own leading size, which -1 infers"))


def clamp_relu_rewrite(node: torch.fx.Node) -> Rewritten | None:
    """What `RULE_CLAMP_RELU` makes of `node` (nothing is changed): the Rewritten record for
    a clamp at +0 without an upper bound (`clamping.relu_clamp_target`), else None."""
    if not relu_clamp_target(node):
        return None
    what = f"Tensor.{node.target}" if node.op == "call_method" else _name(node.target)
    return Rewritten(node.name, RULE_CLAMP_RELU, f"{what}(min=0)", (
        "a clamp at +0 without an upper bound is torch.relu bit for bit"))


def static_batch_user(size: torch.fx.Node) -> torch.fx.Node | None:
    """The view/reshape that `RULE_STATIC_BATCH` would make static by dropping `size` (a
    `size`, `getitem` or `getattr(..., "shape")` node of the chain), or None."""
    for _ in range(3):  # size() -> getitem -> view, or getattr -> getitem -> view
        if len(size.users) != 1:
            return None
        (user,) = size.users
        if static_batch_rewrite(user) is not None:
            return user
        size = user
    return None


# --- in place ------------------------------------------------------------------------------
def _inplace_spelling(node: torch.fx.Node, modules) -> str | None:
    """The spelling of an in-place op at `node` (as the user wrote it), or None."""
    if node.op == "call_method" and node.target in INPLACE_METHODS:
        return f"Tensor.{node.target}"
    if node.op == "call_function":
        if node.target in INPLACE_FUNCTIONS:
            return _name(node.target)
        if node.target in INPLACE_FLAG_FUNCTIONS and inplace_flag(node) is True:
            return f"{_name(node.target)}(..., inplace=True)"
    if node.op == "call_module":
        module = modules.get(str(node.target))
        if isinstance(module, INPLACE_FLAG_MODULES) and getattr(module, "inplace", False) is True:
            return f"nn.{type(module).__name__}(inplace=True)"
    return None


def _make_out_of_place(node: torch.fx.Node, modules) -> None:
    if node.op == "call_method":
        node.target = INPLACE_METHODS[node.target]
    elif node.op == "call_function" and node.target in INPLACE_FUNCTIONS:
        node.target = INPLACE_FUNCTIONS[node.target]
    elif node.op == "call_function":
        if "inplace" in node.kwargs:
            node.kwargs = {**node.kwargs, "inplace": False}
        else:
            index = list(inspect.signature(node.target).parameters).index("inplace")
            node.args = (*node.args[:index], False, *node.args[index + 1:])
    else:  # call_module: the user's module stays as it is; NCET calls a copy of its own
        module = modules[str(node.target)]
        private = object.__new__(type(module))  # a shallow copy (as copy.copy, but faster):
        private.__dict__.update(module.__dict__, inplace=False)  # nothing to write but this
        node.meta[PRIVATE_MODULE] = private


# --- static batch ----------------------------------------------------------------------------
def _sizes(node: torch.fx.Node) -> list:
    """The sizes a view/reshape node asks for, packed (`view((n, -1))`) or not."""
    packed = len(node.args) == 2 and isinstance(node.args[1], (tuple, list))
    return list(node.args[1] if packed else node.args[1:])


def _batch_slot(node: torch.fx.Node) -> torch.fx.Node:
    return _sizes(node)[0]


def _erase_unused(node: torch.fx.Node) -> None:
    """Erase `node` and then each of its inputs that nothing else uses (the size chain a
    static reshape no longer reads); nothing else in the graph is touched."""
    if node.users or node.op not in ("call_method", "call_function"):
        return
    inputs = node.all_input_nodes
    node.graph.erase_node(node)
    for used in inputs:
        if used.op != "placeholder" and used.target in ("size", getattr, operator.getitem):
            _erase_unused(used)


def _is_leading_size_of(size: object, tensor: object) -> bool:
    """True for a node computing `tensor.size(0)`, `tensor.size()[0]` or `tensor.shape[0]`
    that nothing else uses."""
    if not isinstance(size, torch.fx.Node) or len(size.users) != 1:
        return False
    if size.op == "call_method" and size.target == "size":
        return size.args[:1] == (tensor,) and (size.args[1:] == (0,)
                                                or size.kwargs == {"dim": 0})
    if size.op == "call_function" and size.target is operator.getitem and size.args[1] == 0:
        whole = size.args[0]
        if not isinstance(whole, torch.fx.Node) or whole.args[:1] != (tensor,):
            return False
        return (whole.op == "call_method" and whole.target == "size" and len(whole.args) == 1
                and not whole.kwargs) or (whole.op == "call_function" and whole.target is getattr
                                          and whole.args[1] == "shape")
    return False


def _size_spelling(size: torch.fx.Node) -> str:
    tensor = size.args[0].args[0] if size.op == "call_function" else size.args[0]
    if size.op == "call_method":
        return f"{tensor.name}.size(0)"
    whole = size.args[0]
    return f"{tensor.name}.shape[0]" if whole.op == "call_function" else \
        f"{tensor.name}.size()[0]"


def _name(target: object) -> str:
    module = getattr(target, "__module__", "") or ""
    prefix = "F" if module == "torch.nn.functional" else "torch"
    return f"{prefix}.{getattr(target, '__name__', repr(target))}"


def _swapped(value, old: object, new: object):
    """`value` with `old` (compared by identity) replaced by `new`, also inside tuples and
    lists (a packed shape): the size a static reshape drops becomes `LEADING` in its original
    form, and `LEADING` the viewed tensor's leading size when that form is run."""
    if value is old:
        return new
    if isinstance(value, (tuple, list)):
        return type(value)(_swapped(v, old, new) for v in value)
    return value


# --- checking a rewrite on the example inputs ---------------------------------------------------
def check_rewrite(node: torch.fx.Node, rule: str, values: Callable[[torch.fx.Node], tuple],
                  module: nn.Module | None) -> str:
    """Why the rewritten `node` does not give, on the example inputs, exactly what the
    spelling as written gives ("" when it does): the original form runs on the values of
    its operands at each batch size (an in-place op on a copy of its operand; `module` is the
    user's module for a call_module node) and must succeed and give the same dtype and shape
    at each, and the same values at the first (the second may come from fake tensors).
    This is what makes a rule's premises hold for this node: the in-place op keeps its
    operand's dtype and shape (no type promotion, no broadcasting into it), reads nothing it
    overwrites, and the view it replaces is possible."""
    op, target, args, kwargs = node.meta[ORIGINAL]
    for index, result in enumerate(values(node)):
        a = torch.fx.node.map_arg(args, lambda n, i=index: values(n)[i])
        k = torch.fx.node.map_arg(kwargs, lambda n, i=index: values(n)[i])
        if rule == RULE_STATIC_BATCH:
            a = _swapped(a, LEADING, a[0].shape[0])
        elif isinstance(a[0], torch.Tensor):
            a = (a[0].clone(), *a[1:])
        try:
            if op == "call_module":
                expected = module.forward(*a, **k)
            elif op == "call_method":
                expected = getattr(a[0], target)(*a[1:], **k)
            else:
                expected = target(*a, **k)
        except Exception as exc:  # the model's own spelling fails where the rewrite runs
            first = (str(exc).strip().splitlines() or [""])[0][:160]
            return f"as written it fails on the example inputs ({type(exc).__name__}: {first})"
        if not (isinstance(expected, torch.Tensor) and isinstance(result, torch.Tensor)):
            return "as written it does not give a tensor"
        if expected.dtype != result.dtype or expected.shape != result.shape:
            return (f"as written it gives {expected.dtype} {list(expected.shape)}, rewritten "
                    f"{result.dtype} {list(result.shape)}")
        if index == 0 and not bool(((expected == result) | (expected.isnan() & result.isnan()))
                                   .all()):
            return "as written it gives other values (it reads what it overwrites)"
    return ""

