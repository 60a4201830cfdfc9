"""What the renderers show about a record beyond its fields: its source line quoted as
messages quote it, the meaning of a reason code, the constants an IR node uses."""

from __future__ import annotations

from ..errors import REASONS
from ..errors import quote_source as _quote_source
from ..ir import CONSTANT_ATTRS, IRNode
from ..onnx.import_errors import IMPORT_REASONS


def quote_source(location: str, source_text: str) -> str:
    """A source location as messages show it: `file:line `code``, the location alone
    without the code, "" without either.

    Example:
        >>> quote_source("model.py:12", "y = torch.sin(x)")
        'model.py:12 `y = torch.sin(x)`'
    """
    return _quote_source(location, source_text)


def reason_summary(code: str) -> str:
    """The one-line meaning of a reason code ("" for a code NCET does not document)."""
    reason = REASONS.get(code) or IMPORT_REASONS.get(code)
    return reason.summary if reason is not None else ""


def node_constants(node: IRNode) -> tuple[str, ...]:
    """Names of the constants an IR node uses, in its op_type's attribute order (attributes
    of kind "const", and of kind "const?" when set)."""
    return tuple(node.attrs[a] for a in CONSTANT_ATTRS[node.op_type]
                 if node.attrs[a] is not None)
