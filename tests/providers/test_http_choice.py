"""Two HTTP clients, one interface (issue 42): reqwest and aiohttp give the same rows, INFERFRAME_HTTP chooses,
and a process where pyreqwest cannot import runs its jobs on aiohttp after one warning that says why.

Every failure goes through the real simulator and its fault injection; a job runs as a user runs it, with the
client chosen by the variable a user would set.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import textwrap

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import prompt
from inferframe.providers.interface import Request
from inferframe.providers.openai import OpenAIProvider
from inferframe.providers.spec import ProviderSpec
from inferframe.simulator import FailRule, Simulator, SimulatorConfig

KEY = "sk-test-transport-7777"
CLIENTS = ("reqwest", "aiohttp")
RULES = (FailRule("R400", status=400, message="Invalid 'temperature': decimal above maximum value."),
         FailRule("R404", status=404, message="The model `gpt-x` does not exist"),
         FailRule("R429", status=429, message="Rate limit reached for requests"),
         FailRule("R500", status=500, message="The server had an error processing your request."),
         FailRule("RESET", kind="connection_reset"), FailRule("HANG", kind="timeout"),
         FailRule("HALF", kind="malformed"))
QUESTIONS = [f"question {i}" for i in range(10)] + ["R400", "R404", "R429", "R500", "RESET", "HANG", "HALF"]
# What the server's answer itself carries and changes on every request: its id and its clock.
_SERVER_IDS = re.compile(r'(?:resp|chatcmpl)[_-][0-9a-f]+|"created(?:_at)?":\d+')


def _rows(base_url: str, client: str, monkeypatch, questions=QUESTIONS) -> dict:
    monkeypatch.setenv("INFERFRAME_HTTP", client)
    df = ifr.from_pydict({"q": questions})
    return df.with_column("a", prompt(col("q"), provider="openai", base_url=base_url, api_key=KEY, model="gpt-5-mini",
                                      max_retries=0, timeout=0.5)).to_pydict()


def _neutral(errors: list) -> list:
    return [e if e is None else {**e, "message": _SERVER_IDS.sub("<server's>", e["message"])} for e in errors]


def test_the_same_failures_through_both_clients_give_equal_rows(monkeypatch):
    out = {}
    for client in CLIENTS:
        with Simulator(SimulatorConfig(fail_rules=RULES, rpm=6000, timeout_hang_s=3, require_api_key=KEY)) as sim:
            out[client] = _rows(sim.base_url, client, monkeypatch)
    reqwest, aiohttp = out["reqwest"], out["aiohttp"]
    assert reqwest["a"] == aiohttp["a"]
    assert _neutral(reqwest["a_error"]) == _neutral(aiohttp["a_error"])
    by_q = dict(zip(QUESTIONS, reqwest["a_error"]))
    kinds = {q: (e["kind"], e["status"]) for q, e in by_q.items() if e is not None}
    assert kinds == {"R400": ("bad_request", 400), "R404": ("not_found", 404), "R429": ("rate_limit", 429),
                     "R500": ("server", 500), "RESET": ("connection", None), "HANG": ("timeout", None),
                     "HALF": ("malformed", 200)}
    assert by_q["HANG"]["message"] == "No answer within 0.5 s"
    assert by_q["RESET"]["message"] == "connection failed (Connection reset by peer)"
    assert "Rate limit reached for requests" in by_q["R429"]["message"]
    assert all(KEY not in repr(e) for e in reqwest["a_error"] + aiohttp["a_error"])


def test_a_closed_port_gives_equal_rows_through_both_clients(monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = [_rows(f"http://127.0.0.1:{port}/v1", client, monkeypatch, ["a", "b"])["a_error"] for client in CLIENTS]
    assert out[0] == out[1]
    # The row says where nothing answered and what to do about it.
    assert out[0][0]["kind"] == "connection" and out[0][0]["message"] == (
        f"connection failed (Connection refused): nothing answers at http://127.0.0.1:{port}/v1/responses. "
        "Start the server there, or point base_url at a running one.")


def _answers_and_limits(base_url: str) -> list:
    async def go():
        p = OpenAIProvider(ProviderSpec("openai"), base_url=base_url, api_key=KEY)
        try:
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
            limited = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "R429"}]}
            return type(p._http).__name__, [await p.send(Request("chat", body)), await p.send(Request("chat", limited))]
        finally:
            await p.aclose()

    client, outcomes = asyncio.run(go())
    return client, [(o.error_kind, o.message, o.status, o.retry_after is not None, o.limits and o.limits.requests_limit,
             o.limits and o.limits.tokens_limit) for o in outcomes]


def test_rate_limit_headers_read_the_same_through_both_clients(monkeypatch):
    seen, used = [], []
    for client in CLIENTS:
        monkeypatch.setenv("INFERFRAME_HTTP", client)
        with Simulator(SimulatorConfig(fail_rules=RULES, rpm=600, tpm=90_000)) as sim:
            name, outcomes = _answers_and_limits(sim.base_url)
        used.append(name)
        seen.append(outcomes)
    assert used == ["ReqwestTransport", "AiohttpTransport"]
    assert seen[0] == seen[1]
    ok, limited = seen[0]
    assert ok[0] is None and ok[4:] == (600, 90_000)
    assert limited[0].value == "rate_limit" and limited[2] == 429 and limited[3]


def test_the_variable_chooses_the_client_and_a_wrong_value_is_a_plan_error(monkeypatch):
    kinds = {}
    for client in CLIENTS:
        monkeypatch.setenv("INFERFRAME_HTTP", client)
        kinds[client] = type(OpenAIProvider(ProviderSpec("openai"), base_url="http://x/v1", api_key=KEY)._http).__name__
    assert kinds == {"reqwest": "ReqwestTransport", "aiohttp": "AiohttpTransport"}
    monkeypatch.setenv("INFERFRAME_HTTP", "curl")
    with pytest.raises(PlanError, match=r"INFERFRAME_HTTP='curl' .* Use one of: reqwest, aiohttp"):
        ifr.from_pydict({"q": ["a"]}).with_column("a", prompt(col("q"), provider="openai", base_url="http://x/v1",
                                                              api_key=KEY, model="gpt-5-mini"))


_NO_REQWEST = textwrap.dedent("""
    import os, sys
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt

    def job():
        df = ifr.from_pydict({"q": ["one", "two", "three"]})
        return df.with_column("a", prompt(col("q"), provider="openai", base_url=sys.argv[1], api_key="sk-x",
                                          model="gpt-5-mini")).to_pydict()

    first = job()
    second = job()  # a second job, a second provider: no second warning
    print("ROWS", first["a"], second["a_error"])
    os.environ["INFERFRAME_HTTP"] = "reqwest"
    try:
        job()
    except ifr.PlanError as e:
        print("ASKED FOR REQWEST:", e)
""")


def test_without_pyreqwest_jobs_run_on_aiohttp_after_one_warning(tmp_path):
    broken = tmp_path / "pyreqwest"
    broken.mkdir()
    (broken / "__init__.py").write_text('raise ImportError("libpyreqwest.so: cannot open shared object file")\n')
    env = {k: v for k, v in os.environ.items() if k != "INFERFRAME_HTTP"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
    with Simulator(SimulatorConfig()) as sim:
        done = subprocess.run([sys.executable, "-c", _NO_REQWEST, sim.base_url], capture_output=True, text=True,
                              env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS ['sim answer: one', 'sim answer: two', 'sim answer: three'] [None, None, None]" in done.stdout
    warned = [line for line in done.stderr.splitlines() if "sends its requests through aiohttp" in line]
    assert len(warned) == 1, done.stderr[-3000:]
    assert "RuntimeWarning" in warned[0] and "libpyreqwest.so: cannot open shared object file" in warned[0]
    asked = done.stdout.split("ASKED FOR REQWEST:")[1]
    assert "INFERFRAME_HTTP=reqwest" in asked and "cannot open shared object file" in asked and "aiohttp" in asked
