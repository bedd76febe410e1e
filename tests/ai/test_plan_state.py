"""A plan carries its run state: options checked once, settings resolved at build time, keys kept out,
counters brought back from worker processes."""

import os
import subprocess
import sys

import cloudpickle
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import classify_text, embed_text, prompt
from inferframe.observe import last_run
from inferframe.plan.optimizer import optimize
from inferframe.providers import secrets
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-secret-channel-test-42"


@pytest.mark.parametrize("fn, kwargs, option, value", [
    (prompt, {"max_concurrency": 0}, "max_concurrency", "0"),
    (prompt, {"on_error": "bogus"}, "on_error", "'bogus'"),
    (prompt, {"max_cost": -1}, "max_cost", "-1"),
    (prompt, {"cache": "sometimes"}, "cache", "'sometimes'"),
    (prompt, {"rpm": "fast"}, "rpm", "'fast'"),
    (prompt, {"pdf_mode": "scan"}, "pdf_mode", "'scan'"),
    (classify_text, {"max_retries": -2}, "max_retries", "-2"),
    (embed_text, {"on_error": "bogus"}, "on_error", "'bogus'"),
    (embed_text, {"max_concurrency": 0}, "max_concurrency", "0"),
    (embed_text, {"max_batch_inputs": 0}, "max_batch_inputs", "0"),
])
def test_every_ai_function_checks_its_options_the_same_way(fn, kwargs, option, value):
    args = (col("t"), ["a", "b"]) if fn is classify_text else (col("t"),)
    extra = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "text-embedding-3-small"} \
        if fn is embed_text else {"model": "gemma-3-270m"}
    with pytest.raises(ifr.PlanError) as e:
        fn(*args, **extra, **kwargs)
    msg = str(e.value)
    assert f"{option}={value}" in msg and "must be" in msg, msg


def test_settings_are_resolved_when_the_plan_is_built(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    ifr.set_cache("read_write", first)
    ifr.set_prices({"sim-model": (3.0, 4.0)})
    try:
        expr = prompt(col("q"), provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k", model="sim-model")
        ifr.set_cache("off", second)
        ifr.set_prices({"sim-model": (9.0, 9.0)})
    finally:
        ifr.set_cache(None)
    config = expr._node.child.args[0].udf.owner.args[0]
    assert config.runtime.cache_policy.value == "read_write"
    assert config.runtime.cache_dir == str(first.absolute())
    assert config.runtime.price == (3.0, 4.0)
    assert config.provider.base_url == "http://127.0.0.1:9/v1"


def test_keys_travel_apart_from_the_plan_and_reach_a_worker_process(tmp_path):
    """The plan pickles with a handle only; a worker gets the key through its environment."""
    with Simulator(SimulatorConfig(require_api_key=KEY)) as sim:
        df = ifr.from_pydict({"q": ["a", "b", "c"]}).with_column(
            "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini", cache="off"))
        blob = cloudpickle.dumps(optimize(df._plan))
        assert KEY.encode() not in blob
        plan_file = tmp_path / "plan.pkl"
        plan_file.write_bytes(blob)
        script = (
            "import cloudpickle, sys\n"
            "from inferframe.runners import get_runner\n"
            f"plan = cloudpickle.loads(open({str(plan_file)!r}, 'rb').read())\n"
            "rows = [r for b in get_runner().run(plan) for r in b.to_pylist()]\n"
            "print(sum(r['a'] is not None for r in rows))\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        with_key = subprocess.run([sys.executable, "-c", script], env={**env, **secrets.worker_env()},
                                  capture_output=True, text=True, timeout=120)
        assert with_key.returncode == 0, with_key.stderr[-2000:]
        assert with_key.stdout.strip() == "3"
        without = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert without.returncode != 0 and "401" in without.stderr
        assert KEY not in without.stderr


def test_last_run_counts_rows_embedded_in_a_worker_process():
    texts = [f"text number {i}" for i in range(40)]
    ifr.from_pydict({"t": texts}).with_column("v", embed_text(col("t"), use_process=True, batch_size=16)).collect()
    runs = last_run()
    assert [r["label"] for r in runs] == ["embed[all-MiniLM-L6-v2]"]
    assert runs[0]["rows_done"] == 40


def test_errors_live_in_one_module_under_one_base():
    import inferframe.errors as errors

    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert len(classes) >= 13
    for cls in classes:
        # Warnings (LowInformationWarning, SemanticFailuresWarning) are UserWarnings, filtered by class, not raised;
        # a renamed option's (RenamedOptionWarning) is a DeprecationWarning, as Python's convention has it.
        assert issubclass(cls, ifr.InferframeError) or issubclass(cls, (UserWarning, DeprecationWarning)), cls
        assert getattr(ifr, cls.__name__) is cls, f"{cls.__name__} is not exported"
    from inferframe.io.errors import SchemaMismatchError
    from inferframe.media import DownloadError, MediaError

    assert SchemaMismatchError is ifr.SchemaMismatchError and MediaError is ifr.MediaError
    assert DownloadError is ifr.DownloadError
    assert {k.value for k in ifr.ErrorKind} >= {"rate_limit", "schema", "budget", "input", "download", "image"}
