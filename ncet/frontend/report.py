"""ConversionReport: one row per FX node, with every problem of the model at once."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from ..errors import ConversionError
from ..ir import GraphIR, Source

STATUSES = ("mapped", "lifted", "unsupported", "boundary", "skipped")
"""Row statuses: mapped to an op_type, lifted into constants, rejected by spelling, rejected
by the support boundary, or not checked because a node it depends on failed to run (or was
not run: a rejected function of the user's own code)."""

_PROBLEMS = ("unsupported", "boundary")

ROW_COLUMNS = ("fx_name", "fx_op", "spelling", "module_path", "module_type", "op_type",
               "status", "code", "message", "hint", "shape", "location", "source_text",
               "rewrite")
"""The columns of `ConversionReport.to_pandas`: the provenance first, then the outcome, and
the rewrite rule that changed the node (with `rewrite=True`; "" for none)."""


@dataclass(frozen=True, slots=True)
class Row:
    """What NCET made of one FX node.

    `source` is the node's provenance record (`Source`, the record an IRNode carries: FX
    node, spelling, module path and type, file:line); `fx_name`, `fx_op`, `spelling`,
    `module_path`, `module_type` and `location` read it.
    """

    source: Source
    op_type: str | None
    status: str
    code: str | None
    message: str
    hint: str
    shape: tuple[int, ...] | None
    error: ConversionError | None = field(default=None, compare=False, repr=False)
    source_text: str = ""
    rewrite: str = ""

    fx_name = property(lambda self: self.source.fx_name, doc="The FX node's name.")
    fx_op = property(lambda self: self.source.fx_op, doc="The FX node's op.")
    spelling = property(lambda self: self.source.target, doc="The spelling NCET saw.")
    module_path = property(lambda self: self.source.module_path, doc="The module's path.")
    module_type = property(lambda self: self.source.module_type, doc="The module's type.")
    location = property(lambda self: self.source.location, doc="file:line, or \"\".")


@dataclass(frozen=True)
class ConversionReport:
    """The result of `diagnose`: a row per FX node and, when every node converts, the GraphIR.

    Attributes:
        rows: One `Row` per FX node, in graph order (a single row when tracing failed).
        graph: The GraphIR when `ok`, else None.
    """

    rows: tuple[Row, ...]
    graph: GraphIR | None

    @property
    def ok(self) -> bool:
        """True when the whole model converts."""
        return self.graph is not None

    @property
    def errors(self) -> tuple[Row, ...]:
        """The rows with a problem, in graph order."""
        return tuple(r for r in self.rows if r.status in _PROBLEMS)

    def raise_first(self) -> None:
        """Raise the first problem's ConversionError, if there is one."""
        for row in self.errors:
            raise row.error

    def to_pandas(self):
        """The rows as a pandas DataFrame (without the error objects)."""
        import pandas as pd

        columns = ROW_COLUMNS
        return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in self.rows],
                            columns=columns)

    def summary(self) -> str:
        """One line: how many nodes, how many mapped, how many problems."""
        counts = {s: sum(1 for r in self.rows if r.status == s) for s in STATUSES}
        parts = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        verdict = "converts" if self.ok else f"rejected: {len(self.errors)} problem(s)"
        return f"{len(self.rows)} FX nodes ({parts}); {verdict}"

    def table(self) -> str:
        """The per-node mapping table as fixed-width text."""
        header = ("node", "fx op", "spelling", "module", "op_type", "status", "shape", "source")
        lines = [header] + [(
            r.fx_name, r.fx_op, r.spelling, r.module_path, r.op_type or "-",
            r.status if r.code is None else f"{r.status}:{r.code}",
            "" if r.shape is None else str(list(r.shape)), r.location) for r in self.rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
                         for line in lines)

    def __repr__(self) -> str:
        text = [self.summary(), self.table()]
        text += [f"- {r.message}" for r in self.errors]
        return "\n".join(text)

    def _repr_html_(self) -> str:
        columns = ("fx_name", "fx_op", "spelling", "module_path", "op_type", "status", "code",
                   "shape", "location", "message")
        head = "".join(f"<th>{c}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{_cell(getattr(r, c))}</td>" for c in columns) + "</tr>"
            for r in self.rows)
        return (f"<p>{html.escape(self.summary())}</p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _cell(value) -> str:
    return "" if value is None else html.escape(str(value))
