"""A query's WHERE, read off DuckDB's syntax tree, as inferframe predicates: what is pushed, what is left to DuckDB,
and that pushed ones keep the rows DuckDB keeps."""

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe.sql.filters import pushable, tree_rows
from inferframe.sql.tree import expression

ROWS = {"stars": [5, None, 3, 4, 1, 2], "label": ["pos", "neg", None, "it's", "neg", "pos"],
        "ok": [True, False, None, True, False, True]}
CHEAP = set(ROWS)
SCHEMA = pa.table(ROWS).schema


def pushed(text):
    return pushable(expression(text), CHEAP, SCHEMA)


@pytest.mark.parametrize("text", [
    "(stars >= 4)", "((stars = 4) OR (stars = 5))", "(label IS NULL)", "(label IS NOT NULL)", "(NOT ok)", "ok",
    "((label = 'it''s') AND (stars <> 1))", "contains(label, 'o')", "prefix(label, 'ne')", "suffix(label, 's')",
    "(((stars > 1) OR (label = 'neg')) AND (NOT (stars = 3)))", "(stars != 2)", "(3 < stars)",
    "stars IN (1, 5)", "label IN ('neg', 'x')",
])
def test_a_pushed_filter_keeps_the_rows_duckdb_keeps(text):
    duckdb = pytest.importorskip("duckdb")
    tbl = pa.table(ROWS)
    sql = text.replace("prefix(", "starts_with(").replace("suffix(", "ends_with(")
    expected = duckdb.sql(f"select stars, label, ok from tbl where {sql}").arrow()
    expected = pa.table(expected) if not isinstance(expected, pa.Table) else expected
    pred = pushed(text)
    assert pred is not None, text
    got = ifr.from_arrow(tbl).where(pred).to_arrow()
    assert got.to_pylist() == expected.to_pylist(), text


@pytest.mark.parametrize("text", [
    "(stars::DOUBLE > 3.5)", "(label ~~ '%o%')", "(upper(label) = 'POS')", "(1 = 1)", "(stars + 1 > 3)",
    "(summary = 'x')",  # not a cheap column
    "stars NOT IN (2)",  # NOT IN's NULLs are DuckDB's to apply
    "(stars = '4')", "(label = 4)",  # a literal of another kind: DuckDB's casts decide, left to it
])
def test_what_it_does_not_read_is_left_to_duckdb(text):
    assert pushed(text) is None


def test_only_the_readable_conjuncts_of_each_select_are_pushed_to_its_dataframe():
    schemas = {"t": SCHEMA, "u": pa.schema([("stars", pa.int64()), ("name", pa.string())])}
    query = ("select * from (select * from t where stars >= 4 and summary = 'x' and label like 'p%' and ok is not null) "
             "join u using (stars) where u.name = 'a' and name = 'b'")
    rows = tree_rows(query, schemas, {"t": list(CHEAP), "u": ["stars", "name"]})
    assert repr(rows["t"]) == "and(ge(col(stars), lit(4)), not_null(col(ok)))"
    # u is read by the outer SELECT (an inner join): its WHERE's parts on u, qualified or not, filter u
    assert repr(rows["u"]) == "and(eq(col(name), lit('a')), eq(col(name), lit('b')))"


def test_a_where_on_the_right_of_a_left_join_is_not_pushed():
    schemas = {"t": SCHEMA, "u": pa.schema([("stars", pa.int64()), ("name", pa.string())])}
    rows = tree_rows("select * from t left join u using (stars) where u.name = 'a' and t.label = 'pos'", schemas,
                     {"t": list(CHEAP), "u": ["stars", "name"]})
    assert rows["u"] is None and repr(rows["t"]) == "eq(col(label), lit('pos'))"
