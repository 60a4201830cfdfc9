"""The spelling tables' op_type column is the spec's, and the spec tests exercise all of it.

Each spec row test asserts that the handler's op_type is in its spelling's column; here,
every (spelling, op_type) pair of the columns must be the expected result of some spec row,
so a column can be neither missing an op_type nor claiming one no row produces.
"""

from __future__ import annotations

import operator

from ncet.frontend.spellings import FUNCTION_SPELLINGS, METHOD_SPELLINGS, MODULE_SPELLINGS
from tests.conftest import Fn
from tests.spelling_columns import table_key
from tests.test_spec_boundary import NORMALIZED
from tests.test_spec_functions import FUNCTION_ROWS
from tests.test_spec_indexing import ACCEPTED
from tests.test_spec_methods import METHOD_ROWS
from tests.test_spec_modules import MODULE_ROWS


def _row_pairs() -> set[tuple[object, str]]:
    """(table key, expected op_type) of every accepted spec row."""
    pairs = {(type(factory()), op_type) for _, factory, _, _, op_type, _ in MODULE_ROWS}
    for row in (*FUNCTION_ROWS, *METHOD_ROWS):
        build, _, op_type, _ = row.values
        pairs.add((table_key(build()), op_type))
    for row in NORMALIZED:
        fn, op_type = row.values
        pairs.add((table_key(Fn(fn).eval()), op_type))
    pairs |= {(operator.getitem, op_type) for *_, op_type in ACCEPTED}
    return pairs


def test_every_column_entry_is_a_spec_rows_result():
    column = {(key, op_type)
              for table in (MODULE_SPELLINGS, FUNCTION_SPELLINGS, METHOD_SPELLINGS)
              for key, spelling in table.items() for op_type in spelling.op_types}
    rows = _row_pairs()
    assert rows - column == set(), "spec rows whose op_type the spelling's column lacks"
    assert column - rows == set(), "column entries no spec row produces"


def test_every_spelling_has_a_column():
    for table in (MODULE_SPELLINGS, FUNCTION_SPELLINGS, METHOD_SPELLINGS):
        for spelling in table.values():
            assert spelling.op_types, f"{spelling.display} has no op_type column"
