"""DuckDB's filter text to inferframe predicates: what is pushed, what is left to DuckDB, and that pushed ones agree."""

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe.sql.filters import pushable

ROWS = {"stars": [5, None, 3, 4, 1, 2], "label": ["pos", "neg", None, "it's", "neg", "pos"],
        "ok": [True, False, None, True, False, True]}
CHEAP = set(ROWS)


@pytest.mark.parametrize("text", [
    "(stars >= 4)", "((stars = 4) OR (stars = 5))", "(label IS NULL)", "(label IS NOT NULL)", "(NOT ok)", "ok",
    "((label = 'it''s') AND (stars <> 1))", "contains(label, 'o')", "prefix(label, 'ne')", "suffix(label, 's')",
    "(((stars > 1) OR (label = 'neg')) AND (NOT (stars = 3)))", "(stars != 2)", "(3 < stars)",
])
def test_a_pushed_filter_keeps_the_rows_duckdb_keeps(text):
    duckdb = pytest.importorskip("duckdb")
    tbl = pa.table(ROWS)
    sql = text.replace("prefix(", "starts_with(").replace("suffix(", "ends_with(")
    expected = duckdb.sql(f"select stars, label, ok from tbl where {sql}").arrow()
    expected = pa.table(expected) if not isinstance(expected, pa.Table) else expected
    pred = pushable(text, CHEAP)
    assert pred is not None, text
    got = ifr.from_arrow(tbl).where(pred).to_arrow()
    assert got.to_pylist() == expected.to_pylist(), text


@pytest.mark.parametrize("text", [
    "(stars::DOUBLE > 3.5)", "(label ~~ '%o%')", "(upper(label) = 'POS')", "(1 = 1)", "(stars + 1 > 3)",
    "(summary = 'x')",  # not a cheap column
])
def test_what_it_does_not_read_is_left_to_duckdb(text):
    assert pushable(text, CHEAP) is None


def test_only_the_readable_conjuncts_are_pushed():
    pred = pushable("((stars >= 4) AND (summary = 'x') AND (label ~~ 'p%') AND (ok IS NOT NULL))", CHEAP)
    assert repr(pred) == "and(ge(col(stars), lit(4)), not_null(col(ok)))"
