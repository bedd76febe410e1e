"""One name for each option, in Python, SQL and the CLI (issue 43 item 3).

The names are ``inferframe.functions._vocabulary``'s tables. An old name still works for one release,
with a warning (a DeprecationWarning in Python and SQL, a ``warning:`` line in the CLI); the old and
the new name together is a PlanError; and nothing inside the package uses an old name.
"""

import ast
import pathlib
import warnings

import pytest

import inferframe
import inferframe as ifr
import inferframe.functions as F
from inferframe import col
from inferframe.errors import PlanError, RenamedOptionWarning, RowFailed
from inferframe.functions._vocabulary import ALIASES, CLI_ALIASES, SQL_ALIASES, embedding_options
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.simulator import Simulator, SimulatorConfig

SRC = pathlib.Path(inferframe.__file__).parent
VOCABULARY = SRC / "functions" / "_vocabulary.py"
# Keywords of other libraries' APIs that happen to spell an old name: argparse's add_argument(choices=...).
FOREIGN_KEYWORDS = {("add_argument", "choices")}


def _callee(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def old_names_used(path: pathlib.Path, root: pathlib.Path = SRC.parent) -> list[str]:
    """``file:line: name`` for each old Python name as a parameter or keyword, and each old CLI flag or SQL name."""
    tree = ast.parse(path.read_text(), str(path))
    strings = set(CLI_ALIASES.values()) | set(SQL_ALIASES)
    hits = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.Call):
            names = [k.arg for k in node.keywords if (_callee(node), k.arg) not in FOREIGN_KEYWORDS]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in strings:
            names = [node.value]
        hits += [f"{path.relative_to(root)}:{node.lineno}: {n}" for n in names if n in ALIASES or n in strings]
    return hits


def test_the_scan_finds_an_old_name_as_a_parameter_a_keyword_and_an_old_flag(tmp_path):
    """The scan below can fail: each kind of use it looks for is found in a file that has it."""
    f = tmp_path / "probe.py"
    f.write_text("def f(per_label=1):\n    return g(instructions='x')\n"
                 "FLAG = '--system'\nSQL = 'fail_on_error'\nOK = p.add_argument('--x', choices=[1])\n")
    assert sorted(old_names_used(f, tmp_path)) == ["probe.py:1: per_label", "probe.py:2: instructions",
                                                   "probe.py:3: --system", "probe.py:4: fail_on_error"]


def test_no_old_option_name_is_used_inside_the_package():
    """Before: per_label in load_examples and split_examples, choices in the providers' format_fields, score_column and
    rank_column in DataFrame.nearest, fail_on_error read in sql/functions.py, --system and --choices in the CLI."""
    hits = [h for p in sorted(SRC.rglob("*.py")) if p != VOCABULARY for h in old_names_used(p)]
    assert not hits, "old option names used inside the package (use the names of functions/_vocabulary.py):\n" \
                     + "\n".join(hits)


# --- Python: an old name works one release with a DeprecationWarning at the user's line; old + new is a PlanError ---

PAIRS = [("good", "a"), ("fine", "a"), ("great", "a"), ("bad", "b"), ("poor", "b"), ("awful", "b")]


def _warned(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    old = [w for w in seen if issubclass(w.category, DeprecationWarning)]
    assert old and old[0].filename == __file__, [(w.filename, str(w.message)) for w in seen]
    assert issubclass(old[0].category, RenamedOptionWarning)
    return out, str(old[0].message)


def _head(expr):
    """The settings of classify_text(method="embedding")'s head: its examples and its model."""
    call = ai_call_of(expr._node).udf.call
    return dict(call.kwargs)["examples"], call.model.model


def test_per_label_is_examples_per_label_with_a_warning():
    """Before: method="embedding" took per_label= and ignored examples_per_label=."""
    new = F.classify_text(col("t"), ["a", "b"], method="embedding", examples=PAIRS, examples_per_label=2)
    old, message = _warned(lambda: F.classify_text(col("t"), ["a", "b"], method="embedding", examples=PAIRS,
                                                   per_label=2))
    assert "per_label= is deprecated" in message and "examples_per_label=" in message
    assert _head(old) == _head(new) and len(_head(new)[0]) == 4
    assert len(_head(F.classify_text(col("t"), ["a", "b"], method="embedding", examples=PAIRS))[0]) == 6  # all
    with pytest.raises(PlanError, match="pass examples_per_label= only"):
        F.classify_text(col("t"), ["a", "b"], method="embedding", examples=PAIRS, examples_per_label=2, per_label=2)


def test_the_embedding_methods_model_is_embed_model_with_model_its_old_name():
    new = F.classify_text(col("t"), ["a", "b"], method="embedding", embed_model="all-MiniLM-L6-v2")
    old, message = _warned(lambda: F.classify_text(col("t"), ["a", "b"], method="embedding",
                                                   model="all-MiniLM-L6-v2"))
    assert "model= is deprecated" in message and "embed_model=" in message
    assert _head(old) == _head(new)
    with pytest.raises(PlanError, match="pass embed_model= only"):
        F.classify_text(col("t"), ["a", "b"], method="embedding", model="all-MiniLM-L6-v2", embed_model="x")


@pytest.mark.parametrize("kwargs", [
    pytest.param(dict(method="embedding"), id="method=embedding"),
    pytest.param(dict(cascade=["embedding", "generate"], examples=PAIRS * 4, model="gemma-3-270m"), id="cascade"),
    pytest.param(dict(nearest_examples=1, examples=PAIRS, model="gemma-3-270m"), id="nearest_examples"),
])
def test_embed_model_names_the_embedding_model_of_every_stage_that_embeds(kwargs):
    """Before: nearest_examples had no option for its model, and a cascade's came only from a stage's dict."""
    with pytest.raises(PlanError, match="'no-such-embedder' is not on this machine"):
        F.classify_text(col("t"), ["a", "b"], embed_model="no-such-embedder", **kwargs)


def test_embed_model_without_an_embedding_stage_is_a_plan_error():
    with pytest.raises(PlanError, match="embed_model= names the embedding model"):
        F.classify_text(col("t"), ["a", "b"], method="generate", model="gemma-3-270m", embed_model="x")


def test_prompts_choices_is_return_format_with_a_warning():
    new = F.prompt(col("t"), ["x", "y"], model="gemma-3-270m")
    old, message = _warned(lambda: F.prompt(col("t"), choices=("x", "y"), model="gemma-3-270m"))
    assert "choices= is deprecated" in message and "return_format=" in message
    (a, b) = (ai_call_of(e._node).udf.call.config for e in (old, new))
    assert a.return_format.python_type == b.return_format.python_type and a.format_request == b.format_request
    with pytest.raises(PlanError, match="pass return_format= only"):
        F.prompt(col("t"), ["x", "y"], choices=["x", "y"], model="gemma-3-270m")


def test_nearests_column_names_the_score_and_its_rank():
    q = ifr.from_pydict({"q": ["x"], "v": [[1.0, 0.0]]})
    docs = ifr.from_pydict({"doc": ["a", "b"], "v": [[0.0, 1.0], [1.0, 0.1]]})
    assert q.nearest(docs, on="v", k=1).column_names[-2:] == ["score", "rank"]
    assert q.nearest(docs, on="v", k=1, column="sim").column_names[-2:] == ["sim", "sim_rank"]
    old, message = _warned(lambda: q.nearest(docs, on="v", k=1, score_column="s", rank_column="r"))
    assert "score_column= is deprecated" in message and old.column_names[-2:] == ["s", "r"]
    with pytest.raises(PlanError, match="pass column= only"):
        q.nearest(docs, on="v", k=1, column="sim", rank_column="r")
    with pytest.raises(PlanError, match="takes no option bogus="):
        q.nearest(docs, on="v", k=1, bogus=1)


def test_embed_options_model_is_embed_model_with_a_warning():
    assert embedding_options("sem_join", "m", {"device": "cpu"}) == {"device": "cpu", "model": "m"}
    old, message = _warned(lambda: embedding_options("sem_join", None, {"model": "m", "device": "cpu"}))
    assert old == {"device": "cpu", "model": "m"} and "embed_model=" in message
    with pytest.raises(PlanError, match="pass embed_model= only"):
        embedding_options("sem_join", "m", {"model": "n"})


# --- SQL: the Python names as named arguments ---

@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen = []

    def spy(body):
        seen.append([m["content"] for m in body["messages"]])
        return "" if "broken" in body["messages"][-1]["content"] else "ok"  # an empty answer: a failed row

    with Simulator(SimulatorConfig(responder=spy)) as s:
        s.seen = seen
        yield s


def sql_options(sim):
    return (f"provider => 'openai', base_url => '{sim.base_url}', model => 'gpt-5-mini', "
            "use_chat_completions => true, cache => 'off'")


def test_sql_system_message_is_a_named_argument_and_the_positional_instruction_stays_in_the_user_text(sim):
    df = ifr.from_pydict({"r": ["good film"]})
    df.sql(f"select ai_complete(r, system_message => 'Be brief.', {sql_options(sim)}) as a from self").to_pydict()
    df.sql(f"select ai_score(r, 'Is it good?', system_message := 'Be brief.', {sql_options(sim)}) as s "
           "from self").to_pydict()
    (system, user), (score_system, score_user) = sim.seen
    assert (system, user) == ("Be brief.", "good film")
    assert score_system == "Be brief." and score_user.startswith("Is it good?\nText: good film")


def test_sql_on_error_raise_and_its_old_name_fail_on_error(sim):
    df = ifr.from_pydict({"r": ["good", "broken"]})
    query = "select ai_extract(r, 'name', {}, {}) as x from self"
    assert df.sql(query.format("on_error => 'null'", sql_options(sim))).to_pydict()["x"][1] is None
    with pytest.raises(RowFailed):
        df.sql(query.format("on_error => 'raise'", sql_options(sim))).to_pydict()
    with pytest.raises(RowFailed):
        _warned(lambda: df.sql(query.format("fail_on_error => true", sql_options(sim))).to_pydict())
    _, message = _warned(lambda: ifr.sql("explain " + query.format("fail_on_error => true", sql_options(sim)), self=df))
    assert "fail_on_error => true is deprecated" in message and "on_error => 'raise'" in message
    with pytest.raises(PlanError, match="pass on_error => ... only; fail_on_error is its old name"):
        df.sql(query.format("fail_on_error => true, on_error => 'raise'", sql_options(sim))).to_pydict()


# --- CLI (in process: typer's CliRunner runs this checkout's code) ---

def cli(*args):
    from typer.testing import CliRunner

    from inferframe.cli.base import app

    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def reviews_csv(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text("review\ngood film\nbroken film\n")
    return path


ESTIMATE = ["--provider", "openai", "--model", "gpt-5-mini"]


@pytest.mark.parametrize("new, old, value", [("--system-message", "--system", "Be brief."),
                                             ("--labels", "--choices", "yes,no")])
def test_cli_old_flag_works_with_a_warning_line_and_old_plus_new_is_an_error(reviews_csv, new, old, value):
    expected = cli("estimate", reviews_csv, "-c", "review", new, value, *ESTIMATE, "--json")
    assert expected.exit_code == 0 and "warning:" not in expected.stderr, expected.output
    got = cli("estimate", reviews_csv, "-c", "review", old, value, *ESTIMATE, "--json")
    assert got.exit_code == 0, got.output
    assert got.stdout == expected.stdout
    assert f"warning: {old} is deprecated and will be removed in the next release; use {new}." in got.stderr
    both = cli("estimate", reviews_csv, "-c", "review", old, value, new, value, *ESTIMATE)
    assert both.exit_code == 2 and f"error: give {new} only; {old} is its old name." in both.stderr


def test_cli_on_error_and_error_column(sim, reviews_csv, tmp_path):
    """Before: the CLI had no option for what a failed row does, nor for its error column."""
    args = ["prompt", reviews_csv, "-c", "review", "--provider", "openai", "--base-url", sim.base_url,
            "--model", "gpt-5-mini", "--labels", "ok,fine", "--cache", "off"]
    kept = cli(*args, "--out", tmp_path / "kept")
    assert kept.exit_code == 1 and "answer_error" in ifr.read_parquet(str(tmp_path / "kept")).column_names
    dropped = cli(*args, "--no-error-column", "--out", tmp_path / "dropped")
    assert "answer_error" not in ifr.read_parquet(str(tmp_path / "dropped")).column_names, dropped.output
    raised = cli(*args, "--on-error", "raise")
    assert raised.exit_code == 1 and "error: " in raised.stderr and "broken film" not in raised.stdout
    bad = cli(*args, "--on-error", "sometimes")
    assert bad.exit_code == 2 and "on_error='sometimes'" in bad.stderr
