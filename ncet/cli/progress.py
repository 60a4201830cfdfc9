"""A text progress bar on stderr, driven by check_exactness's progress callback."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30
"""Characters in the bar itself."""


class ProgressBar:
    """Callable as `progress(done, total)`; redraws one line on a terminal.

    On a terminal the line is redrawn in place; elsewhere (CI logs, pipes) a line is written
    only at each tenth of the way, so logs stay short.

    Example:
        >>> ncet.check_exactness(model, ir, progress=ProgressBar("checking exactness"))
    """

    def __init__(self, label: str, stream: TextIO | None = None):
        self.label = label
        stream = sys.stderr if stream is None else stream
        self.stream = getattr(stream, "trusted", stream)  # its own text: carriage returns kept
        self.start = time.monotonic()
        self.tty = self.stream.isatty()
        self.last_tenth = -1

    def __call__(self, done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        filled = round(WIDTH * fraction)
        line = (f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] "
                f"{int(100 * fraction):3d}% {time.monotonic() - self.start:.1f}s")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done >= total else ""))
        elif int(fraction * 10) > self.last_tenth:
            self.last_tenth = int(fraction * 10)
            self.stream.write(line + "\n")
        self.stream.flush()
