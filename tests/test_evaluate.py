"""evaluate(): known confusion tables, struct agreement, error/null rates, golden files joined on a key, errors."""

import json
import math
import pathlib

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pydantic
import pytest

import inferframe as ifr
from inferframe.dataframe.evaluation import Evaluation, evaluate
from inferframe.errors import ColumnNotFoundError, PlanError
from inferframe.structured.arrow_types import arrow_type_for

GOLDEN = pathlib.Path(__file__).parent / "data" / "golden_sentiment.csv"
POSITIVE = r"(?i)\b(great|love|loved|excellent|perfect\w*|amazing|wonderful|fantastic|good)\b"

# 10 rows, three classes, one null prediction, two failed rows. Hand-computed:
#   truth\pred  bird cat dog (null)
#   bird          1   0   1    1      support 3, precision 1/1, recall 1/3, f1 0.5
#   cat           0   3   1    0      support 4, precision 3/4, recall 3/4, f1 0.75
#   dog           0   1   2    0      support 3, precision 2/4, recall 2/3, f1 4/7
TRUTH = ["cat", "cat", "cat", "cat", "dog", "dog", "dog", "bird", "bird", "bird"]
PRED = ["cat", "cat", "dog", "cat", "dog", "dog", "cat", "bird", "dog", None]
ERRORS = [None, None, None, None, None, None, None, None, "timeout", "refused"]


def _animals():
    return ifr.from_pydict({"id": list(range(10)), "label": PRED, "gold": TRUTH, "label_error": ERRORS})


def test_known_confusion_table_and_per_class_figures():
    ev = evaluate(_animals(), ifr.col("label"), ifr.col("gold"))
    assert isinstance(ev, Evaluation) and ev.kind == "label"
    assert (ev.rows, ev.missing, ev.unlabelled) == (10, 0, 0)
    assert ev.accuracy == pytest.approx(0.6)
    assert ev.per_class["bird"] == pytest.approx({"precision": 1.0, "recall": 1 / 3, "f1": 0.5, "support": 3})
    assert ev.per_class["cat"] == pytest.approx({"precision": 0.75, "recall": 0.75, "f1": 0.75, "support": 4})
    assert ev.per_class["dog"] == pytest.approx({"precision": 0.5, "recall": 2 / 3, "f1": 4 / 7, "support": 3})
    assert ev.macro_f1 == pytest.approx((0.5 + 0.75 + 4 / 7) / 3)
    assert isinstance(ev.confusion, ifr.DataFrame)
    assert ev.confusion.to_pydict() == {
        "truth": ["bird", "cat", "dog"], "bird": [1, 0, 0], "cat": [0, 3, 1], "dog": [1, 1, 2], "(null)": [1, 0, 0]}
    assert ev.null_rate == pytest.approx(0.1)
    assert ev.error_rate == pytest.approx(0.2)
    assert ev.exact_match is None and ev.mae is None
    assert ev.mistakes(2) == [("bird", "dog", 1), ("cat", "dog", 1)]


def test_names_and_expressions_agree_and_an_expression_is_evaluated():
    by_name = evaluate(_animals(), "label", "gold")
    assert by_name.as_dict() == evaluate(_animals(), ifr.col("label"), ifr.col("gold")).as_dict()
    upper = evaluate(_animals(), ifr.col("label").str.upper(), ifr.col("gold").str.upper())
    assert upper.accuracy == pytest.approx(0.6) and set(upper.per_class) == {"BIRD", "CAT", "DOG"}


def test_no_error_column_means_no_error_rate_and_default_names():
    ev = evaluate(ifr.from_pydict({"label": [True, False, True], "gold": [True, True, True]}))
    assert ev.error_rate is None and ev.null_rate == 0.0
    assert ev.accuracy == pytest.approx(2 / 3)
    assert ev.per_class[True] == pytest.approx({"precision": 1.0, "recall": 2 / 3, "f1": 0.8, "support": 3})
    assert ev.per_class[False] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert ev.confusion.to_pydict() == {"truth": [False, True], "False": [0, 1], "True": [0, 2]}


def test_integer_labels_and_unlabelled_rows():
    df = ifr.from_pydict({"stars": [5, 4, 1, 3, 2], "human": [5, 3, 1, None, 2]})
    ev = evaluate(df, "stars", "human")
    assert ev.kind == "label" and ev.unlabelled == 1 and ev.rows == 5
    assert ev.accuracy == pytest.approx(3 / 4)
    assert ev.per_class[3]["recall"] == 0.0 and ev.per_class[4]["precision"] == 0.0


class Person(pydantic.BaseModel):
    name: str
    age: int
    note: str | None = None


def test_struct_exact_match_and_field_agreement():
    struct = arrow_type_for(Person)
    truth_type = pa.struct([struct.field("name"), struct.field("age")])
    pred = pa.array([{"name": "Ann", "age": 30, "note": "x"}, {"name": "Bob", "age": 41, "note": None},
                     {"name": "Cy", "age": 99, "note": None}, None], struct)
    truth = pa.array([{"name": "Ann", "age": 30}, {"name": "Rob", "age": 41}, {"name": "Cy", "age": 20},
                      {"name": "Di", "age": 50}], truth_type)
    ev = evaluate(ifr.from_arrow(pa.table({"person": pred, "gold": truth})), "person", "gold")
    assert ev.kind == "struct"
    assert ev.exact_match == pytest.approx(0.25) and ev.accuracy == ev.exact_match
    assert ev.field_agreement == pytest.approx({"name": 0.5, "age": 0.5})  # "note" is not in the truth: ignored
    assert ev.null_rate == pytest.approx(0.25)
    assert ev.per_class is None and ev.confusion is None
    with pytest.raises(AssertionError, match=r"field_agreement\['name'\] 0.500 is below the threshold 0.900"):
        ev.assert_at_least(field_agreement={"name": 0.9})
    ev.assert_at_least(field_agreement={"age": 0.5}, exact_match=0.25)
    assert json.loads(json.dumps(ev.as_dict()))["field_agreement"] == {"name": 0.5, "age": 0.5}


def test_struct_truth_field_absent_from_prediction_is_a_plan_error():
    df = ifr.from_pylist([{"p": {"name": "a"}, "gold": {"name": "a", "age": 1}}])
    with pytest.raises(PlanError, match="'age'"):
        evaluate(df, "p", "gold")
    with pytest.raises(PlanError, match="struct"):
        evaluate(ifr.from_pylist([{"p": "a", "gold": {"name": "a"}}]), "p", "gold")


def test_floats_get_mae_and_rmse():
    ev = evaluate(ifr.from_pydict({"score": [1.0, 2.0, 4.0, None], "gold": [1.0, 3.0, 2.0, 5.0]}), "score", "gold")
    assert ev.kind == "number"
    assert ev.accuracy == pytest.approx(0.25)
    assert ev.mae == pytest.approx(1.0) and ev.rmse == pytest.approx(math.sqrt(5 / 3))
    assert ev.null_rate == pytest.approx(0.25) and ev.per_class is None
    with pytest.raises(AssertionError, match="mae 1.000 is above the threshold 0.500"):
        ev.assert_at_most(mae=0.5)
    ev.assert_at_most(rmse=1.5, null_rate=0.25)


def _predictions():
    # id 9 has no golden row (ignored); golden id 5 has no prediction (missing); a stale "gold" column in df is ignored.
    return ifr.from_pydict({"id": [1, 2, 3, 4, 9], "label": ["pos", "neg", "neg", "pos", "pos"],
                            "gold": ["x", "x", "x", "x", "x"], "label_error": [None, None, "parse", None, None]})


def test_golden_csv_joined_on_a_key(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text("id,gold\n1,pos\n2,neg\n3,pos\n4,pos\n5,neg\n")
    ev = evaluate(_predictions(), "label", "gold", golden=str(path), on="id")
    assert (ev.rows, ev.missing) == (5, 1)
    assert ev.accuracy == pytest.approx(3 / 5)  # ids 1, 2, 4 right; 3 wrong; 5 missing
    assert ev.confusion.to_pydict() == {"truth": ["neg", "pos"], "neg": [1, 1], "pos": [0, 2], "(null)": [1, 0]}
    assert ev.per_class["neg"]["recall"] == pytest.approx(0.5) and ev.per_class["neg"]["support"] == 2
    assert ev.error_rate == pytest.approx(1 / 4) and ev.null_rate == 0.0
    with pytest.raises(AssertionError, match="1 missing predictions"):
        ev.assert_at_least(accuracy=0.9)
    with pytest.raises(AssertionError, match="missing 1 is above the threshold 0"):
        ev.assert_at_most(missing=0)


def test_golden_parquet_joined_on_two_keys_with_a_cast_key(tmp_path):
    path = tmp_path / "golden.parquet"
    pq.write_table(pa.table({"shard": ["a", "a", "b", "b"], "id": ["1", "2", "1", "2"],
                             "gold": [True, False, True, True]}), path)
    df = ifr.from_pydict({"shard": ["a", "a", "b"], "id": [1, 2, 1], "flag": [True, True, True]})
    ev = evaluate(df, "flag", "gold", golden=path, on=["shard", "id"])
    assert (ev.rows, ev.missing) == (4, 1)
    assert ev.accuracy == pytest.approx(2 / 4)
    assert ev.per_class[True] == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3})


def test_golden_dataframe_and_other_inputs():
    gold = ifr.from_pydict({"id": [1, 2], "gold": ["pos", "neg"]})
    table = pa.table({"id": [1, 2], "label": ["pos", "pos"]})
    assert evaluate(table, golden=gold, on="id").accuracy == 0.5
    assert evaluate(pd.DataFrame({"label": ["a", "b"], "gold": ["a", "a"]})).accuracy == 0.5


def test_golden_sentiment_csv_in_the_repo_meets_its_threshold():
    """The seed's pattern: an eval set in git, re-scored on every change, with a threshold; the 'model' here is a rule."""
    golden = ifr.read_csv(GOLDEN)
    df = golden.select("id", "text").with_column(
        "label", ifr.col("text").str.match(POSITIVE).if_else("positive", "negative"))
    ev = evaluate(df, "label", "gold", golden=GOLDEN, on="id")
    assert ev.rows == 20 and ev.missing == 0
    ev.assert_at_least(accuracy=0.85, macro_f1=0.85, recall={"positive": 0.85, "negative": 0.85})
    assert ev.accuracy == pytest.approx(0.9)  # the rule misses the negation and the keyword-free praise


def test_missing_columns_name_the_parameter_and_list_the_columns(tmp_path):
    with pytest.raises(ColumnNotFoundError) as info:
        evaluate(_animals(), "lable", "gold")
    message = str(info.value)
    assert isinstance(info.value, PlanError)
    assert "prediction='lable'" in message and "Did you mean 'label'" in message
    assert "Available columns: id, label, gold, label_error" in message
    with pytest.raises(PlanError, match="truth=.*Available columns: id, label, gold, label_error"):
        evaluate(_animals(), "label", ifr.col("truth"))
    path = tmp_path / "g.csv"
    path.write_text("id,answer\n1,pos\n")
    with pytest.raises(PlanError, match=r"truth='gold'.*golden file.*Available columns: id, answer"):
        evaluate(_predictions(), "label", "gold", golden=path, on="id")
    with pytest.raises(PlanError, match=r"on='key'.*not in df"):
        evaluate(_predictions(), "label", "answer", golden=path, on="key")
    path.write_text("key,answer\n1,pos\n")
    with pytest.raises(PlanError, match=r"on='id'.*golden file.*Available columns: key, answer"):
        evaluate(_predictions(), "label", "answer", golden=path, on="id")


def test_golden_problems_are_plan_errors_before_df_runs(tmp_path):
    calls = []

    def rule(text):
        calls.append(text)
        return "pos"

    df = ifr.from_pydict({"id": [1], "text": ["x"]}).with_column("label", ifr.col("text").apply(rule, return_dtype=pa.string()))
    with pytest.raises(PlanError, match="could not be read.*Check that the path exists"):
        evaluate(df, golden=tmp_path / "nope.csv", on="id")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(PlanError, match="bad.parquet.*could not be read"):
        evaluate(df, golden=tmp_path / "bad.parquet", on="id")
    with pytest.raises(PlanError, match="use a .csv or .parquet"):
        evaluate(df, golden=tmp_path / "golden.xlsx", on="id")
    with pytest.raises(PlanError, match="needs on="):
        evaluate(df, golden=GOLDEN)
    with pytest.raises(PlanError, match="no golden= was given"):
        evaluate(df, on="id")
    with pytest.raises(PlanError, match="Available columns"):
        evaluate(df, "missing_column", "gold")
    assert calls == []


def test_duplicate_prediction_keys_are_an_error():
    df = ifr.from_pydict({"id": [1, 1], "label": ["a", "b"]})
    with pytest.raises(PlanError, match=r"more than one row for the key \{'id': 1\}"):
        evaluate(df, golden=ifr.from_pydict({"id": [1], "gold": ["a"]}), on="id")


def test_assert_at_least_names_metric_value_threshold_and_mistakes():
    ev = evaluate(_animals(), "label", "gold")
    with pytest.raises(AssertionError) as info:
        ev.assert_at_least(accuracy=0.9, macro_f1=0.5)
    message = str(info.value)
    assert message.startswith("accuracy 0.600 is below the threshold 0.900 (")
    assert "macro_f1" not in message.split("(")[0]  # 0.607 passes 0.5
    assert "prediction 'label' vs truth 'gold', 10 labelled rows" in message
    assert "'bird' predicted as 'dog' x1" in message
    ev.assert_at_least(accuracy=0.6)
    with pytest.raises(AssertionError, match=r"precision\['dog'\] 0.500 is below the threshold 0.800"):
        ev.assert_at_least(precision={"dog": 0.8, "bird": 0.8})
    with pytest.raises(AssertionError, match="error_rate 0.200 is above the threshold 0.050"):
        ev.assert_at_most(error_rate=0.05)
    with pytest.raises(TypeError, match="unknown metric 'acc'"):
        ev.assert_at_least(acc=0.9)
    with pytest.raises(KeyError, match="no class 'fish'"):
        ev.assert_at_least(recall={"fish": 0.5})


def test_undefined_figures_fail_their_assertion():
    ev = evaluate(ifr.from_arrow(pa.table({"label": ["a"], "gold": pa.array([None], pa.string())})))
    assert ev.unlabelled == 1 and ev.accuracy is None
    with pytest.raises(AssertionError, match="accuracy is undefined"):
        ev.assert_at_least(accuracy=0.5)


def test_as_dict_is_json_and_reprs_are_short():
    ev = evaluate(_animals(), "label", "gold")
    d = json.loads(json.dumps(ev.as_dict()))
    assert d["accuracy"] == pytest.approx(0.6) and d["rows"] == 10 and d["error_rate"] == pytest.approx(0.2)
    assert d["confusion"] == {"labels": ["bird", "cat", "dog"], "counts": [[1, 0, 1], [0, 3, 1], [0, 1, 2]],
                              "null": [1, 0, 0]}
    assert d["per_class"]["cat"]["support"] == 4
    text = repr(ev)
    assert text.startswith("Evaluation('label' vs 'gold', label): rows 10, accuracy 0.600")
    assert "cat" in text and len(text.splitlines()) == 5
    assert "<table>" in ev._repr_html_() and "accuracy" in ev._repr_html_()
