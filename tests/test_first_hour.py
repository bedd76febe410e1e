"""Issue 31: what a new user met in the first hour on main (065756e); each test failed there.

Items 1 (no output cap, no breaker on a dead job), 2 (a silent model swap), 5 (jobs that called a
model but were not recorded), 6 (misspelled options sent to the server), 8 (false drift warnings)
and 11 (small ones).
"""

from __future__ import annotations

import time
import warnings

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError, ServiceError
from inferframe.functions import classify_text, format, prompt
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-first-hour-123"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY)) as s:
        yield s


# --- item 2: a model the embedded server does not serve is refused before any request ---------------

def test_a_hosted_model_without_a_key_is_an_error_not_a_swap(monkeypatch):
    """Before: prompt(model="gpt-5-mini") with no key ran on Gemma and was recorded as local:gpt-5-mini."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(PlanError) as e:
        prompt(col("review"), model="gpt-5-mini")
    message = str(e.value)
    assert "gpt-5-mini" in message and "OPENAI_API_KEY" in message and "leave" in message and "model out" in message
    with pytest.raises(PlanError, match="not served here"):
        prompt(col("review"), provider="local", model="llama-3-8b")
    prompt(col("review"))  # the embedded model, named or not, still works
    prompt(col("review"), model="gemma-3-270m")


# --- item 6: every option is checked, with "did you mean"; extra_body passes anything -------------

def test_misspelled_options_are_refused_with_did_you_mean():
    """Before: {"max_token": 5, "temprature": 0.2} went into the request body of a vLLM server."""
    base = dict(provider="vllm", base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(PlanError, match=r"max_token=5 \(did you mean max_tokens\?\).*extra_body"):
        prompt(col("t"), max_token=5, **base)
    with pytest.raises(PlanError, match=r"temprature=0.2 \(did you mean temperature\?\)"):
        prompt(col("t"), temprature=0.2, **base)
    with pytest.raises(PlanError, match="temprature"):
        prompt(col("t"), temprature=0.2)  # the embedded provider too
    with pytest.raises(PlanError, match="extra_body must be a dict"):
        prompt(col("t"), extra_body=["x"], **base)
    # what a server of this kind takes passes; anything else goes through extra_body on purpose
    prompt(col("t"), guided_choice=["a", "b"], top_k=5, **base)
    prompt(col("t"), dry_multiplier=0.0, n_probs=3)
    prompt(col("t"), extra_body={"temprature": 0.2}, **base)


def test_extra_body_reaches_the_wire(sim):
    df = ifr.from_pydict({"q": ["hi"]}).with_column("a", prompt(
        col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini",
        use_chat_completions=True, extra_body={"my_field": 7}))
    # The field reached the wire: the simulator, like OpenAI, refuses an argument it does not know.
    assert "my_field" in df.to_pydict()["a_error"][0]["message"]


# --- item 1: the embedded model caps its answers; a dead job stops and is recorded failed -----------

def test_the_local_provider_caps_free_text_by_its_prompt():
    from inferframe.providers.local import free_text_cap

    assert free_text_cap(len("Summarise this review in five words. The kettle arrived dented and late.")) == 64
    assert free_text_cap(3 * 300) == 512 and free_text_cap(3 * 2000) == 48  # never past the slot's context


def test_a_summary_on_the_local_model_ends_at_its_cap_with_its_text():
    """Before: 126.6 s, then {'kind': 'timeout'} and no text: llama-server ran with n_predict -1."""
    df = ifr.from_pydict({"t": ["The kettle arrived dented and late."]}).with_column(
        "a", prompt(col("t"), system_message="Summarise this review in five words.", max_retries=0, temperature=0,
                    usage_column=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = df.to_pylist()[0]
    assert row["a_error"] is None and row["a"]
    assert row["a_usage"]["output_tokens"] <= 64
    assert row["a_usage"]["finish_reason"] in ("stop", "length")


def test_a_job_whose_rows_all_time_out_stops_and_is_recorded_failed(sim, tmp_path):
    """Before: 5 rows all timing out took 846.8 s (30 requests) and the run was recorded 'ok'."""
    sim.configure(p_timeout=1.0, timeout_hang_s=30.0)
    df = ifr.from_pydict({"q": [f"q{i}" for i in range(5)]}).with_column("a", prompt(
        col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini", timeout=0.3,
        max_retries=5))
    started = time.monotonic()
    with pytest.raises(ServiceError, match="no answer in time"):
        df.write_parquet(str(tmp_path / "out"))
    assert time.monotonic() - started < 25  # far below 5 rows x 6 attempts x the timeout
    assert sim.stats()["total_requests"] < 30
    assert ifr.runs().to_pylist()[0]["status"] == "failed"


# --- item 5: every job that called a model is recorded --------------------------------------------

def test_a_sem_filter_job_is_recorded_and_writes_its_report(sim, tmp_path):
    """Before: sem_filter().collect() added no run; write_parquet(report=...) wrote no report."""
    before = ifr.runs().count_rows()
    q = ifr.from_pydict({"t": ["hello there", "good bye"]}).sem_filter(
        "{t} is a greeting", provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini")
    q.collect()
    assert ifr.runs().count_rows() == before + 1
    report = tmp_path / "run2.html"
    q.write_parquet(str(tmp_path / "out"), report=str(report))
    assert report.exists() and "gpt-5-mini" in report.read_text()
    plain = ifr.from_pydict({"t": ["a"]}).with_column("n", col("t").str.length())
    plain.collect()
    assert ifr.runs().count_rows() == before + 2  # a job with no model call is not recorded


# --- item 8: drift compares like with like, with enough answers ------------------------------------

def test_drift_compares_only_the_same_pipeline_with_enough_rows(sim):
    """Before: the demo (stripped, lowercased) then the README block (raw, .limit(5)) gave 5 DriftWarnings."""
    texts = [f"review {i}" for i in range(60)]
    ask = dict(provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini")
    raw = prompt(format("Review: {}", col("t")), **ask)
    cleaned = ifr.from_pydict({"t": texts}).with_column("s", raw).with_column("s", col("s").str.upper())
    with warnings.catch_warnings():
        warnings.simplefilter("error", ifr.DriftWarning)
        cleaned.collect()
        ifr.from_pydict({"t": texts[:5]}).with_column("s", raw).collect()  # another pipeline, and 5 rows
        cleaned.limit(5).collect()  # the same pipeline, 5 rows: too few to compare


# --- item 11: small ones ----------------------------------------------------------------------------

def test_show_with_a_negative_count_is_an_error():
    with pytest.raises(PlanError, match="n must be a whole number >= 0"):
        ifr.from_pydict({"a": [1, 2]}).show(-1)


def test_classify_labels_given_as_one_string():
    """Before: 'got ['p', 'o', 's', ...]'."""
    with pytest.raises(PlanError, match=r"labels must be a list of strings.*positive,negative"):
        classify_text(col("t"), "positive,negative")


def test_warnings_point_at_the_users_line(sim):
    """Before: 'dataframe.py:632: ... with job_progress(...)', a line inside the library."""
    sim.configure(p_length=1.0)
    df = ifr.from_pydict({"q": ["a", "b"]}).with_column("a", prompt(
        col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        df.collect()
    cut = [w for w in seen if "cut off" in str(w.message)]
    assert cut and all(w.filename == __file__ for w in cut), [(w.filename, w.lineno) for w in cut]


def test_explain_prints_no_name_given_inside_an_expression():
    """Before: 'cast(col(review) as text as string)'."""
    df = ifr.from_pydict({"review": ["a"]})
    text = df.select(col("review").alias("text").cast(ifr.DataType.string()).alias("t")).explain()
    assert "cast(col(review) as string) as t" in text and "as text" not in text


def test_explain_of_a_semantic_predicate_prints_no_made_up_name():
    """Before: 'Filter struct.get(sem_filter[score](...), field='value') as literal' (the name of its first part)."""
    from inferframe.functions import sem_predicate

    text = ifr.from_pydict({"review": ["a"]}).where(sem_predicate("{review} is angry")).explain()
    [line] = [ln for ln in text.splitlines() if ln.strip().startswith("* Filter")][:1]
    assert "sem_filter[score]" in line and not line.rstrip().endswith("as literal"), line
