"""classify_text: the confidence column, label scoring with calibration, and few-shot examples."""

from __future__ import annotations

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import classify_text

LABELS = ["positive", "negative"]


def test_confidence_column_type_is_known_at_plan_time():
    df = ifr.from_pydict({"t": ["good", "bad"]})
    out = df.with_column("label", classify_text(col("t"), LABELS, model="gemma-3-270m", method="generate"))
    assert out.column_names == ["t", "label", "label_error", "label_confidence"]
    assert out.schema()["label_confidence"].to_arrow() == pa.float64()


def test_confidence_column_can_be_left_out():
    df = ifr.from_pydict({"t": ["good"]})
    out = df.with_column("label", classify_text(col("t"), LABELS, model="gemma-3-270m", method="generate",
                                                confidence_column=False))
    assert out.column_names == ["t", "label", "label_error"]


def test_bad_method_is_a_plan_error():
    with pytest.raises(PlanError, match="method='best'"):
        classify_text(col("t"), LABELS, model="gemma-3-270m", method="best")


# --- calibration, on a server built to be biased ----------------------------------------------

import asyncio  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402

from inferframe.ai.classify import ClassifyConfig, ClassifyOperator  # noqa: E402
from inferframe.ai.label_scoring import CONTENT_FREE, calibrate, label_probabilities  # noqa: E402
from inferframe.providers.interface import BaseTransport, Capabilities, Outcome, Usage  # noqa: E402
from inferframe.providers.label_scores import LlamaCppScorer  # noqa: E402
from inferframe.providers.spec import ProviderSpec  # noqa: E402
from inferframe.runtime.config import RuntimeConfig  # noqa: E402
from inferframe.series import Series  # noqa: E402


class BiasedServer(BaseTransport):
    """Answers label-scoring requests like llama.cpp: "positive" is 0.9 likely for a content-free input
    (the prompt's bias) and 0.7 for the text "meh", which is negative once that bias is taken out."""

    capabilities = Capabilities(logprobs="tokens")
    name = service = cache_identity = "biased"

    def __init__(self):
        self.prompts = []

    async def label_scorer(self, labels):
        return LlamaCppScorer(labels, ((1,), (2,)))

    async def send(self, request):
        prompt = request.body["prompt"]
        self.prompts.append(prompt)
        row = prompt.rsplit("Text: ", 1)[1].split("\n")[0]
        p_pos = 0.9 if row in CONTENT_FREE else 0.7
        token = request.body["logit_bias"][0][0]
        p = p_pos if token == 1 else 1 - p_pos
        return Outcome(value=[[token, math.log(p * 0.5)]], usage=Usage(10, 1), status=200)


def _classify(server, texts, content_free):
    config = ClassifyConfig("chat", ProviderSpec("lm_studio"), "m", "Classify.", (), RuntimeConfig(cache_policy="off"),
                            1, "classify_text[m]", return_format=LABELS, labels=tuple(LABELS), method="score",
                            prefix="Text: ", suffix="\nLabel:", content_free=content_free)

    async def run():
        op = ClassifyOperator(config, provider=server)
        try:
            return await op(Series(pa.array(texts)))
        finally:
            await op.aclose()

    return asyncio.run(run())


def test_calibration_changes_a_biased_decision():
    raw = _classify(BiasedServer(), ["meh"], ())
    assert raw.field("value").to_pylist() == ["positive"]
    assert raw.field("confidence").to_pylist()[0] == pytest.approx(0.7)
    server = BiasedServer()
    calibrated = _classify(server, ["meh", None], CONTENT_FREE)
    # 0.7 / 0.9 against 0.3 / 0.1: "negative" with 3 / (3 + 7/9).
    assert calibrated.field("value").to_pylist() == ["negative", None]
    assert calibrated.field("confidence").to_pylist()[0] == pytest.approx(3 / (3 + 7 / 9))
    assert calibrated.field("confidence").to_pylist()[1] is None
    # Content-free inputs are scored once per call, every label of them: 3 inputs x 2 labels, then the row.
    assert len(server.prompts) == 3 * 2 + 2


def test_scores_sum_to_one():
    rng = random.Random(7)
    for _ in range(200):
        k = rng.randint(2, 6)
        p = label_probabilities([rng.uniform(-40, 0) for _ in range(k)])
        prior = label_probabilities([rng.uniform(-10, 0) for _ in range(k)])
        assert sum(p) == pytest.approx(1.0) and sum(calibrate(p, prior)) == pytest.approx(1.0)
        assert all(0 <= x <= 1 for x in calibrate(p, prior))
    # Log-probabilities far below exp()'s range still give a distribution.
    assert label_probabilities([-2000.0, -2001.0]) == pytest.approx([1 / (1 + math.exp(-1)), 1 / (1 + math.e)])


def test_a_failed_label_request_fails_its_row_only():
    class Flaky(BiasedServer):
        async def send(self, request):
            if "boom" in request.body["prompt"]:
                return Outcome(status=400, error_kind="bad_request", message="HTTP 400: no")
            return await super().send(request)

    out = _classify(Flaky(), ["meh", "boom"], ())
    assert out.field("value").to_pylist() == ["positive", None]
    assert out.field("error").to_pylist()[1]["kind"] == "bad_request"
    assert out.field("confidence").to_pylist()[1] is None


# --- the real local llama.cpp server --------------------------------------------------------------

LOCAL_TIMEOUT = pytest.mark.timeout(1200)
REVIEWS = ["I loved this film, the acting is wonderful.", "Terrible and boring, a waste of two hours.",
           "Great soundtrack and a moving story.", "The worst movie I have seen this year."]


@LOCAL_TIMEOUT
def test_llama_cpp_scores_are_the_models_raw_probabilities():
    """The forced label's token probability is the one an unconstrained top-k query gives for that token."""
    from inferframe.providers.interface import Request
    from inferframe.providers.local import LocalProvider

    async def run():
        p = LocalProvider(ProviderSpec("local"))
        try:
            scorer = await p.label_scorer(("positive", "negative", "very positive"))
            requests = scorer.requests(None, "Classify the sentiment.", "Text: I loved it.\nLabel:")
            answers = [await p.send(r) for r in requests]
            top = await p.send(Request("completion", {**{k: v for k, v in requests[0].body.items()
                                                        if k not in ("grammar", "logit_bias")}, "n_probs": 50}))
            return scorer, answers, top
        finally:
            await p.aclose()

    scorer, answers, top = asyncio.run(run())
    assert all(a.ok for a in answers), [a.message for a in answers]
    logprobs = scorer.label_logprobs([a.value for a in answers])
    assert len(scorer.token_ids[2]) == 2  # " very positive": two tokens, both scored
    assert logprobs[0] != logprobs[1] and logprobs[2] < logprobs[0]
    assert top.ok
    # Without grammar or bias the first token is sampled freely: it is the most probable one, and the
    # forced label's first token has the probability the free query reports for it.
    free = {i: lp for i, lp in top.value}
    if scorer.token_ids[0][0] in free:
        assert logprobs[0] == pytest.approx(free[scorer.token_ids[0][0]], abs=1e-3)
    assert all(lp <= 0 for lp in logprobs)


@LOCAL_TIMEOUT
def test_label_scoring_on_the_local_server_labels_every_row(tmp_path):
    labels = ["very positive", "very negative", "mixed"]  # multi-token labels, scored in full
    df = ifr.from_pydict({"t": REVIEWS + [None]})
    out = df.with_column("label", classify_text(col("t"), labels, method="score", calibrate=True, usage_column=True,
                                                cache_dir=str(tmp_path))).to_pydict()
    assert out["label_error"] == [None] * 5
    assert all(x in labels for x in out["label"][:4]) and out["label"][4] is None
    conf = out["label_confidence"]
    # The chosen label's calibrated probability: the largest of three that sum to one.
    assert all(1 / 3 <= c <= 1 for c in conf[:4]) and conf[4] is None
    assert sum(u["input_tokens"] for u in out["label_usage"][:4]) > 0
    # A rerun reads every label score (and the calibration) from the cache: free, and the same.
    again = df.with_column("label", classify_text(col("t"), labels, method="score", calibrate=True, usage_column=True,
                                                  cache_dir=str(tmp_path))).to_pydict()
    assert again["label"] == out["label"] and again["label_confidence"] == out["label_confidence"]
    assert sum(u["input_tokens"] for u in again["label_usage"][:4]) == 0


@LOCAL_TIMEOUT
def test_auto_scores_on_the_local_server_and_examples_help():
    examples = [("A delight from start to finish.", "positive"), ("Dull, slow and badly acted.", "negative"),
                ("One of the best films of the decade.", "positive"), ("I walked out after an hour.", "negative")]
    df = ifr.from_pydict({"t": REVIEWS})
    out = df.with_column("label", classify_text(col("t"), LABELS, examples=examples, cache="off")).to_pydict()
    assert out["label"] == ["positive", "negative", "positive", "negative"]
    assert all(0.5 <= c <= 1 for c in out["label_confidence"])


@LOCAL_TIMEOUT
def test_generate_still_works():
    df = ifr.from_pydict({"t": REVIEWS})
    out = df.with_column("label", classify_text(col("t"), LABELS, method="generate", temperature=0,
                                                cache="off")).to_pydict()
    assert out["label_error"] == [None] * 4 and all(x in LABELS for x in out["label"])
    assert out["label_confidence"] == [None] * 4


def test_examples_come_after_the_instructions_and_before_the_row():
    from inferframe.functions.ai import demonstrations
    from inferframe.providers.label_scores import raw_prompt

    prefix, suffix = demonstrations([("Fun.", "positive"), ("Dull.", "negative")])
    a, b = (raw_prompt("Classify.", prefix + t + suffix) for t in ("first row", "second row"))
    shared = len(raw_prompt("Classify.", prefix))
    assert a[:shared] == b[:shared] and a.startswith("Classify.\n\nText: Fun.\nLabel: positive\n\n")
    assert a.endswith("Text: first row\nLabel:")


def test_first_token_scoring_on_an_openai_compatible_server():
    """OpenAI chat logprobs: the request asks for them; the simulator answers "logprobs": null, which is
    a clear per-row error rather than a guess (a real server that returns them is read by parse_chat_logprobs)."""
    from inferframe.simulator import Simulator, SimulatorConfig

    with Simulator(SimulatorConfig(record_requests=True)) as sim:
        df = ifr.from_pydict({"t": ["fine"]})
        out = df.with_column("label", classify_text(col("t"), LABELS, method="score", provider="openai",
                                                    base_url=sim.base_url, api_key="k", model="gpt-4o-mini",
                                                    cache="off")).to_pydict()
    assert out["label"] == [None] and out["label_error"][0]["kind"] == "malformed"
    assert "no log-probabilities" in out["label_error"][0]["message"]


def test_auto_generates_where_only_first_token_scores_exist():
    from inferframe.plan.ai_nodes import ai_call_of

    expr = classify_text(col("t"), LABELS, provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k",
                         model="gpt-4o-mini")
    assert ai_call_of(expr._node).udf.owner.args[0].method == "generate"


def test_examples_are_balanced_and_capped_per_label():
    from inferframe.plan.ai_nodes import ai_call_of

    pairs = [(f"good {i}", "positive") for i in range(30)] + [(f"bad {i}", "negative") for i in range(25)]
    expr = classify_text(col("t"), LABELS, examples=pairs, examples_per_label=3, model="gemma-3-270m")
    prefix = ai_call_of(expr._node).udf.owner.args[0].prefix
    assert prefix.count("Label: positive\n") == 3 and prefix.count("Label: negative\n") == 3
    with pytest.raises(PlanError, match="examples_per_label"):
        classify_text(col("t"), LABELS, examples=pairs, examples_per_label=0, model="gemma-3-270m")
