"""sem_join's batched plans on the Ray runner gives the planted pairs with rows(left) * ceil(rows(right) / p) requests."""

import json
import math

import pytest

import inferframe as ifr
from inferframe.simulator import Simulator, SimulatorConfig

AGREE = "{review:left} and {review:right} agree"
REVIEWS = [f"{'good' if i % 3 else 'bad'} film number {i}" for i in range(8)]


def _answer(body):
    text = body["messages"][-1]["content"]
    statement, candidates = text.split("\n\nCandidates:\n", 1)
    left = statement.removeprefix("Statement: ").split(" and [candidate]")[0]
    lines = [line.split(". ", 1) for line in candidates.splitlines()]
    return json.dumps({"matches": [int(n) for n, t in lines if ("good" in t) == ("good" in left)]})


@pytest.fixture
def on_ray(ray_cluster):
    ifr.set_runner_ray()
    yield
    ifr.set_runner_native()


@pytest.mark.parametrize("plan, k", [("batched", None), ("blocking_batched", len(REVIEWS))])
def test_batched_sem_join_on_ray_matches_the_planted_pairs(on_ray, plan, k):
    gold = {(a, b) for a in REVIEWS for b in REVIEWS if ("good" in a) == ("good" in b)}
    with Simulator(SimulatorConfig(responder=_answer)) as sim:
        df = ifr.from_pydict({"review": REVIEWS})
        server = {"provider": "openai", "base_url": sim.base_url, "api_key": "sk-ray"}
        # Blocking's embeddings from the simulator too: the plan is what this checks (the packaged MiniLM in Ray
        # workers is test_ray_runner's in-process embeddings test, and loading it here cost 50 s of the suite).
        j = df.sem_join(df, AGREE, plan=plan, k=k, pairs_per_request=3, model="gpt-5-mini", use_chat_completions=True,
                        embed_model="text-embedding-3-small", embed_options=server, **server)
        out = j.to_pydict()
        requests = sim.stats()["by_endpoint"].get("chat.completions", 0)
        embedded = sim.stats()["by_endpoint"].get("embeddings", 0)
    assert set(zip(out["review"], out["right.review"])) == gold and len(out["review"]) == len(gold)
    assert requests == len(REVIEWS) * math.ceil(len(REVIEWS) / 3)
    assert (embedded > 0) == (plan == "blocking_batched")  # blocking embedded both sides at the server
