"""The documents that describe the code are checked against the code, so they cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from ncet.errors import REASONS
from ncet.frontend.boundary import BOUNDARY_RULES, render_support_boundary
from ncet.frontend.boundary_rules import LIMITED_RULES
from ncet.ir import INPUT_RANKS, OP_SCHEMAS

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


def test_handlers_take_their_numbers_from_the_rule_table():
    """Beyond 0, 1 and 2 (indices, halves, pairs), a number in a handler is a limit of the
    boundary: it lives in a BoundaryRule's Limit (probed by tests/test_boundary_limits.py)."""
    import ast

    handlers = Path(__file__).resolve().parent.parent / "ncet" / "frontend" / "handlers"
    found = [f"{path.name}:{node.lineno}: {node.value!r}"
             for path in sorted(handlers.glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Constant) and type(node.value) in (int, float)
             and node.value not in (0, 1, 2)]
    assert not found, found


def test_rank_limits_agree_with_the_ir():
    """What convert accepts per op_type is what a GraphIR file may hold (ir.INPUT_RANKS)."""
    accepted: dict[str, set[int]] = {}
    for rule in LIMITED_RULES:
        if rule.limit.quantity == "rank":
            per_sample = set(range(rule.limit.low - 1, rule.limit.high))
            for op_type in rule.op_types:
                accepted.setdefault(op_type, set()).update(per_sample)
    assert accepted == {op_type: set(ranks) for op_type, ranks in INPUT_RANKS.items()}


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


NOTEBOOKS = DOCS.parent / "notebooks"


def test_the_quickstart_points_to_every_other_notebook():
    import json

    cells = json.loads((NOTEBOOKS / "quickstart.ipynb").read_text())["cells"]
    last = "".join(cells[-1]["source"])
    assert last.startswith("Next: ")
    others = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb") if p.name != "quickstart.ipynb")
    assert "onnx-export-for-verifiers.ipynb" in others
    assert [n for n in others if f"`{n}`" not in last] == []


def test_notebook_checkpoints_are_ignored_by_git():
    import subprocess

    for path in ("notebooks/.ipynb_checkpoints/quickstart-checkpoint.ipynb",
                 ".ipynb_checkpoints/x-checkpoint.ipynb"):
        result = subprocess.run(["git", "check-ignore", "-q", path], cwd=DOCS.parent,
                                capture_output=True, timeout=60)
        assert result.returncode == 0, f"{path} is not ignored"


# -- docs/onnx-import.md -------------------------------------------------------------------------


def _between(text: str, start: str, end: str) -> list[list[str]]:
    """The cells of the markdown table rows between two marker comments (header and rule
    left out)."""
    block = text.split(start, 1)[1].split(end, 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in row.strip().strip("|").split(" | ")] for row in rows[1:]]


def test_onnx_import_doc_lists_every_reason_code():
    from ncet.onnx.import_errors import IMPORT_REASONS, IMPORT_STATUS

    rows = _between((DOCS / "onnx-import.md").read_text(), "<!-- reason codes:",
                    "<!-- end of reason codes -->")
    assert rows == [[f"`{code}`", IMPORT_STATUS[code], reason.summary]
                    for code, reason in IMPORT_REASONS.items()]


def test_onnx_import_doc_maps_every_op_type_the_importer_takes():
    from ncet.onnx.import_rules import IMPORT_RULES

    text = (DOCS / "onnx-import.md").read_text()
    table = text.split("## ONNX spellings", 1)[1].split("\n## ", 1)[0]
    first = {m for line in table.splitlines() if line.startswith("| `")
             for m in re.findall(r"`([A-Z][A-Za-z]*)", line.split(" | ")[0])}
    assert set(IMPORT_RULES) <= first, set(IMPORT_RULES) - first


def test_onnx_import_doc_corpus_table_is_what_diagnose_onnx_reports_today():
    """The outcome and node columns of "The corpus" (benchmarks/corpus_import.py
    --markdown) against diagnose_onnx now; the timing columns are one run's, not checked."""
    from benchmarks.corpus_import import outcomes
    from tests.corpus import corpus_root

    root = corpus_root()
    rows = _between((DOCS / "onnx-import.md").read_text(), "<!-- corpus table:",
                    "<!-- end of corpus table -->")
    documented = [[row[0], row[1].split(",")[0], *row[2:5]] for row in rows]
    assert documented == [list(o.cells()) for o in outcomes(root)]
    assert {row[1] for row in rows} == {"imported, certified", "refused"}
