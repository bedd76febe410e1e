"""cache_url= / set_cache(url=) / INFERFRAME_CACHE_URL: jobs share answers through PostgreSQL, and the
URL (it holds a password) is nowhere but the store's connection (issue 33 item 1)."""

import os
import pickle

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig
from tests.store.conftest import PASSWORD


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(allow_unknown_models=True)) as s:
        yield s


def ask(sim, cache_dir, **kw):
    return prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="sk-x", model="gpt-5-mini",
                  cache_dir=str(cache_dir), **kw)


def _files_hold(directory, secret: str) -> list[str]:
    return [str(p) for p in directory.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_another_process_with_another_cache_dir_pays_nothing_again(sim, pg_url, tmp_path, capsys):
    df = ifr.from_pydict({"q": [f"q{i}" for i in range(200)]})
    job = df.with_column("a", ask(sim, tmp_path / "node1", cache_url=pg_url))
    first = job.to_pydict()
    assert sim.stats()["total_requests"] == 200
    again = df.with_column("a", ask(sim, tmp_path / "node2", cache_url=pg_url)).to_pydict()
    assert again["a"] == first["a"] and sim.stats()["total_requests"] == 200
    assert not (tmp_path / "node2" / "responses.sqlite").exists()  # the answers came from PostgreSQL
    # The password is in no plan, pickle, explain(), repr, run history or output.
    assert PASSWORD not in repr(job) and PASSWORD.encode() not in pickle.dumps(job)
    assert PASSWORD not in job.explain()
    assert PASSWORD not in capsys.readouterr().out + capsys.readouterr().err
    assert _files_hold(tmp_path, PASSWORD) == []
    from inferframe.observe import last_run

    assert PASSWORD not in repr(last_run())


def test_set_cache_url_and_the_environment(sim, pg_url, tmp_path, monkeypatch):
    df = ifr.from_pydict({"q": ["a", "b"]})
    ifr.set_cache(url=pg_url)
    try:
        df.with_column("a", ask(sim, tmp_path / "one")).collect()
    finally:
        ifr.set_cache(None)
    assert sim.stats()["total_requests"] == 2
    monkeypatch.setenv("INFERFRAME_CACHE_URL", pg_url)
    df.with_column("a", ask(sim, tmp_path / "two")).collect()
    assert sim.stats()["total_requests"] == 2  # found in the store the environment names


def test_a_bad_url_never_shows_its_password(tmp_path):
    with pytest.raises(PlanError) as err:
        ifr.from_pydict({"q": ["a"]}).with_column(
            "a", prompt(col("q"), provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k", model="m",
                        cache_url=f"mysql://me:{PASSWORD}@db/cache"))
    assert PASSWORD not in str(err.value) and "postgresql://" in str(err.value)


def test_an_unreachable_store_stops_the_job_before_any_request(sim, tmp_path):
    url = f"postgresql://me:{PASSWORD}@127.0.0.1:1/cache"
    with pytest.raises(ifr.errors.InferframeError, match="cache store postgresql://127.0.0.1:1/cache is unreachable") as err:
        ifr.from_pydict({"q": ["a", "b"]}).with_column("a", ask(sim, tmp_path, cache_url=url)).collect()
    assert "host 127.0.0.1:1" in str(err.value) and PASSWORD not in str(err.value)
    assert sim.stats()["total_requests"] == 0


def test_the_url_reaches_a_worker_process_through_its_environment_only(pg_url):
    from inferframe.providers import secrets
    from inferframe.session import Session, cache_url_of

    ref = Session().cache_store_of(pg_url)
    assert PASSWORD not in ref and cache_url_of(ref) == pg_url
    env = secrets.worker_env()
    assert env[secrets.ENV_PREFIX + ref] == pg_url
    secrets.forget()  # a provider reset keeps the store
    assert cache_url_of(ref) == pg_url
    os.environ.pop(secrets.ENV_PREFIX + ref, None)
