"""Text from a file or a model, shown on one line: the control characters that would break
or shift a line escaped (`\\x0a`, `\\u2028`), for the CLI's listings and `lint_onnx`'s."""

from __future__ import annotations

import re

UNICODE_CONTROLS = "\u2028\u2029\u202a-\u202e\u2066-\u2069"
"""Line and paragraph separators, and the bidirectional embeddings, overrides and isolates
(which reorder what a terminal shows)."""

CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{UNICODE_CONTROLS}]")
"""C0 and C1 control characters (\\r, \\x0b, \\x0c, \\x1c-\\x1e and \\x85 among them), DEL and
`UNICODE_CONTROLS`, except tab (\\x09) and newline (\\x0a)."""

NAME_CONTROL = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{UNICODE_CONTROLS}]")
"""`CONTROL` and tab and newline: every character that breaks or shifts a line."""


def escaped(match: re.Match) -> str:
    """The escape of one matched character: `\\xNN` below 0x100, else `\\uNNNN`."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def name_text(name: str) -> str:
    """A name from a file as one line: every line break, tab and control character escaped
    (`\\x0a`, `\\u2028`, ...), so that it cannot start a line of its own."""
    return NAME_CONTROL.sub(escaped, name)
