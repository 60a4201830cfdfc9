"""The renderers: the self-contained HTML report and the exactness figures, shared by the
report, the command line and the notebook views (docs/architecture.md).

matplotlib is imported only when a figure is drawn, so importing this package is cheap.
"""

from .html import render_report, verdict

__all__ = ["render_report", "verdict"]
