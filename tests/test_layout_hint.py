"""The prompt-layout hint: a one-time note when the row's value comes before a long constant part."""

import dataclasses
import warnings

import pytest

import inferframe as ifr
from inferframe import col, lit
from inferframe.expressions.nodes import UDFCall
from inferframe.functions import classify_text, format, prompt
from inferframe.functions import layout_hint as lh
from inferframe.functions.layout_hint import MIN_TAIL_CHARS, PromptLayoutHint, layout_hint
from inferframe.simulator import Simulator, SimulatorConfig

MODEL = "gemma-3-270m"
# 1,182 characters of fixed instructions: long enough to matter, as in a few-shot classification prompt.
INSTRUCTIONS = "Classify the sentiment of the review as positive or negative; answer with one word. " * 14 + "Label:"


@pytest.fixture(autouse=True)
def _fresh_layouts(monkeypatch):
    """Each test starts with no layout seen, so one test's note does not hide another's."""
    monkeypatch.setattr(lh, "_SEEN", set())


def hints(build):
    """The PromptLayoutHint warnings raised while ``build()`` runs (every one shown, none filtered)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build()
    return [w for w in caught if issubclass(w.category, PromptLayoutHint)]


def test_fires_for_a_placeholder_before_a_long_constant_tail():
    found = hints(lambda: prompt(format("Review: {}\n\n" + INSTRUCTIONS, col("review")), model=MODEL))
    assert len(found) == 1
    assert f"{len(INSTRUCTIONS) + 2:,} characters of constant text follow the row's value col(\"review\")" in str(found[0].message)


def test_fires_for_a_column_part_before_a_long_literal_part():
    found = hints(lambda: prompt([col("text"), lit(INSTRUCTIONS)], model=MODEL))
    assert len(found) == 1
    assert 'prompt([lit("<your instructions>"), col("text")], ...)' in str(found[0].message)


@pytest.mark.parametrize("build", [
    pytest.param(lambda: prompt(format(INSTRUCTIONS + "\n\nReview: {}", col("review")), model=MODEL), id="constant-first format"),
    pytest.param(lambda: prompt([lit(INSTRUCTIONS), col("review")], model=MODEL), id="constant-first parts"),
    pytest.param(lambda: prompt(col("review"), system_message=INSTRUCTIONS, model=MODEL), id="long system message"),
    pytest.param(lambda: prompt(format("Review: {}\nAnswer with one word.", col("review")), model=MODEL), id="short tail"),
    # The system message comes first in every request: its text counts as in front of the value.
    pytest.param(lambda: prompt(format("{}\n\n" + INSTRUCTIONS[:400], col("review")), system_message=INSTRUCTIONS,
                                model=MODEL), id="long system message, shorter tail"),
    pytest.param(lambda: prompt(col("review"), model=MODEL), id="a column alone"),
    pytest.param(lambda: prompt(lit(INSTRUCTIONS), model=MODEL), id="no per-row value"),
])
def test_quiet_for_static_first_and_short_prompts(build):
    assert hints(build) == []


def test_threshold_is_on_the_constant_text_after_the_value():
    def tail(n):
        return layout_hint([col("q")._node, lit("x" * n)._node])

    assert tail(MIN_TAIL_CHARS - 1) is None
    assert tail(MIN_TAIL_CHARS) is not None
    # More after the value than in front of it, counting the system message and the text before the value.
    assert layout_hint([col("q")._node, lit("x" * 600)._node], "s" * 599) is not None
    assert layout_hint([col("q")._node, lit("x" * 600)._node], "s" * 600) is None
    assert layout_hint([format("p" * 300 + "{}" + "x" * 400, col("q"))._node]) is not None


def test_fires_once_per_layout():
    def build():
        for _ in range(3):
            prompt(format("{}\n\n" + INSTRUCTIONS, col("review")), model=MODEL)
            prompt(format("{}\n\n" + INSTRUCTIONS, col("review")), model=MODEL, temperature=0)
        prompt(format("{}\n\n" + INSTRUCTIONS, col("title")), model=MODEL)  # another layout: its own note

    found = hints(build)
    assert [str(w.message).split(". ")[0].rsplit(" ", 1)[-1] for w in found] == ['col("review")', 'col("title")']


def test_message_names_the_problem_and_the_fix():
    (w,) = hints(lambda: prompt(format("{}\n\n" + INSTRUCTIONS, col("review")), model=MODEL))
    text = str(w.message)
    assert f"{len(INSTRUCTIONS) + 2:,} characters of constant text follow" in text
    assert "prompt caches (vLLM, llama.cpp, OpenAI) reuse only a prefix" in text
    assert "share no prefix" in text
    assert 'format("<your instructions>...{}", col("review"))' in text
    assert 'system_message="<your instructions>"' in text
    assert 'warnings.filterwarnings("ignore", category=inferframe.PromptLayoutHint)' in text


def test_the_note_points_at_the_users_line_and_can_be_silenced():
    (w,) = hints(lambda: classify_text([col("review"), lit(INSTRUCTIONS)], ["positive", "negative"], model=MODEL))
    assert w.filename == __file__
    assert ifr.PromptLayoutHint is PromptLayoutHint and issubclass(PromptLayoutHint, UserWarning)
    lh._SEEN.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=ifr.PromptLayoutHint)
        prompt([col("review"), lit(INSTRUCTIONS)], model=MODEL)
    assert caught == []


@pytest.mark.parametrize("user", [
    pytest.param(format("{}\n\n" + INSTRUCTIONS, col("review")), id="format"),
    pytest.param([col("review"), lit("\n\n" + INSTRUCTIONS)], id="parts"),
])
def test_the_prompt_is_sent_as_written(user):
    """The hint changes nothing: the expression is the user's, and the server gets the value first."""
    bodies = []
    nodes = tuple(e._node for e in (user if isinstance(user, list) else [user]))
    with Simulator(SimulatorConfig(responder=lambda body: bodies.append(body))) as sim:
        def build():
            return prompt(user, system_message="Be brief.", provider="openai", base_url=sim.base_url,
                          api_key="sk-test", model="gpt-5-mini")

        built = []
        assert len(hints(lambda: built.append(build()))) == 1
        assert hints(lambda: built.append(build())) == []  # the layout is seen now: no note this time
        with_hint, without_hint = built
        calls = [next(n for n in e._node.walk() if isinstance(n, UDFCall)) for e in (with_hint, without_hint)]
        assert [c.args for c in calls] == [nodes] * 2
        # The same call config, system message included (the API key's handle is fresh per call).
        configs = [repr(dataclasses.replace(c.udf.owner.args[0], provider=None)) for c in calls]
        assert configs[0] == configs[1] and "system_message='Be brief.'" in configs[0]
        out = ifr.from_pydict({"review": ["Great phone."]}).with_column("label", with_hint).to_pydict()
    assert out["label_error"] == [None]
    (body,) = bodies
    assert body["input"] == "Great phone.\n\n" + INSTRUCTIONS
    assert body["instructions"] == "Be brief."
