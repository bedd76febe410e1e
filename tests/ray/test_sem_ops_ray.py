"""sem_filter (with .limit), sem_topk, sem_agg and sem_dedup on the Ray runner give the local runner's results
on the same data, and their requests go through the simulator (planted answers)."""

import json
import random
import re

import pytest

import inferframe as ifr
from inferframe.simulator import Simulator, SimulatorConfig


def text_of(body):
    return body["messages"][-1]["content"]


def answer(body):
    """Planted answers for every operator below, told apart by the question's wording."""
    text = text_of(body)
    if "Answer A or B" in text:  # sem_topk: the higher planted enthusiasm wins
        a, b = (int(x) for x in re.findall(r"enthusiasm (\d+)", text))
        return json.dumps({"label": "A" if a > b else "B"})
    if text.startswith("Record 1: "):  # sem_dedup: the same business when the planted ids match
        a, b = re.findall(r"\[(\d+)\]", text)
        return json.dumps({"label": "yes" if a == b else "no"})
    if text.startswith("Statement: "):  # sem_filter
        return json.dumps({"label": "yes" if "good" in text else "no"})
    ids = re.findall(r"c\d\d", text)  # sem_agg: the first and last row id of the prompt
    return f"{ids[0]}-{ids[-1]}"


def api(sim):
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-ray", model="gpt-5-mini",
                use_chat_completions=True, cache="off")


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(responder=answer)) as s:
        yield s


@pytest.fixture
def runners(ray_cluster):
    """Runs ``build`` (a function of nothing) on the local runner, then on Ray: ((local, ray), requests on each,
    jobs the Ray runner ran)."""
    def both(sim, build):
        out, requests = [], []
        ray_jobs = []
        for use in (ifr.set_runner_native, ifr.set_runner_ray):
            runner = use()
            if runner.name == "ray":
                execute = runner.execute
                runner.execute = lambda *a, **kw: (ray_jobs.append(1), execute(*a, **kw))[1]
            before = sim.stats()["total_requests"]
            result = build()
            if isinstance(result, ifr.DataFrame):
                result.to_pydict()  # a lazy operator runs here, on this runner (its result is kept)
            out.append(result)
            requests.append(sim.stats()["total_requests"] - before)
        return out, requests, len(ray_jobs)

    yield both
    ifr.set_runner_native()


def test_sem_filter_and_limit_on_ray_match_the_local_runner(sim, runners):
    df = ifr.from_pydict({"r": [("bad" if i % 3 == 0 else "good") + f" film {i}" for i in range(12)]})
    gold = [f"good film {i}" for i in range(12) if i % 3]
    (local, ray), requests, jobs = runners(sim, lambda: df.sem_filter("{r} is positive", **api(sim)).to_pydict())
    # A failed row would be kept with its error (error_column=True, the default): none failed here.
    assert local == ray and local["r"] == gold and requests == [12, 12] and jobs == 1
    assert local["sem_filter_error"] == [None] * len(gold)
    (local, ray), requests, jobs = runners(sim, lambda: df.sem_filter("{r} is positive", **api(sim)).limit(3).to_pydict())
    assert local == ray and local["r"] == gold[:3] and all(0 < n <= 12 for n in requests) and jobs == 1


def test_sem_topk_on_ray_matches_the_local_runner(sim, runners):
    rng = random.Random(3)
    score = list(range(8))
    rng.shuffle(score)
    df = ifr.from_pydict({"id": list(range(8)), "review": [f"review {i} enthusiasm {s}" for i, s in enumerate(score)]})
    (local, ray), requests, jobs = runners(sim, lambda: df.sem_topk("{review} is the most enthusiastic", k=2, **api(sim)))
    assert local.to_pydict() == ray.to_pydict()
    assert [score[i] for i in ray.to_pydict()["id"]] == [7, 6]
    assert ray.sem_stats == local.sem_stats and requests == [local.sem_stats["calls"]] * 2
    assert ray.sem_stats["failed"] == 0 and jobs == 2 + ray.sem_stats["jobs"] > 3  # the input collected once, a job a round, the result read


def test_sem_agg_on_ray_matches_the_local_runner(sim, runners):
    df = ifr.from_pydict({"g": ["A"] * 4 + ["B"] * 2, "review": [f"c{i:02d} late" for i in range(6)]})
    (local, ray), requests, jobs = runners(sim, lambda: df.sem_agg("Summarise the complaints in {review}", group_by="g",
                                                             max_chars=20, **api(sim)))
    assert local.to_pydict() == ray.to_pydict() == {"g": ["A", "B"], "sem_agg": ["c00-c03", "c04-c05"]}
    assert ray.sem_stats == local.sem_stats and requests == [local.sem_stats["calls"]] * 2
    assert ray.sem_stats["levels"] == {"A": 2, "B": 1}  # A: 4 rows -> 2 packs -> 1
    assert jobs == 2 + ray.sem_stats["jobs"] == 4  # the input collected once, a job a level, the result read


def test_sem_dedup_on_ray_matches_the_local_runner(sim, runners):
    names = ["Joe's Pizza [0]", "Blue Fern Cafe [1]", "Joes Pizza [0]", "City Hardware [2]", "The Blue Fern Cafe [1]"]
    df = ifr.from_pydict({"name": names})
    (local, ray), requests, jobs = runners(sim, lambda: df.sem_dedup("{name} are the same business", k=2, **api(sim)))
    assert local.to_pydict() == ray.to_pydict() == {"name": ["Joe's Pizza [0]", "Blue Fern Cafe [1]",
                                                             "City Hardware [2]"], "cluster_id": [0, 1, 2]}
    assert ray.sem_stats == local.sem_stats and requests == [local.sem_stats["calls"]] * 2 and requests[0] > 0
    assert jobs == 4  # the input collected once, the embedding job, the pair checks, the result read
