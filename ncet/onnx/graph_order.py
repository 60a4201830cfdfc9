"""Whether every value an ONNX graph reads is defined before it is read, in one pass over the
nodes in file order: a node input that nothing defines (`onnx-undefined-input`; "" is an
absent optional input), a graph output that nothing defines (`onnx-undefined-output`), a
value read before the node that defines it (`onnx-unsorted`), or nodes that read each other
in a cycle (`onnx-cycle`). onnx.checker finds some of these only when asked (lint_onnx); these
checks run whenever a file is read.

Subgraphs (If, Loop, Scan bodies) are scoped as ONNX scopes them: a body reads its own
inputs, initializers and earlier nodes' outputs, and any value of the enclosing graphs defined
before the node that holds it; a body that defines a name again, its own or an enclosing
graph's, is refused (`onnx-duplicate-definition`: ONNX allows no shadowing). Functions'
bodies read their inputs. Nesting is bounded first (`file_limits.walk_model`), so the
recursion here is shallow.
"""

from __future__ import annotations

from collections import deque

import onnx

from .reading_errors import ONNXFileError


def check_order(model: onnx.ModelProto, what: str, subgraphs: bool = True) -> None:
    """Raise ONNXFileError at the first value read before or without a definition, in file
    order, in the model's graph, its subgraphs and its functions (`subgraphs` False: the
    caller knows there are none, so no attribute is looked at)."""
    graph = model.graph
    _check_body(graph.node, [_own_names(graph)], graph.output, "the graph", what, subgraphs)
    for f in model.functions:
        outputs = [onnx.ValueInfoProto(name=n) for n in f.output]
        _check_body(f.node, [set(f.input)], outputs, f"function {f.name!r}", what, subgraphs)


def _own_names(graph: onnx.GraphProto) -> set[str]:
    names = {v.name for v in graph.input}
    names.update(t.name for t in graph.initializer)
    names.update(s.values.name for s in graph.sparse_initializer)
    return names


def _body_names(body: onnx.GraphProto, scopes: list[set[str]], where: str,
                what: str) -> set[str]:
    """A body's inputs and initializers, none a name it or an enclosing graph has."""
    names: set[str] = set()
    entries = [(v.name, f"input {k}") for k, v in enumerate(body.input)]
    entries += [(t.name, f"initializer {k}") for k, t in enumerate(body.initializer)]
    entries += [(sp.values.name, f"sparse initializer {k}")
                for k, sp in enumerate(body.sparse_initializer)]
    for name, entry in entries:
        if name in names or any(name in s for s in scopes):
            _shadows(name, f"{entry} of {where}", what)
        names.add(name)
    return names


def _shadows(name: str, entry: str, what: str) -> None:
    raise ONNXFileError(
        "onnx-duplicate-definition", f"{what}: {entry} defines {name!r}, which its graph or "
        "an enclosing one defines already; ONNX allows no shadowing, and a reader may take "
        "either definition", name=name, entries=(entry,))


def _label(i: int, node: onnx.NodeProto, where: str) -> str:
    at = "" if where == "the graph" else f" of {where}"
    return f"node {i} ({node.op_type} {node.name!r}){at}"


def _bodies(node: onnx.NodeProto):
    for a in node.attribute:
        if a.HasField("g"):
            yield a, a.g
        for g in a.graphs:
            yield a, g


def _check_body(nodes, scopes: list[set[str]], outputs, where: str, what: str,
                subgraphs: bool = True) -> None:
    defined = scopes[-1]
    for i, node in enumerate(nodes):
        for name in node.input:
            if name and name not in defined and not any(name in s for s in scopes):
                _refuse(nodes, i, name, where, what)
        if subgraphs and node.attribute:
            for a, body in _bodies(node):
                inner = f"the body {a.name!r} of {_label(i, node, where)}"
                names = _body_names(body, scopes, inner, what)
                _check_body(body.node, [*scopes, names], body.output, inner, what)
        if len(scopes) > 1:  # in a body: no name of its own or of an enclosing graph again
            for j, name in enumerate(node.output):
                if name and (name in defined or any(name in s for s in scopes)):
                    _shadows(name, f"{_label(i, node, where)} output {j}", what)
        defined.update(node.output)
    defined.discard("")
    for j, value in enumerate(outputs):
        if value.name not in defined and not any(value.name in s for s in scopes):
            raise ONNXFileError(
                "onnx-undefined-output", f"{what}: output {j} of {where} is {value.name!r}, "
                "which no graph input, initializer or node defines", name=value.name,
                entries=(f"{where} output {j}",))


def _reads(node: onnx.NodeProto) -> set[str]:
    """Every name a node reads: its inputs and whatever its bodies read (a superset)."""
    names = set(node.input)
    stack = [body for _, body in _bodies(node)]
    while stack:
        body = stack.pop()
        for inner in body.node:
            names.update(inner.input)
            stack.extend(g for _, g in _bodies(inner))
    return names


def _refuse(nodes, i: int, name: str, where: str, what: str) -> None:
    node = nodes[i]
    label = _label(i, node, where)
    later = next((j for j in range(i, len(nodes)) if name in nodes[j].output), None)
    if later is None:
        raise ONNXFileError(
            "onnx-undefined-input", f"{what}: {label} reads {name!r}, which nothing defines "
            "before it: no graph input, initializer, earlier node output or enclosing "
            "graph's value; is a node or an initializer missing?", name=name,
            entries=(label,))
    cycle = _cycle(nodes, i, later)
    if cycle:
        entries = tuple(_label(k, nodes[k], where) for k in cycle)
        raise ONNXFileError(
            "onnx-cycle", f"{what}: {label} reads {name!r}, which {entries[-1]} defines, and "
            f"these nodes read each other in a cycle: {' -> '.join(entries)}; a graph is "
            "acyclic", name=name, entries=entries)
    defining = _label(later, nodes[later], where)
    raise ONNXFileError(
        "onnx-unsorted", f"{what}: {label} reads {name!r}, which only the later {defining} "
        "defines; ONNX requires nodes in topological order (onnx.checker refuses the file "
        "too): re-save it sorted", name=name, entries=(label, defining))


def _cycle(nodes, start: int, producer: int) -> list[int]:
    """The nodes from `start` to `producer` along values read (`start` first), if
    `producer` depends on `start`: then `start` reading its output closes a cycle."""
    if producer == start:
        return [start]
    readers: dict[str, list[int]] = {}
    for k in range(start, len(nodes)):
        for name in _reads(nodes[k]):
            readers.setdefault(name, []).append(k)
    came_from = {start: start}
    queue = deque([start])
    while queue:
        k = queue.popleft()
        for out in nodes[k].output:
            for reader in readers.get(out, ()) if out else ():
                if reader not in came_from:
                    came_from[reader] = k
                    queue.append(reader)
        if producer in came_from:
            path = [producer]
            while path[-1] != start:
                path.append(came_from[path[-1]])
            return path[::-1]
    return []
