"""Jupyter views of NCET's conversion and exactness results (installed as `ncet.widgets`).

The static forms (DataFrames, HTML strings, matplotlib figures) need pandas and matplotlib
only; the interactive views (`MappingTable`, `BoundaryPanel`, `ExactnessPanel`,
`GraphView`, `SummaryPanel`, `CompareView`, `Workbench`, `AdjudicationView`, `MarginView`)
import ipywidgets when first used.
The exactness figures are `ncet.render`'s, the ones the HTML report draws; the views use only
the public names of `ncet` and `ncet.render`.
"""

from __future__ import annotations

import importlib

from .frames import boundary_frame, boundary_html, mapping_frame, mapping_html

_LAZY = {
    "MappingTable": ".mapping",
    "BoundaryPanel": ".panels",
    "ExactnessPanel": ".panels",
    "GraphView": ".graph_view",
    "Workbench": ".workbench",
    "exactness_figure": "ncet.render",
    "output_error_figure": "ncet.render",
    "scatter_figure": "ncet.render",
    "figure_svg": "ncet.render",
    "graph_figure": ".graph",
    "exactness_html": ".static",
    "graph_html": ".static",
    "graph_view_html": ".graph_view",
    "sensitivity_figure": "ncet.render",
    "CompareView": ".compare",
    "SummaryPanel": ".summary",
    "download_link": ".downloads",
    "figure_downloads": ".downloads",
    "frame_download": ".downloads",
    "AdjudicationView": ".adjudication",
    "adjudication_html": ".adjudication",
    "MarginView": ".margin",
    "margin_view_html": ".margin",
}
"""Imported on first use: the widgets need ipywidgets, the figures matplotlib."""

__all__ = ["boundary_frame", "boundary_html", "mapping_frame", "mapping_html", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
