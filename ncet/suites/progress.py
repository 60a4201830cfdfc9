"""A suite's progress: instances done of the total and the outcomes so far, as a widget in a
notebook (ipywidgets, when the run is in a Jupyter kernel and it is installed) or as the
command line's text bar on stderr."""

from __future__ import annotations

import sys
from collections import Counter


class _Text:
    def __init__(self, total: int):
        from ..cli.progress import ProgressBar

        self.total, self.done, self.counts = total, 0, Counter()
        self.bar = ProgressBar("suite")
        self.bar(0, total)

    def update(self, row: dict) -> None:
        self.done += 1
        self.counts[row.get("outcome")] += 1
        self.bar.label = "suite " + " ".join(f"{o}:{n}" for o, n in sorted(self.counts.items()))
        self.bar(self.done, self.total)

    def close(self) -> None:
        if self.done < self.total:
            self.bar.stream.write("\n")


class _Widget:
    def __init__(self, total: int):
        import ipywidgets
        from IPython.display import display

        self.total, self.done, self.counts = total, 0, Counter()
        self.bar = ipywidgets.IntProgress(value=0, min=0, max=total, description="suite")
        self.label = ipywidgets.Label(f"0 / {total}")
        display(ipywidgets.HBox([self.bar, self.label]))

    def update(self, row: dict) -> None:
        self.done += 1
        self.counts[row.get("outcome")] += 1
        self.bar.value = self.done
        self.label.value = f"{self.done} / {self.total}: " + ", ".join(
            f"{n} {o}" for o, n in sorted(self.counts.items()))

    def close(self) -> None:
        self.bar.bar_style = "success" if self.done == self.total else "warning"


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    ip = shell.get_ipython() if hasattr(shell, "get_ipython") else None
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def progress_bar(total: int):
    """An object with `update(row)` (one more instance done) and `close()`."""
    if _in_kernel():
        try:
            return _Widget(total)
        except ImportError:
            pass
    return _Text(total)


__all__ = ["progress_bar"]
