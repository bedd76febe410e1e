"""Every numeric option of every AI function is checked when the expression is built (issue 27, item 5).

A value out of range is a PlanError naming the option, the value and what is accepted; nothing is
sent. Before, ``prompt(max_tokens=-5)`` was accepted and every row failed with the server's HTTP 400.
"""

import pytest

import inferframe as ifr
from inferframe import PlanError, col
from inferframe.functions import classify_text, decode_image, download, embed_text, prompt, resize_image
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-ranges"


@pytest.fixture(scope="module")
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY)) as s:
        yield s


def _sim_prompt(sim, **options):
    return prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini", **options)


BAD_PROMPT_OPTIONS = [
    ("max_tokens", 0), ("max_tokens", -5), ("max_tokens", 2.5), ("max_output_tokens", 0),
    ("max_completion_tokens", -1), ("temperature", -3), ("temperature", 2.5), ("temperature", "hot"),
    ("temperature", float("nan")), ("top_p", 0), ("top_p", 1.5), ("top_k", -1), ("min_p", 1.5),
    ("presence_penalty", 3), ("frequency_penalty", -2.5), ("repeat_penalty", -1), ("seed", 1.5), ("n", 2),
    ("top_logprobs", 25), ("logprobs", "yes"),
]


@pytest.mark.parametrize("name,value", BAD_PROMPT_OPTIONS)
def test_prompt_option_out_of_range_is_a_plan_error(name, value):
    with pytest.raises(PlanError) as e:
        prompt(col("q"), model="gemma-3-270m", **{name: value})
    assert f"{name}={value!r} is not accepted" in str(e.value) and f"{name} must be" in str(e.value)


def test_messages_say_what_is_accepted():
    with pytest.raises(PlanError, match=r"max_tokens=0 is not accepted; max_tokens must be a whole number >= 1"):
        prompt(col("q"), model="gemma-3-270m", max_tokens=0)
    with pytest.raises(PlanError, match=r"temperature=-3 is not accepted; temperature must be a number from 0 to 2"):
        prompt(col("q"), model="gemma-3-270m", temperature=-3)
    with pytest.raises(PlanError, match=r"top_p must be a number > 0 and <= 1"):
        prompt(col("q"), model="gemma-3-270m", top_p=0)


@pytest.mark.parametrize("options", [
    {"max_tokens": 1}, {"max_output_tokens": 2000}, {"temperature": 0}, {"temperature": 2}, {"temperature": 0.7},
    {"top_p": 1}, {"top_k": 0}, {"seed": -1}, {"seed": 42}, {"n": 1}, {"presence_penalty": -2}, {"logprobs": True},
    {"top_logprobs": 5}, {"stop": ["\n"]}, {"extra_body": {"max_tokens": 3}},
])
def test_values_in_range_are_accepted(options):
    prompt(col("q"), model="gemma-3-270m", **options)


def test_a_bad_value_sends_nothing(sim):
    before = sim.stats()["total_requests"]
    df = ifr.from_pydict({"q": ["a", "b", "c"]})
    with pytest.raises(PlanError):
        df.with_column("a", _sim_prompt(sim, max_tokens=-5)).to_pydict()
    assert sim.stats()["total_requests"] == before
    # The same call in range answers every row.
    out = df.with_column("a", _sim_prompt(sim, max_tokens=50)).to_pydict()
    assert out["a_error"] == [None] * 3


def test_classify_text_checks_the_request_options_too():
    with pytest.raises(PlanError, match="max_tokens=0 is not accepted"):
        classify_text(col("q"), ["a", "b"], model="gemma-3-270m", method="generate", max_tokens=0)
    with pytest.raises(PlanError, match="temperature=-1 is not accepted"):
        classify_text(col("q"), ["a", "b"], model="gemma-3-270m", method="generate", temperature=-1)


@pytest.mark.parametrize("build,match", [
    (lambda: download(col("p"), timeout=0), "timeout=0 is not accepted"),
    (lambda: download(col("p"), timeout=-1.5), "timeout=-1.5 is not accepted"),
    (lambda: download(col("p"), max_concurrency=0), "max_concurrency=0 is not accepted"),
    (lambda: decode_image(col("b"), max_size=0), "max_size=0 is not accepted"),
    (lambda: decode_image(col("b"), max_size=1.5), "max_size=1.5 is not accepted"),
    (lambda: resize_image(col("b"), max_size=-3), "max_size=-3 is not accepted"),
    (lambda: resize_image(col("b"), max_size="big"), "max_size='big' is not accepted"),
])
def test_media_functions_check_their_numbers(build, match):
    with pytest.raises(PlanError, match=match):
        build()


@pytest.mark.parametrize("options,match", [
    ({"batch_size": 0}, "batch_size=0 is not accepted"),
    ({"encode_batch_size": -1}, "encode_batch_size=-1 is not accepted"),
    ({"max_concurrency": 0}, "max_concurrency=0 is not accepted"),
    ({"gpus": -1}, "gpus=-1 is not accepted"),
    ({"dimensions": 0}, "dimensions=0 is not accepted"),
])
def test_in_process_embeddings_check_their_numbers(options, match):
    with pytest.raises(PlanError, match=match):
        embed_text(col("doc"), **options)


def test_embedding_api_checks_its_numbers(sim):
    kw = dict(provider="openai", base_url=sim.base_url, api_key=KEY, model="text-embedding-3-small")
    with pytest.raises(PlanError, match="dimensions=0 is not accepted"):
        embed_text(col("doc"), dimensions=0, **kw)
    with pytest.raises(PlanError, match="max_batch_inputs=0 is not accepted"):
        embed_text(col("doc"), max_batch_inputs=0, **kw)


@pytest.mark.parametrize("options,match", [
    ({"temperature": -1}, "temperature=-1 is not accepted"),
    ({"temperature": 0}, "temperature=0 is not accepted"),
    ({"C": 0}, "C=0 is not accepted"),
])
def test_embedding_classifier_checks_its_numbers(options, match):
    with pytest.raises(PlanError, match=match):
        classify_text(col("q"), ["a", "b"], method="embedding", label_descriptions=["x", "y"], **options)
