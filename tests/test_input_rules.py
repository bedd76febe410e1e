"""One input rule for every AI function (issue 27, item 4).

None in gives null out with no error and no request; an empty text ('') gives an error of kind
"input" and no request; an input that failed upstream (a column ``x`` whose ``x_error`` is set, or
an AI call nested inside this one) gives an error of kind "input" quoting the upstream error.
Before, a missing image left both the answer and its ``a_error`` null (the row looked like a
success), and '' was sent to the model.
"""

import pathlib

import pytest
from PIL import Image

import inferframe as ifr
from inferframe import RowFailed, col, lit
from inferframe.functions import classify_text, decode_image, download, embed_text, prompt
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-input-rules"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY)) as s:
        yield s


def ask(sim, parts, **kw):
    return prompt(parts, provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini", **kw)


@pytest.fixture
def images(tmp_path):
    """Two readable images and one missing file, in this order."""
    paths = []
    for name, colour in (("a.png", "red"), ("b.png", "blue")):
        Image.new("RGB", (8, 8), colour).save(tmp_path / name)
        paths.append(str(tmp_path / name))
    paths.append(str(tmp_path / "missing.png"))
    return ifr.from_pydict({"path": paths})


def test_a_prompt_over_a_failed_image_column_is_an_input_error(sim, images):
    df = images.with_column("img", decode_image(download(col("path"))))
    out = df.with_column("a", ask(sim, [lit("Describe:"), col("img")])).to_pydict()
    assert out["img_error"][2]["kind"] == "download"
    assert out["a"][:2] != [None, None] and out["a_error"][:2] == [None, None]
    err = out["a_error"][2]
    assert out["a"][2] is None and err["kind"] == "input" and err["attempts"] == 0
    assert err["message"].startswith("the input 'img' failed (download): ") and "missing.png" in err["message"]
    assert sim.stats()["total_requests"] == 2  # nothing sent for the failed row


def test_the_failed_row_is_found_by_its_error_column(sim, images):
    df = images.with_column("img", decode_image(download(col("path"))))
    failed = df.with_column("a", ask(sim, [lit("Describe:"), col("img")])).where(col("a_error").not_null())
    assert [pathlib.Path(p).name for p in failed.to_pydict()["path"]] == ["missing.png"]


def test_a_nested_failed_call_is_an_input_error_of_the_outer_call(sim, images):
    out = images.with_column("a", ask(sim, [lit("Describe:"), decode_image(download(col("path")))])).to_pydict()
    assert out["a_error"][:2] == [None, None]
    err = out["a_error"][2]
    # The step that failed is named: download, inside decode_image, inside the prompt.
    assert err["kind"] == "input" and err["message"].startswith("the input 'download' failed (download): ")


def test_on_error_raise_stops_at_a_failed_input(sim, images):
    df = images.with_column("img", decode_image(download(col("path"))))
    with pytest.raises(RowFailed) as e:
        df.with_column("a", ask(sim, [lit("Describe:"), col("img")], on_error="raise")).to_pydict()
    assert e.value.kind == "input" and "the input 'img' failed (download)" in str(e.value)


def test_a_null_input_stays_null_without_an_error(sim):
    df = ifr.from_pydict({"q": ["hi", None]}).with_column("q_error", lit(None).cast(ifr.DataType.string()))
    out = df.with_column("a", ask(sim, col("q"))).to_pydict()
    assert out["a"][1] is None and out["a_error"] == [None, None]
    assert sim.stats()["total_requests"] == 1


@pytest.mark.parametrize("parts", [col("q"), [lit("Question: "), col("q")]])
def test_an_empty_text_is_an_input_error_and_is_not_sent(sim, parts):
    df = ifr.from_pydict({"q": ["hello", "", None, "bye"]})
    out = df.with_column("a", ask(sim, parts)).to_pydict()
    errors = out["a_error"]
    assert errors[0] is None and errors[2] is None and errors[3] is None
    assert errors[1]["kind"] == "input" and "empty text" in errors[1]["message"] and errors[1]["attempts"] == 0
    assert out["a"][1] is None and out["a"][2] is None and out["a"][0] and out["a"][3]
    assert sim.stats()["total_requests"] == 2


def test_an_empty_text_is_an_input_error_with_a_return_format_and_on_a_rerun(sim):
    df = ifr.from_pydict({"q": ["", "x"]})
    for _ in range(2):  # the second run answers "x" from the cache: '' is still an error, never a hit
        out = df.with_column("a", ask(sim, col("q"), return_format=["yes", "no"])).to_pydict()
        assert out["a_error"][0]["kind"] == "input" and out["a_error"][1] is None
    assert sim.stats()["total_requests"] == 1


def test_an_empty_text_raises_with_on_error_raise(sim):
    with pytest.raises(RowFailed, match=r"A row failed \(input\): the input is an empty text"):
        ifr.from_pydict({"q": ["x", ""]}).with_column("a", ask(sim, col("q"), on_error="raise")).to_pydict()


def test_classify_and_embed_follow_the_same_rule(sim):
    df = ifr.from_pydict({"q": ["good", "", None]})
    kw = dict(provider="openai", base_url=sim.base_url, api_key=KEY)
    label = df.with_column("l", classify_text(col("q"), ["good", "bad"], model="gpt-5-mini", method="generate", **kw))
    out = label.to_pydict()
    assert out["l_error"][1]["kind"] == "input" and out["l_error"][0] is None and out["l_error"][2] is None
    vec = df.with_column("v", embed_text(col("q"), model="text-embedding-3-small", **kw)).to_pydict()
    assert vec["v_error"][1]["kind"] == "input" and vec["v_error"][0] is None and vec["v_error"][2] is None
    local = df.with_column("v", embed_text(col("q"))).to_pydict()  # in process
    assert local["v_error"][1]["kind"] == "input" and local["v_error"][2] is None


@pytest.mark.timeout(1200)
def test_the_embedded_model_is_not_asked_about_an_empty_text():
    from inferframe.observe import last_run

    df = ifr.from_pydict({"q": ["", "The sky is"]})
    out = df.with_column("a", prompt(col("q"), max_tokens=3, temperature=0)).to_pydict()
    assert out["a_error"][0]["kind"] == "input" and out["a"][0] is None
    assert out["a_error"][1] is None and out["a"][1] is not None
    assert last_run()[0]["requests"] == 1
