import pytest

from inferframe.errors import PlanError
from inferframe.functions.templates import Field, parse_template


def test_fields_literals_and_escaped_braces_keep_their_order():
    t = parse_template("{{json}} {a} then {b} and {a}", "sem_filter")
    assert t.parts == ("{json} ", Field("a"), " then ", Field("b"), " and ", Field("a"))
    assert t.columns() == ["a", "b"]
    assert t.render({"a": 1, "b": "x"}) == "{json} 1 then x and 1"


def test_a_join_template_reads_both_sides_and_maps_renamed_columns():
    t = parse_template("{review:left} vs {review:right}", "sem_join", sides=True)
    assert t.columns("left") == ["review"] and t.columns("right") == ["review"]
    assert [repr(e) for e in t.message({"review:right": "right.review"})] == ["col(review)", "lit(' vs ')",
                                                                             "col(right.review)"]


@pytest.mark.parametrize("text, sides, says", [
    ("no fields here", False, "names no column"),
    ("{a", False, "unmatched '{'"),
    ("a}", False, "unmatched '}'"),
    ("{ }", False, "empty field"),
    ("{a:top}", True, "names the side 'top'"),
    ("{a} and {b:right}", True, "names no side"),
    ("{a:left} and {b:left}", True, "a column of each side"),
    ("{a:left}", False, "reads one table"),
    ("", False, "takes a template string"),
])
def test_bad_templates_name_the_problem_and_the_fix(text, sides, says):
    with pytest.raises(PlanError, match=says):
        parse_template(text, "sem_op", sides=sides)
