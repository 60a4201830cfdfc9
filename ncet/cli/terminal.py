"""What the `ncet` command prints is safe for a terminal, whatever a file or model names.

A GraphIR file, a model's module names or a TARGET's error message are untrusted text: a
name holding an escape sequence could clear the screen or print a fake "all checks passed",
a name holding a line break could print a line that looks like NCET's own, and a lone
surrogate (which JSON allows) cannot be encoded at all. The command's standard output and
error go through `SafeStream`, which writes control characters (all but newline and tab),
Unicode's line and paragraph separators and its bidirectional controls as `\\xNN` /
`\\uNNNN` escapes, and characters the stream cannot encode as backslash escapes. Newline and
tab are NCET's own layout, so the names a file holds are escaped before they are laid out:
`name_text` for one name, `shown_graphs` for GraphIRs as `show` and `diff` print them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from ..escapes import CONTROL, escaped, name_text

if TYPE_CHECKING:
    from ..exactness.report import ExactnessReport
    from ..ir import GraphIR


def printable(text: str, encoding: str | None = None) -> str:
    """`text` with control characters escaped and, for `encoding` (UTF-8 by default),
    unencodable characters (lone surrogates, say) written as backslash escapes."""
    text = CONTROL.sub(escaped, text)
    encoding = encoding or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding)


def shown_graphs(*graphs: GraphIR) -> tuple[GraphIR, ...]:
    """The GraphIRs with every node, operand and constant name passed through `name_text`,
    for printing (the same objects when no name needs it). One renaming serves them all, so
    that a comparison of the copies matches what the originals match; should it merge two
    names, each name is shown as Python's ascii() writes it instead."""
    names = {n.name for g in graphs for n in g.nodes} | {k for g in graphs for k in g.constants}
    if all(name_text(name) == name for name in names):
        return graphs
    shown = name_text
    if len({name_text(name) for name in names}) < len(names):
        shown = lambda name: ascii(name)[1:-1]  # noqa: E731  one-to-one
    return tuple(_renamed(g, shown) for g in graphs)


def shown_exactness(report: ExactnessReport) -> ExactnessReport:
    """The report with every node and output name passed through `name_text`, for printing
    its table and summary (the same object when no name needs it); as in `shown_graphs`,
    names the escape would merge are shown as Python's ascii() writes them instead."""
    names = {e.name for e in report.entries} | {i for e in report.entries for i in e.inputs} \
        | {o.name for o in report.outputs}
    if all(name_text(name) == name for name in names):
        return report
    shown = name_text
    if len({name_text(name) for name in names}) < len(names):
        shown = lambda name: ascii(name)[1:-1]  # noqa: E731  one-to-one
    entries = tuple(dataclasses.replace(e, name=shown(e.name),
                                        inputs=tuple(shown(i) for i in e.inputs))
                    for e in report.entries)
    outputs = tuple(dataclasses.replace(o, name=shown(o.name)) for o in report.outputs)
    return dataclasses.replace(report, entries=entries, outputs=outputs)


def _renamed(graph: GraphIR, shown) -> GraphIR:
    from ..ir import CONSTANT_ATTRS, GraphIR

    nodes = []
    for n in graph.nodes:
        attrs = dict(n.attrs)
        for key in CONSTANT_ATTRS[n.op_type]:
            if isinstance(attrs.get(key), str):
                attrs[key] = shown(attrs[key])
        nodes.append(dataclasses.replace(n, name=shown(n.name), attrs=attrs,
                                         inputs=tuple(shown(i) for i in n.inputs)))
    return GraphIR(tuple(nodes), {shown(k): v for k, v in graph.constants.items()})


class SafeStream(io.TextIOBase):
    """A text stream that writes `printable` text to `trusted`, the stream it wraps (which
    NCET's own progress bar writes to directly, for its carriage returns)."""

    def __init__(self, trusted: TextIO):
        self.trusted = trusted

    def write(self, text: str) -> int:
        self.trusted.write(printable(text, getattr(self.trusted, "encoding", None)))
        return len(text)

    def flush(self) -> None:
        self.trusted.flush()

    def isatty(self) -> bool:
        return self.trusted.isatty()

    @property
    def encoding(self) -> str:
        return getattr(self.trusted, "encoding", None) or "utf-8"


@contextlib.contextmanager
def safe_streams() -> Iterator[None]:
    """sys.stdout and sys.stderr wrapped in `SafeStream` for the duration."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
