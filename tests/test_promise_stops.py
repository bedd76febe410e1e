"""Issue 41 item 1: a job that cannot succeed stops, and says why.

Before (c6aeb40): ``prompt(col("review"), provider="openai", model="gpt-5-mnii")`` on 2,000 rows sent
2,000 requests, got 2,000 ``not_found`` answers and raised nothing; ``max_tokens=10`` on /responses
failed every row with the server's "Expected a value >= 16". The README's breaker sentence did not
hold for either. Against the project's OpenAI simulator, which answers as OpenAI documents.
"""

import json
import urllib.error
import urllib.request

import pytest
from typer.testing import CliRunner

import inferframe as ifr
from inferframe import PlanError, ServiceError, col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-stops-secret-77"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY)) as s:
        yield s


def rows(n, word="review"):
    return ifr.from_pydict({"review": [f"{word} {i}" for i in range(n)]})


def ask(sim, **kw):
    kw.setdefault("model", "gpt-5-mini")
    return prompt(col("review"), provider="openai", base_url=sim.base_url, api_key=KEY, **kw)


def post(sim, path, body):
    req = urllib.request.Request(sim.base_url + path, json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# --- the simulator answers as OpenAI documents ----------------------------------------------------

def test_the_simulator_answers_an_unknown_model_as_openai_does(sim):
    status, body = post(sim, "/responses", {"model": "gpt-5-mnii", "input": "hi"})
    assert status == 404
    assert body["error"]["code"] == "model_not_found"
    assert body["error"]["message"] == "The model `gpt-5-mnii` does not exist or you do not have access to it."


def test_the_simulator_refuses_max_output_tokens_below_16_as_openai_does(sim):
    status, body = post(sim, "/responses", {"model": "gpt-5-mini", "input": "hi", "max_output_tokens": 10})
    assert status == 400
    err = body["error"]
    assert (err["type"], err["param"], err["code"]) == ("invalid_request_error", "max_output_tokens",
                                                        "integer_below_min_value")
    assert err["message"] == ("Invalid 'max_output_tokens': integer below minimum value. "
                              "Expected a value >= 16, but got 10 instead.")


# --- a failure that recurs on every row stops the job ----------------------------------------------

def test_promise_a_job_that_cannot_succeed_stops_and_says_why(sim):
    """Before: 2,000 requests, 2,000 not_found rows, nothing raised."""
    df = rows(2000).with_column("a", ask(sim, model="gpt-5-mnii"))
    with pytest.raises(ServiceError) as e:
        df.to_pydict()
    msg = str(e.value)
    assert "HTTP 404: The model `gpt-5-mnii` does not exist or you do not have access to it." in msg
    assert "check the model name" in msg.lower() and "GET /v1/models" in msg
    assert "on_error='null'" in msg  # how to keep such failures as data instead
    assert KEY not in msg
    # Before: 2,000; then 66 (the probe, then a whole in-flight bound of 64). A refused probe probes again,
    # one request at a time, so the job stops after the first few identical refusals.
    assert sim.stats()["total_requests"] == 3


def test_promise_an_invalid_parameter_the_server_refuses_on_every_row_stops_the_job(sim):
    sim.configure(fail_rules=[{"match": "review", "status": 400, "code": "invalid_value",
                               "message": "Invalid value: 'bogus'. Supported values are: 'low' and 'high'."}])
    df = rows(500).with_column("a", ask(sim))
    with pytest.raises(ServiceError, match=r"Invalid value: 'bogus'\. Supported values are: 'low' and 'high'\."):
        df.to_pydict()
    assert sim.stats()["total_requests"] <= 5


def test_a_three_row_job_that_cannot_succeed_raises_too(sim):
    with pytest.raises(ServiceError, match="does not exist"):
        rows(3).with_column("a", ask(sim, model="gpt-5-mnii")).to_pydict()


def test_on_error_null_keeps_every_failure_as_data(sim):
    out = rows(40).with_column("a", ask(sim, model="gpt-5-mnii", on_error="null")).to_pydict()
    assert out["a"] == [None] * 40
    assert {e["kind"] for e in out["a_error"]} == {"not_found"}
    assert sim.stats()["total_requests"] == 40


def test_a_bad_request_that_depends_on_the_row_does_not_stop_the_job(sim):
    # The first rows fail, each with its own message (one row's input too long, say): the job goes on.
    sim.configure(fail_rules=[{"match": f"review {i}", "status": 400,
                               "message": f"Invalid 'input': string too long ({1000 + i} characters)."}
                              for i in (0, 1, 2, 3)])
    out = rows(10).with_column("a", ask(sim, max_concurrency=1, prefix_order=False)).to_pydict()
    assert [e is not None for e in out["a_error"]] == [True] * 4 + [False] * 6
    assert out["a"][4:] == [f"sim answer: review {i}" for i in range(4, 10)]


def test_identical_failures_between_successes_do_not_stop_the_job(sim):
    # A row-dependent refusal with one wording (a flagged prompt, say) on rows that are not consecutive.
    sim.configure(fail_rules=[{"match": "flagged", "status": 400, "message": "Invalid prompt: flagged."}])
    texts = [f"flagged {i}" if i % 2 else f"fine {i}" for i in range(30)]
    df = ifr.from_pydict({"review": texts}).with_column("a", ask(sim, max_concurrency=1, prefix_order=False))
    out = df.to_pydict()
    assert sum(e is not None for e in out["a_error"]) == 15


def test_answered_rows_are_kept_when_the_job_stops(sim, tmp_path):
    """Answers that came before the stop are in the cache: the next run does not send them again."""
    sim.configure(fail_rules=[{"match": "late", "status": 400, "message": "Invalid 'model': retired."}])
    texts = [f"early {i}" for i in range(10)] + [f"late {i}" for i in range(40)]
    df = ifr.from_pydict({"review": texts})
    cache = str(tmp_path / "cache")
    with pytest.raises(ServiceError) as e:
        df.with_column("a", ask(sim, max_concurrency=1, prefix_order=False, cache_dir=cache)).to_pydict()
    assert "The last 20 rows were all refused with the same error" in str(e.value)  # after a success: 20, not 3
    assert "Invalid 'model': retired." in str(e.value) and "kept in the response cache" in str(e.value)
    sent = sim.stats()["total_requests"]
    assert sent == 10 + 20  # one row at a time: stopped at the 20th refusal in a row
    again = df.with_column("a", ask(sim, max_concurrency=1, prefix_order=False, cache_dir=cache,
                                    on_error="null")).to_pydict()
    assert again["a"][:10] == [f"sim answer: early {i}" for i in range(10)]
    assert sim.stats()["total_requests"] - sent == 40  # only the failed and unsent rows were asked again
    assert last_run()[0]["cache_hits"] == 10


def test_promise_every_recent_row_failing_trips_a_breaker(sim):
    """The service answered, then fails every row after its retries (HTTP 500): the job stops once the last 50 did."""
    sim.configure(fail_rules=[{"match": "late", "status": 500}])
    texts = [f"early {i}" for i in range(5)] + [f"late {i}" for i in range(200)]
    df = ifr.from_pydict({"review": texts}).with_column("a", ask(sim, max_concurrency=1, prefix_order=False,
                                                                 max_retries=0))
    with pytest.raises(ServiceError, match="The last 50 rows all failed; the service looks down"):
        df.to_pydict()
    assert sim.stats()["total_requests"] == 5 + 50  # not 205


# --- limits the provider documents are checked before any request -----------------------------------

@pytest.mark.parametrize("option", ["max_tokens", "max_output_tokens"])
def test_promise_max_output_tokens_below_16_on_responses_is_a_plan_error(sim, option):
    """Before: 400 of 400 rows failed with the server's "Expected a value >= 16"."""
    with pytest.raises(PlanError) as e:
        ask(sim, **{option: 10})
    msg = str(e.value)
    assert f"{option}=10" in msg and ">= 16" in msg and "/responses" in msg
    assert "max_tokens=16" in msg and "use_chat_completions=True" in msg  # the fixes
    assert sim.stats()["total_requests"] == 0


def test_a_small_cap_is_accepted_where_the_provider_takes_it(sim):
    out = rows(2).with_column("a", ask(sim, max_tokens=10, use_chat_completions=True)).to_pydict()
    assert out["a_error"] == [None, None]
    ask(sim, max_tokens=16)  # OpenAI's own minimum on /responses


# --- the CLI names the most common error ----------------------------------------------------------

def test_promise_the_cli_names_the_most_common_error(sim, tmp_path, monkeypatch):
    """Before: only "3 rows failed; see the answer_error column"."""
    from inferframe import cli

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    sim.configure(fail_rules=[{"match": "awful", "status": 400, "message": "Invalid 'input': too awful."},
                              {"match": "poor", "status": 422, "message": "Unprocessable: poor."}])
    path = tmp_path / "reviews.csv"
    path.write_text("review\ngreat\nawful one\nfine\nawful two\npoor\n")  # never 3 identical refusals in a row
    for extra in ([], ["--out", str(tmp_path / "out")]):
        result = CliRunner().invoke(cli.app, ["prompt", str(path), "-c", "review", "--provider", "openai",
                                              "--base-url", sim.base_url, "--model", "gpt-5-mini",
                                              *extra])
        assert result.exit_code == 1, result.output
        lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert len(lines) == 1, result.stderr
        assert "3 rows failed; see the answer_error column" in lines[0]
        assert "most common: bad_request (2 rows): HTTP 400: Invalid 'input': too awful." in lines[0]
