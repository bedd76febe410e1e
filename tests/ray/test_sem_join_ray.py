"""sem_join on the Ray runner gives the local runner's pairs (projection and nested plans, simulator answers)."""

import json

import pytest

import inferframe as ifr
from inferframe.simulator import Simulator, SimulatorConfig

SAME = "{review:left} and {review:right} express the same sentiment"
REVIEWS = [f"{'good' if i % 3 else 'bad'} film number {i}" for i in range(8)]


def _answer(body):
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "Decide" in system:
        a, b = text.split(" and ", 1)
        return json.dumps({"label": "yes" if ("good" in a) == ("good" in b.rsplit(" express", 1)[0]) else "no"})
    return json.dumps({"label": "positive" if "good" in text else "negative"})


@pytest.fixture
def on_ray(ray_cluster):
    ifr.set_runner_ray()
    yield
    ifr.set_runner_native()


@pytest.mark.parametrize("plan", ["projection", "nested"])
def test_sem_join_on_ray_matches_the_planted_pairs(on_ray, plan):
    gold = {(a, b) for a in REVIEWS for b in REVIEWS if ("good" in a) == ("good" in b)}
    with Simulator(SimulatorConfig(responder=_answer)) as sim:
        df = ifr.from_pydict({"review": REVIEWS})
        j = df.sem_join(df, SAME, plan=plan, on_property="sentiment", property_values=["positive", "negative"],
                        provider="openai", base_url=sim.base_url, api_key="sk-ray", model="gpt-5-mini",
                        use_chat_completions=True)
        out = j.to_pydict()
    assert set(zip(out["review"], out["right.review"])) == gold and len(out["review"]) == len(gold)
