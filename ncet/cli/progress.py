"""A text progress bar on stderr, driven by check_exactness's progress callback."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30
"""Characters in the bar itself."""

QUIET_SECONDS = 30.0
"""Off a terminal, the least time between two lines before the last one."""


class ProgressBar:
    """Callable as `progress(done, total)`; redraws one line on a terminal.

    On a terminal the line is redrawn in place; elsewhere (CI logs, pipes, a file) one line
    is written when the work is done, and before that at most one line every
    `QUIET_SECONDS`, so a long check still shows it is alive and a log stays short.

    Example:
        >>> ncet.check_exactness(model, ir, progress=ProgressBar("checking exactness"))
    """

    def __init__(self, label: str, stream: TextIO | None = None):
        self.label = label
        stream = sys.stderr if stream is None else stream
        self.stream = getattr(stream, "trusted", stream)  # its own text: carriage returns kept
        self.start = time.monotonic()
        self.tty = self.stream.isatty()
        self.last_line = self.start
        self.finished = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        fraction = done / total if total else 1.0
        filled = round(WIDTH * fraction)
        line = (f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] "
                f"{int(100 * fraction):3d}% {now - self.start:.1f}s")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done >= total else ""))
        elif done >= total and not self.finished:
            self.finished = True
            self.stream.write(line + "\n")
        elif done < total and now - self.last_line >= QUIET_SECONDS:
            self.last_line = now
            self.stream.write(line + "\n")
        else:
            return
        self.stream.flush()
