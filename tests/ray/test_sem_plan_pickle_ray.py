"""A plan holding the whole-table semantic operators (planned in ``plan/semantic``) pickles with plain pickle and its
copy runs on the Ray runner as the original runs on the local runner (issue 32 item 1)."""

import json
import pickle
import re

import inferframe as ifr
from inferframe.simulator import Simulator, SimulatorConfig


def answer(body):
    text = body["messages"][-1]["content"]
    if "Answer A or B" in text:
        a, b = (int(x) for x in re.findall(r"enthusiasm (\d+)", text))
        return json.dumps({"label": "A" if a > b else "B"})
    a, b = re.findall(r"\[(\d+)\]", text)  # sem_cluster_by's pair check: the same planted id
    return json.dumps({"label": "yes" if a == b else "no"})


def test_a_pickled_plan_of_sem_cluster_by_and_sem_topk_runs_on_ray_as_the_original_runs_locally(ray_cluster):
    names = ["Joe's Pizza [0]", "Blue Fern Cafe [1]", "Joes Pizza [0]", "City Hardware [2]", "The Blue Fern Cafe [1]"]
    df = ifr.from_pydict({"name": names, "review": [f"{n} enthusiasm {e}" for n, e in zip(names, [3, 9, 5, 1, 2])]})
    with Simulator(SimulatorConfig(responder=answer)) as sim:
        api = dict(provider="openai", base_url=sim.base_url, api_key="sk-ray", model="gpt-5-mini",
                   use_chat_completions=True, cache="off")

        def build():  # a new plan each time: its own nodes, so neither run reads what the other kept
            return df.sem_cluster_by("{name} are the same business", k=2, **api).sem_topk(
                "{review} is the most enthusiastic", k=2, plan="quick", **api)

        try:
            ifr.set_runner_native()
            local = build().to_pydict()
            asked = sim.stats()["total_requests"]
            copy = ifr.DataFrame(pickle.loads(pickle.dumps(build()._plan)))
            ifr.set_runner_ray()
            remote = copy.to_pydict()
        finally:
            ifr.set_runner_native()
        # every row kept with its cluster (Joe's: 0, Blue Fern: 1, City Hardware: 2), then the two most enthusiastic
        assert remote == local and local == {"name": ["Blue Fern Cafe [1]", "Joes Pizza [0]"], "review": [
            "Blue Fern Cafe [1] enthusiasm 9", "Joes Pizza [0] enthusiasm 5"], "cluster_id": [1, 0]}
        assert sim.stats()["total_requests"] == 2 * asked > 0
