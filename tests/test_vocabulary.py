"""One vocabulary (issue 32 item 5): the public AI functions and semantic operators spell each meaning one way.

The names are ``inferframe.functions._vocabulary``'s table; the old names still work one release, with a
DeprecationWarning at the user's line.
"""

import importlib
import inspect
import json
import re
import types
import warnings

import pytest

import inferframe as ifr
import inferframe.functions as F
from inferframe import col
from inferframe.dataframe import DataFrame
from inferframe.errors import PlanError
from inferframe.functions._vocabulary import ALIASES
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.simulator import Simulator, SimulatorConfig

OPERATORS = ["sem_filter", "sem_topk", "sem_rank", "sem_agg", "sem_dedup", "sem_cluster_by", "sem_join"]
FUNCTIONS = ["prompt", "classify_text", "embed_text", "sem_predicate", *OPERATORS]
# Other spellings of the table's meanings that no public function may take as a parameter.
OTHER_SPELLINGS = {"system_prompt", "instruction", "demonstrations", "shots", "embedding_model", "proxy",
                   "output_column", "result_column", "accuracy_target", "recall_target", "precision_target",
                   "errors_column", "keep_errors"}



def _signatures():
    """(where, parameters) of every public function and DataFrame method the vocabulary covers.

    ``inferframe.functions.sem_join`` hands its options to ``DataFrame.sem_join``'s planner: its parameters are the
    planner's. ``nearest``'s ``column`` names its score, whose rank is ``<column>_rank``.
    """
    out = [(f"functions.{n}", inspect.signature(getattr(F, n)).parameters) for n in FUNCTIONS]
    out.append(("DataFrame.nearest", inspect.signature(DataFrame.nearest).parameters))
    planner = importlib.import_module("inferframe.functions._sem_join_api").sem_join
    out.append(("sem_join's planner", inspect.signature(planner).parameters))
    out += [(f"DataFrame.{n}", inspect.signature(getattr(DataFrame, n)).parameters) for n in OPERATORS]
    return out


def test_every_public_name_of_inferframe_functions_is_a_function_not_a_module():
    """Before: ``from inferframe.functions import sem_filter`` gave the module functions/sem_filter.py."""
    import inferframe.functions.sem_join  # noqa: F401  the pair checks' module: importing it must not shadow sem_join

    for name in F.__all__:
        assert not isinstance(getattr(F, name), types.ModuleType), name
    from inferframe.functions import sem_filter, sem_join

    assert callable(sem_filter) and callable(sem_join)
    for name in OPERATORS:
        assert list(inspect.signature(getattr(F, name)).parameters)[0] in ("df", "left"), name


@pytest.mark.parametrize("where, params", [pytest.param(w, p, id=w) for w, p in _signatures()])
def test_no_parameter_spells_a_meaning_another_way(where, params):
    """Before: sem_filter's cascade took proxy_model=, sem_join instructions= and property_examples=."""
    names = set(params)
    assert not names & set(ALIASES), f"{where} takes deprecated names {sorted(names & set(ALIASES))}: " \
                                     f"use {sorted(ALIASES[n] for n in names & set(ALIASES))}"
    assert not names & OTHER_SPELLINGS, f"{where} takes {sorted(names & OTHER_SPELLINGS)}"
    targets = [n for n in names if "target" in n]
    assert all(re.fullmatch(r"target_(accuracy|recall|precision)", n) for n in targets), (where, targets)


@pytest.mark.parametrize("where, params", [
    pytest.param(w, p, id=w) for w, p in _signatures()])
def test_error_column_defaults_to_true_wherever_it_is_a_parameter(where, params):
    """Before: sem_filter(error_column=False) dropped a failed row by default; prompt() kept it."""
    if "error_column" in params:
        assert params["error_column"].default is True, where


def yes_unless_broken(body):
    text = body["messages"][-1]["content"]
    return json.dumps({"label": "maybe" if "broken" in text else "yes" if "good" in text else "no"})


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=yes_unless_broken)) as s:
        yield s


def api(sim, **kw):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-t", model="gpt-5-mini", use_chat_completions=True,
                cache="off", **kw)


def test_a_failed_row_keeps_its_error_by_default(sim):
    """Before: sem_rank's error_column was False (its cast dropped the call's error column)."""
    df = ifr.from_pydict({"r": ["good film", "broken film", "bad film"]})
    columns = {
        "prompt": df.with_column("x", F.prompt(col("r"), **api(sim))).column_names,
        "classify_text": df.with_column("x", F.classify_text(col("r"), ["yes", "no"], **api(sim))).column_names,
        "sem_predicate": df.with_column("x", F.sem_predicate("{r} is positive", **api(sim))).column_names,
        "sem_rank": F.sem_rank(df, "{r} is positive", **api(sim)).column_names,
    }
    assert {k: [c for c in v if c.endswith("_error")] for k, v in columns.items()} == {
        "prompt": ["x_error"], "classify_text": ["x_error"], "sem_predicate": ["x_error"], "sem_rank": ["sem_rank_error"]}
    out = F.sem_rank(df, "{r} is positive", **api(sim)).to_pydict()
    assert out["sem_rank"][-1] is None and out["sem_rank_error"][-1]["kind"] == "schema"


def test_sem_filter_keeps_a_failed_row_with_its_error_by_default(sim):
    out = ifr.from_pydict({"r": ["good film", "broken film", "bad film"]}).sem_filter("{r} is positive", **api(sim))
    assert out.to_pydict()["r"] == ["good film", "broken film"]


def test_a_failed_row_sem_filter_keeps_draws_no_warning_of_dropped_rows(sim):
    """Before: error_column=True kept the failed row and still warned 'a failed row is not kept'."""
    df = ifr.from_pydict({"r": ["good film", "broken film", "bad film"]})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = df.sem_filter("{r} is positive", error_column=True, **api(sim)).to_pydict()
    assert out["r"] == ["good film", "broken film"]
    assert not [w for w in seen if "not kept" in str(w.message)], [str(w.message) for w in seen]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert df.sem_filter("{r} is positive", error_column=False, **api(sim)).to_pydict()["r"] == ["good film"]
    assert [w for w in seen if "1 of 3 rows failed" in str(w.message)]


def _warned(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    deprecations = [w for w in seen if issubclass(w.category, DeprecationWarning)]
    assert deprecations and deprecations[0].filename == __file__, [(w.filename, str(w.message)) for w in seen]
    return out, str(deprecations[0].message)


def test_proxy_model_still_names_the_cascades_embedding_model_with_a_warning():
    new = F.sem_predicate("{r} is positive", target_recall=0.9, oracle_budget=10, model="gemma-3-270m",
                          embed_model="all-MiniLM-L6-v2")
    old, message = _warned(lambda: F.sem_predicate("{r} is positive", target_recall=0.9, oracle_budget=10,
                                                   model="gemma-3-270m", proxy_model="all-MiniLM-L6-v2"))
    assert "proxy_model= is deprecated" in message and "embed_model=" in message
    proxy = lambda e: ai_call_of(e._node).udf.call.args[0].proxy  # noqa: E731
    assert proxy(old) == proxy(new)
    with pytest.raises(PlanError, match="pass embed_model= only"):
        F.sem_predicate("{r} is positive", target_recall=0.9, oracle_budget=10, model="gemma-3-270m",
                        proxy_model="a", embed_model="b")


@pytest.mark.parametrize("old", ["score_column", "rank_column"])
def test_sem_ranks_old_column_names_still_name_its_column_with_a_warning(old):
    df = ifr.from_pydict({"r": ["Wow!"]})
    out, message = _warned(lambda: df.sem_rank("{r} is enthusiastic", model="gemma-3-270m", **{old: "score"}))
    assert f"{old}= is deprecated" in message
    assert out.column_names[:2] == ["r", "score"]


@pytest.mark.parametrize("old, new, value", [("instructions", "system_message", "Be strict."),
                                             ("property_examples", "examples", [("great", "positive"),
                                                                                ("awful", "negative")])])
def test_sem_joins_old_names_still_work_with_a_warning(old, new, value):
    a = ifr.from_pydict({"review": ["great", "awful"]})
    kw = dict(on_property="sentiment", property_values=["positive", "negative"], model="gemma-3-270m")
    expected = a.sem_join(a, "{review:left} and {review:right} agree", **kw, **{new: value}).explain()
    out, message = _warned(lambda: F.sem_join(a, a, "{review:left} and {review:right} agree", **kw, **{old: value}))
    assert f"{old}= is deprecated" in message and out.explain() == expected


def test_system_message_is_the_instructions_of_every_operator(sim):
    """Before: sem_topk and sem_dedup passed their own system message beside the user's (a TypeError)."""
    seen = []

    def spy(body):
        seen.append(body["messages"][0]["content"])
        return json.dumps({"label": "A" if "Answer A or B" in body["messages"][-1]["content"] else "yes"})

    sim.configure(responder=spy)
    df = ifr.from_pydict({"r": ["good 1", "good 2", "good 3"]})
    F.sem_topk(df, "{r} is best", k=1, system_message="Be strict.", **api(sim)).to_pydict()
    F.sem_dedup(df, "{r} are the same", k=1, system_message="Be strict.", **api(sim)).to_pydict()
    assert seen and set(seen) == {"Be strict."}
