"""A model defined in a notebook cell is located as `In [n], line k`, as IPython's own
tracebacks name cells, in every place NCET shows a source location; files keep `file.py:line`.

The cells run in a real IPython shell in a fresh interpreter (IPython names each cell's code
by a hash, `<ipython-input-...>` or ipykernel's `/tmp/ipykernel_<pid>/<hash>.py`, and keeps
the cell's execution count in its compiler's registry), which prints what NCET reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CELLS = [
    # In [1]
    """
    import json, torch, ncet
    from torch import nn
    import torch.nn.functional as F
    from ncet.render.html import render_report
    """,
    # In [2]: the model's forward() is on line 4 of this cell
    """
    class Sine(nn.Module):
        def forward(self, x):
            y = F.relu(x)
            return torch.sin(y)
    """,
    # In [3]: a trace that fails inside forward(), on line 3
    """
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x
    """,
    # In [4]: a model that converts, with a fault seeded into its IR afterwards
    """
    class Scaled(nn.Module):
        def forward(self, x):
            return x * 3.0
    """,
    # In [5]
    """
    import dataclasses
    out = {}
    try:
        ncet.convert(Sine(), (3,))
    except ncet.ConversionError as error:
        out["error"] = [error.location, error.source_text, str(error)]
    rows = {r.fx_name: r for r in ncet.diagnose(Sine(), (3,)).rows}
    out["rows"] = {k: [r.location, r.source_text] for k, r in rows.items()}
    try:
        ncet.convert(Branchy(), (3,))
    except ncet.ConversionError as error:
        out["trace"] = [error.location, error.source_text]
    ir = ncet.convert(Scaled(), (3,))
    nodes = tuple(dataclasses.replace(n, attrs={**n.attrs, "scalar": 3.5})
                  if n.op_type == "ElementwiseAffine" else n for n in ir.nodes)
    report = ncet.check_exactness(Scaled(), ncet.GraphIR(nodes, ir.constants))
    first = report.first_violation
    out["exactness"] = [first.location, first.source_text, report.summary().splitlines()[0]]
    out["html"] = render_report(ncet.diagnose(Sine(), (3,)))
    print("RESULT" + json.dumps(out))
    """,
]

SCRIPT = """
import sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
for cell in {cells!r}:
    result = shell.run_cell(cell, store_history=True)
    if not result.success:
        sys.exit(f"cell failed: {{result.error_before_exec or result.error_in_exec!r}}")
"""


@pytest.fixture(scope="module")
def reported() -> dict:
    cells = [textwrap.dedent(c).strip("\n") for c in CELLS]
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(cells=cells)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    return json.loads(line.removeprefix("RESULT"))


def test_conversion_errors_name_the_cell_and_line(reported):
    location, text, message = reported["error"]
    assert (location, text) == ("In [2], line 4", "return torch.sin(y)")
    assert "In [2], line 4 `return torch.sin(y)`" in message
    assert ".py:" not in message and "ipython-input" not in message


def test_diagnose_rows_name_the_cell_and_line(reported):
    assert reported["rows"]["relu"] == ["In [2], line 3", "y = F.relu(x)"]
    assert reported["rows"]["sin"] == ["In [2], line 4", "return torch.sin(y)"]
    assert reported["rows"]["x"] == ["", ""]  # the placeholder has no line


def test_a_trace_failure_names_the_cell_and_line(reported):
    assert reported["trace"] == ["In [3], line 3", "if x.sum() > 0:"]


def test_the_exactness_report_names_the_cell_and_line(reported):
    location, text, first_line = reported["exactness"]
    assert (location, text) == ("In [4], line 3", "return x * 3.0")
    assert "In [4], line 3 `return x * 3.0`" in first_line


def test_the_html_report_names_the_cell_and_line(reported):
    assert "In [2], line 4" in reported["html"]
    assert "ipython-input" not in reported["html"]


def test_files_keep_file_and_line():
    from ncet.frontend.locations import located

    assert located("model.py", 12) == "model.py:12"
    assert located("In [3]", 12) == "In [3], line 12"
