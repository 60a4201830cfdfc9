"""Re-execute notebooks in place and store their outputs the way nbval compares them.

    .venv/bin/python notebooks/refresh.py                    # every notebook in this folder
    .venv/bin/python notebooks/refresh.py quickstart.ipynb   # some of them

Each notebook runs top to bottom in a fresh kernel of this environment (`make notebooks` does
the same). Then what changes from run to run without meaning is dropped: the timing metadata
of each cell, and the saved widget state. Without a widget state, GitHub, nbviewer, nbconvert
and a notebook opened before Run All show each view's static HTML (stored beside the widget
in its output); with one, they would try to draw frozen copies of the widgets from scripts
fetched from a CDN.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def refresh(path: Path) -> None:
    """Execute the notebook at `path` in place, keeping only the outputs."""
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
    notebook.metadata.pop("widgets", None)
    nbformat.write(notebook, path)


def main(names: list[str]) -> None:
    paths = [HERE / name for name in names] or sorted(HERE.glob("*.ipynb"))
    for path in paths:
        print(f"executing {path.name}", flush=True)
        refresh(path)


if __name__ == "__main__":
    main(sys.argv[1:])
