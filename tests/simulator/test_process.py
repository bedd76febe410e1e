"""Running as a separate process: Simulator.spawn, the CLI, clean shutdown."""

from __future__ import annotations

import subprocess
import sys

import pytest

from inferframe.simulator import Simulator, SimulatorConfig
from inferframe.simulator.__main__ import parse_args

from .helpers import chat_body, post


def test_spawn_serves_and_is_reconfigurable():
    proc = Simulator.spawn(SimulatorConfig(rpm=600, ratelimit_burst_s=0.1))
    try:
        assert proc.base_url.startswith("http://127.0.0.1:") and proc.base_url.endswith("/v1")
        url = proc.base_url + "/chat/completions"
        s1, h, body = post(url, chat_body("hi"))
        assert s1 == 200 and body["choices"][0]["message"]["content"] == "sim answer: hi"
        assert h["x-ratelimit-limit-requests"] == "600"
        assert post(url, chat_body("again"))[0] == 429
        assert proc.configure(rpm=None)["rpm"] is None
        assert post(url, chat_body("free"))[0] == 200
        st = proc.stats()
        assert st["by_status"] == {"200": 2, "429": 1}
        proc.reset()
        assert proc.stats()["total_requests"] == 0
        assert proc.config.rpm is None
    finally:
        proc.close()
    assert proc.proc.poll() is not None


def test_spawn_with_import_path_responder():
    import openai

    with Simulator.spawn(SimulatorConfig(responder="tests.simulator.responders:shout"),
                         env=_env_with_repo_root()) as proc:
        c = openai.OpenAI(base_url=proc.base_url, api_key="x", max_retries=0)
        r = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "yo"}])
        assert r.choices[0].message.content == "SPAWNED yo"


def test_spawn_rejects_callable_responder():
    with pytest.raises(ValueError):
        Simulator.spawn(SimulatorConfig(responder=lambda b: "x"))


def test_cli_prints_base_url_first_and_stops_on_terminate():
    p = subprocess.Popen([sys.executable, "-m", "inferframe.simulator", "--port", "0", "--rpm", "600",
                          "--p-500", "0", "--record-requests", "--fail-rule", '{"match": "ROW7", "status": 400}'],
                         stdout=subprocess.PIPE, env=_env_with_repo_root())
    try:
        line = p.stdout.readline().decode().strip()
        assert line.startswith("http://127.0.0.1:") and line.endswith("/v1")
        assert post(line + "/chat/completions", chat_body("ROW7"))[0] == 400
        _, h, _ = post(line + "/chat/completions", chat_body("ROW8"))
        assert h["x-ratelimit-limit-requests"] == "600"
    finally:
        p.terminate()
        assert p.wait(10) == 0
        p.stdout.close()


def test_parse_args_builds_config():
    ns, cfg = parse_args(["--port", "0", "--rpm", "600", "--tpm", "none", "--latency-ms", "12.5",
                          "--latency-dist", "lognormal", "--no-track-request-hashes",
                          "--models", "a,b", "--config-json", '{"p_500": 0.1, "seed": 4}', "--seed", "5"])
    assert ns.port == 0
    assert cfg.rpm == 600 and cfg.tpm is None and cfg.latency_ms == 12.5 and cfg.latency_dist == "lognormal"
    assert cfg.track_request_hashes is False and cfg.models == ("a", "b")
    assert cfg.p_500 == 0.1 and cfg.seed == 5


def _env_with_repo_root() -> dict:
    import os
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(root), env.get("PYTHONPATH", "")])
    return env
