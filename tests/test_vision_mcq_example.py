"""The vision multiple-choice example, run end to end against the simulator."""

import base64
import csv
import importlib.util
import json
import pathlib
import sys

from inferframe.simulator import Simulator, SimulatorConfig

EXAMPLE = pathlib.Path(__file__).parent.parent / "examples" / "vision_mcq.py"
DATA = EXAMPLE.parent / "data" / "mcq"


def load():
    spec = importlib.util.spec_from_file_location("vision_mcq", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["vision_mcq"] = mod  # pydantic resolves the example's annotations through its module
    spec.loader.exec_module(mod)
    return mod


def test_example_runs_and_computes_accuracy():
    rows = list(csv.DictReader(open(DATA / "questions.csv")))
    by_image = {
        "data:image/png;base64," + base64.b64encode((DATA / r["image"]).read_bytes()).decode(): (i, r) for i, r in enumerate(rows)
    }

    def respond(req):
        parts = req["messages"][-1]["content"]
        i, row = by_image[parts[0]["image_url"]["url"]]  # the image arrives as a base64 data URL, first
        assert row["question"] in parts[1]["text"] and row["choices"] in parts[1]["text"]
        # Right on even rows, wrong on odd ones: accuracy must come out at exactly one half.
        right = row["answer"]
        answer = right if i % 2 == 0 else ("A" if right != "A" else "B")
        return json.dumps({"answer": answer, "confidence": 0.9})

    with Simulator(SimulatorConfig(responder=respond, allow_unknown_models=True)) as sim:
        result = load().run(sim.base_url, "vision-model", "k")
    assert result["questions"] == 12 and result["failed_rows"] == 0
    assert result["accuracy"] == 0.5
