"""What the `ncet` command prints is safe for a terminal, whatever a file or model names.

A GraphIR file, a model's module names or a TARGET's error message are untrusted text: a
name holding an escape sequence could clear the screen or print a fake "all checks passed",
and a lone surrogate (which JSON allows) cannot be encoded at all. The command's standard
output and error go through `SafeStream`, which writes control characters (all but newline
and tab) as `\\xNN` escapes and characters the stream cannot encode as backslash escapes.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterator
from typing import TextIO

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 control characters and DEL, except tab (\\x09) and newline (\\x0a)."""


def printable(text: str, encoding: str | None = None) -> str:
    """`text` with control characters escaped and, for `encoding` (UTF-8 by default),
    unencodable characters (lone surrogates, say) written as backslash escapes."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    encoding = encoding or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding)


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
