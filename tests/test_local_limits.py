"""Issue 41 item 3: the embedded model's limits, and advice that fits the options set.

Before (c6aeb40): ``prompt(col("review"), max_tokens=1_000_000)`` on the embedded model ran 4 min 9 s
on 3 rows, then advised "Set max_tokens=...", which was already set.
"""

import pytest

import inferframe as ifr
from inferframe import PlanError, ServiceError, col
from inferframe.functions import prompt
from inferframe.providers.local_server import DEFAULT_CTX_PER_SLOT
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-local-limits-5"


@pytest.mark.parametrize("option", ["max_tokens", "max_output_tokens", "max_completion_tokens"])
def test_promise_a_max_tokens_beyond_the_local_slot_is_a_plan_error(option):
    with pytest.raises(PlanError) as e:
        prompt(col("review"), **{option: 1_000_000})
    msg = str(e.value)
    assert f"{option}=1000000" in msg
    assert f"{DEFAULT_CTX_PER_SLOT:,} tokens" in msg  # the limit: the context of one llama.cpp slot
    assert "prompt and answer together" in msg and "e.g. max_tokens=512" in msg


def test_the_limit_is_what_the_running_server_gives_each_slot():
    """The PlanError's arithmetic, checked against the embedded llama.cpp server itself (its /slots)."""
    import json
    import urllib.request

    from inferframe.providers.local_server import get_local_server

    server = get_local_server()
    with urllib.request.urlopen(server.base_url.removesuffix("/v1") + "/slots") as resp:
        slots = json.loads(resp.read())
    # One cache of n_parallel x DEFAULT_CTX_PER_SLOT tokens that the slots share (--kv-unified): with every
    # slot busy, as a job keeps them, each request in flight has DEFAULT_CTX_PER_SLOT of it.
    assert len(slots) == server.n_parallel
    assert {s["n_ctx"] for s in slots} == {server.n_parallel * DEFAULT_CTX_PER_SLOT}
    # (The server of this process may run fewer slots than a new one would, if an earlier job asked for
    # fewer: the share of each request in flight is the same either way, and that is the limit.)
    with pytest.raises(PlanError, match=f"{DEFAULT_CTX_PER_SLOT:,} tokens a slot for each request in flight"):
        prompt(col("review"), max_tokens=DEFAULT_CTX_PER_SLOT)


def test_the_slot_must_leave_room_for_the_prompt():
    with pytest.raises(PlanError, match="2,048 tokens"):
        prompt(col("review"), model="gemma-3-270m", max_tokens=DEFAULT_CTX_PER_SLOT)
    prompt(col("review"), model="gemma-3-270m", max_tokens=1500)  # fits, with room for a prompt


def test_the_slot_limit_is_checked_before_anything_runs():
    df = ifr.from_pydict({"review": ["fine"]})
    with pytest.raises(PlanError):
        df.with_column("a", prompt(col("review"), max_tokens=1_000_000))


def test_a_timeout_with_max_tokens_set_advises_lowering_it(tmp_path):
    """Before: "Set max_tokens=... to cap each answer", with max_tokens=4000 already set."""
    with Simulator(SimulatorConfig(require_api_key=KEY, p_timeout=1.0, timeout_hang_s=30.0)) as sim:
        df = ifr.from_pydict({"q": [f"q{i}" for i in range(3)]}).with_column("a", prompt(
            col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini", timeout=0.3,
            max_retries=3, max_tokens=4000))
        with pytest.raises(ServiceError) as e:
            df.to_pydict()
    msg = str(e.value)
    assert "Set max_tokens=..." not in msg
    assert "max_tokens=4000" in msg and "lower max_tokens" in msg and "longer timeout=" in msg


def test_a_timeout_without_max_tokens_advises_setting_it():
    with Simulator(SimulatorConfig(require_api_key=KEY, p_timeout=1.0, timeout_hang_s=30.0)) as sim:
        df = ifr.from_pydict({"q": [f"q{i}" for i in range(3)]}).with_column("a", prompt(
            col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini", timeout=0.3,
            max_retries=3))
        with pytest.raises(ServiceError, match=r"Set max_tokens=\.\.\. to cap each answer, or a longer timeout="):
            df.to_pydict()
