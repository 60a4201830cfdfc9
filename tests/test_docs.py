"""The documents that describe the code are checked against the code, so they cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from ncet.errors import REASONS
from ncet.frontend.boundary import BOUNDARY_RULES, render_support_boundary
from ncet.ir import OP_SCHEMAS

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_support_boundary_doc_is_rendered_from_the_code():
    text = (DOCS / "support-boundary.md").read_text()
    assert text == render_support_boundary(), "docs/support-boundary.md is stale: run make docs"


def test_every_reason_code_has_a_boundary_rule():
    ruled = {r.code for r in BOUNDARY_RULES if r.code}
    assert ruled == set(REASONS)


def test_every_op_type_has_a_boundary_rule():
    named = {op for r in BOUNDARY_RULES for op in r.op_types}
    assert set(OP_SCHEMAS) <= named, set(OP_SCHEMAS) - named


def test_ir_doc_describes_every_op_type_and_attribute():
    text = (DOCS / "ir.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \|[^|]*\|([^|]*)\|",
                                                        text, re.MULTILINE)}
    assert set(rows) == set(OP_SCHEMAS)
    for op_type, (_, schema) in OP_SCHEMAS.items():
        for attr in schema:
            assert f"`{attr}`" in rows[op_type], f"docs/ir.md: {op_type} lacks {attr}"


def test_version_is_the_installed_distributions():
    import tomllib
    from pathlib import Path

    import ncet

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert ncet.__version__ == project["project"]["version"]


def test_every_notebook_assertion_says_what_it_checks():
    """A notebook that stops on an assertion tells the reader what did not hold."""
    import ast

    import nbformat

    bare = []
    for path in sorted((DOCS.parent / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            code = "\n".join("#" + line[1:] if line.startswith("%") else line
                             for line in cell.source.splitlines())
            bare += [f"{path.name}: {ast.unparse(node)}" for node in ast.walk(ast.parse(code))
                     if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, bare
