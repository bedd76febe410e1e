"""The cache key is a function of what is sent: the command line and the Python API share answers (issue 27)."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import inferframe as ifr
from inferframe import cli, col
from inferframe.ai.options import parse_options
from inferframe.functions import format, prompt
from inferframe.observe import last_run
from inferframe.providers.interface import Capabilities
from inferframe.runtime.cache import cache_key
from inferframe.session import Session
from inferframe.simulator import Simulator, SimulatorConfig

ROOT = Path(__file__).resolve().parents[1]
# max_tokens=3, as in the demo: the simulator's answers are cut there (not what these tests are about).
pytestmark = pytest.mark.filterwarnings("ignore::inferframe.observe.TruncatedWarning")
TEMPLATE = "Review: {review}\\nSentiment:"  # as typed on the command line: \n is two characters
FEW_SHOT = ("Classify the sentiment of each review.\n\nReview: Great, works well.\nSentiment: positive\n\n"
            "Review: Broke at once.\nSentiment: negative\n\n")
REVIEWS = ["great product", "awful", "ok I guess", "it broke", "fine"]


def request_of(**options):
    return parse_options("prompt", options, Capabilities(), Session(), model="m").request


def test_a_whole_float_option_is_the_same_request_and_key_as_the_int():
    # --temperature 0 on the command line is the float 0.0; temperature=0 in Python is an int.
    as_float, as_int = request_of(temperature=0.0, max_tokens=3), request_of(temperature=0, max_tokens=3)
    assert as_float == as_int and type(as_float["temperature"]) is int
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert cache_key("p", "chat", {**body, **as_float}) == cache_key("p", "chat", {**body, **as_int})
    # Other numbers keep their value; a fraction is not an int.
    assert request_of(temperature=0.7, extra_body={"seed": 7.0, "logit_bias": {"1": -100}}) == {
        "temperature": 0.7, "extra_body": {"seed": 7, "logit_bias": {"1": -100}}}


# --- the command line and the Python API on the simulator (an OpenAI-compatible server: chat completions) ---


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(allow_unknown_models=True, record_requests=True)) as s:
        yield s


@pytest.fixture
def files(tmp_path):
    csv = tmp_path / "reviews.csv"
    csv.write_text("id,review\n" + "".join(f'{i},"{r}"\n' for i, r in enumerate(REVIEWS, 1)))
    system = tmp_path / "few_shot.txt"
    system.write_text(FEW_SHOT)
    return csv, system


def cli_job(sim, csv, system, cache_dir, out, *extra):
    args = ["prompt", str(csv), "--template", TEMPLATE, "--system-message", f"@{system}", "--max-tokens", "3",
            "--stop", "\\n", "--temperature", "0", "--strip", "--as", "sentiment", "--provider", "lm_studio",
            "--base-url", sim.base_url, "--model", "sim-model", "--cache-dir", str(cache_dir), "--out", str(out),
            *extra]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.stderr
    return result


def api_job(sim, csv, cache_dir, rows=None, **provider):
    df = ifr.read_csv(str(csv))
    if rows is not None:
        df = df.limit(rows)
    provider = provider or {"provider": "lm_studio"}
    return df.with_column("sentiment", prompt(
        format("Review: {}\nSentiment:", col("review")), system_message=FEW_SHOT, base_url=sim.base_url,
        model="sim-model", max_tokens=3, stop=["\n"], temperature=0, cache_dir=str(cache_dir), **provider,
    )).with_column("sentiment", col("sentiment").str.strip())


def sent_bodies(sim) -> list[str]:
    """The bodies the server got, each as canonical JSON (0 and 0.0 stay apart, as on the wire), less the
    prefix group's prompt_cache_key (a routing hint added as a row is sent)."""
    bodies = [{k: v for k, v in r["body"].items() if k != "prompt_cache_key"} for r in sim.requests()]
    return sorted(json.dumps(b, sort_keys=True) for b in bodies)


def test_the_cli_and_the_python_api_send_the_same_request_bodies(sim, files, tmp_path):
    csv, system = files
    cli_job(sim, csv, system, tmp_path / "c1", tmp_path / "o1", "--cache", "off")
    from_cli = sent_bodies(sim)
    assert len(from_cli) == len(REVIEWS)
    api_job(sim, csv, tmp_path / "c2").collect()
    assert sent_bodies(sim) == sorted(from_cli * 2)  # the API sent each of the CLI's bodies once more


def test_each_answer_is_stored_under_the_key_of_the_body_sent_less_the_routing_hint(sim, files, tmp_path):
    """Key = f(provider identity, endpoint, canonical body sent); the prefix group's prompt_cache_key,
    added as a row goes out, is not part of it (a row may go out in another group next time)."""
    from inferframe.runtime.cache import ResponseCache

    csv, _ = files
    # OpenAI's provider adds the prefix group's prompt_cache_key to each body it sends.
    api_job(sim, csv, tmp_path / "cache", provider="openai", api_key="sk-x", use_chat_completions=True).collect()
    sent = [r["body"] for r in sim.requests()]
    assert len(sent) == len(REVIEWS) and all("prompt_cache_key" in b for b in sent)
    cache = ResponseCache(tmp_path / "cache")
    identity = "openai:" + sim.base_url.rstrip("/")
    for body in sent:
        plain = {k: v for k, v in body.items() if k != "prompt_cache_key"}
        assert cache.get(cache_key(identity, "chat", plain)) is not None, plain
        assert cache.get(cache_key(identity, "chat", body)) is None


def test_after_the_python_api_the_cli_is_answered_from_the_cache(sim, files, tmp_path):
    csv, system = files
    api_job(sim, csv, tmp_path / "cache", rows=3).write_parquet(str(tmp_path / "api_out"))
    assert sim.stats()["total_requests"] == 3
    result = cli_job(sim, csv, system, tmp_path / "cache", tmp_path / "cli_out", "--limit", "3")
    assert sim.stats()["total_requests"] == 3, result.stderr  # nothing sent
    assert "3 cached" in result.stderr


def test_after_the_cli_the_python_api_is_answered_from_the_cache(sim, files, tmp_path):
    csv, system = files
    first = cli_job(sim, csv, system, tmp_path / "cache", tmp_path / "cli_out", "--limit", "3")
    again = cli_job(sim, csv, system, tmp_path / "cache", tmp_path / "cli_out2", "--limit", "3")
    assert "3 cached" in again.stderr, first.stderr
    api_job(sim, csv, tmp_path / "cache", rows=3).write_parquet(str(tmp_path / "api_out"))
    assert sim.stats()["total_requests"] == 3
    assert last_run()[0]["cache_hits"] == 3


# --- the README's one-liner after examples/demo.py, on the embedded local model -------------------------


def readme_cli_line() -> list[str]:
    """The README's demo command line, as the shell would split it."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(\.venv/bin/inferframe prompt examples/data/reviews\.csv .*?)```", readme, re.S)
    assert block, "the README's one-line demo is gone"
    assert "after the demo it is answered from the cache" in readme[:block.start()][-300:]
    args = shlex.split(block.group(1).replace("\\\n", " "))
    assert args[0] == ".venv/bin/inferframe"
    return args[1:]


@pytest.mark.timeout(900)
def test_the_readme_one_liner_after_the_demo_is_answered_from_the_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    env = {**os.environ, "INFERFRAME_CACHE_DIR": str(cache), "INFERFRAME_PROGRESS": "0"}
    env.pop("OPENAI_API_KEY", None)
    demo = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py"), "--rows", "3"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert re.search(r"\b0 answers from the response cache", demo.stdout), demo.stdout[-2000:]

    args = readme_cli_line()
    out = args.index("--out")
    args[out + 1] = str(tmp_path / "reviews_scored")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("INFERFRAME_CACHE_DIR", str(cache))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(cli.app, [*args, "--limit", "3"])
    assert result.exit_code == 0, result.stderr
    assert "3 cached" in result.stderr, result.stderr
    assert last_run()[0]["requests"] == 0
