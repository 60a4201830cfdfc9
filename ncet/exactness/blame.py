"""Which violations of an exactness check are root causes, and which nodes and outputs they
leave uncertified downstream (read from the report's entries and their `inputs`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

_NONE: frozenset[str] = frozenset()


def _empty() -> Mapping:
    return MappingProxyType({})


@dataclass(frozen=True)
class Blame:
    """The violations of one report, traced along the graph's edges.

    Attributes:
        roots: Names of the root-cause nodes, in topological order.
        upstream: Node name -> the root causes upstream of it (strict ancestors), for every
            node downstream of a violation (absent: nothing upstream violated).
        outputs: Output name -> the root causes it depends on (its own node included), for
            every output downstream of (or at) a violated node.
    """

    roots: tuple[str, ...] = ()
    upstream: Mapping[str, frozenset[str]] = field(default_factory=_empty)
    outputs: Mapping[str, frozenset[str]] = field(default_factory=_empty)


def trace_violations(entries: Sequence, outputs: Sequence) -> Blame:
    """Single out the root causes among the violated entries and find what they reach.

    A violated node is a root cause when its node-local check failed and none of its own
    inputs is structurally wrong (the node-local check runs on the runtime's own values of
    its inputs, so a numeric fault upstream does not reach it; an input that does not
    correspond to what runs, `ExactnessEntry.structural`, does), or when nothing upstream of
    it is violated (an end-to-end violation with a clean past). Every other
    node or output with a violated node upstream is downstream of a violation: its
    end-to-end comparison is against a reference that a fault has already moved, so nothing
    is certified there, whatever its own numbers say.

    Entries are in topological order. An entry whose `inputs` is empty (a report made
    before entries recorded them) is taken to depend on every entry before it: the
    conservative reading, under which only the first violation is a root cause.

    Args:
        entries: The report's `ExactnessEntry` records.
        outputs: The report's `OutputEntry` records (named after their IR nodes).
    """
    if not any(e.violated for e in entries):
        return Blame()
    violated = {e.name for e in entries if e.violated}
    structural = {e.name for e in entries if getattr(e, "structural", False)}
    roots: list[str] = []
    reach: dict[str, frozenset[str]] = {}  # root causes at or upstream of a node
    tainted: set[str] = set()  # nodes with a violated strict ancestor
    before, before_tainted = _NONE, False  # for entries without inputs: all earlier ones
    for e in entries:
        if e.inputs:
            ins = e.inputs
            upstream = _NONE.union(*(reach.get(i, _NONE) for i in ins))
            downstream = any(i in violated or i in tainted for i in ins)
            bad_input = any(i in structural for i in ins)
        else:
            upstream, downstream, bad_input = before, before_tainted, before_tainted
        root = e.violated and ((e.local_violations > 0 and not bad_input) or not downstream)
        if root:
            roots.append(e.name)
        if downstream:
            tainted.add(e.name)
        mine = upstream | {e.name} if root else upstream
        if mine:
            reach[e.name] = mine
        before = before | mine
        before_tainted = before_tainted or e.violated
    blamed = {name: frozenset(reach.get(name, _NONE) - {name}) for name in tainted}
    at = {o.name: reach[o.name] for o in outputs if o.name in reach
          and (o.name in violated or o.name in tainted)}
    return Blame(tuple(roots), MappingProxyType(blamed), MappingProxyType(at))
