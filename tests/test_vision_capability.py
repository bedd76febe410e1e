"""Images and models without vision (issue 27, item 3).

The plan knows what the provider and model read: images for the embedded Gemma 3 270M (text only)
are a PlanError before any request. A server that answers "image input is not supported" (a
llama.cpp server without an image projector, reached as an OpenAI-compatible URL whose model the
plan cannot know) is not retried: the rows fail as kind "unsupported" and the job stops after a
few rows with one ServiceError in inferframe's words. Before, 12 image rows made 72 requests (60
retries), each ending with the server's "provide the mmproj".
"""

import io
import pathlib

import pytest
from PIL import Image

import inferframe as ifr
from inferframe import PlanError, ServiceError, col, lit
from inferframe.errors import ErrorKind
from inferframe.functions import classify_text, decode_image, download, image, prompt
from inferframe.observe import last_run
from inferframe.providers.openai_format import parse_answer, unsupported_input
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-vision"
LOCAL_TIMEOUT = pytest.mark.timeout(1200)


@pytest.fixture
def pictures(tmp_path):
    for i in range(12):
        Image.new("RGB", (16, 16), (20 * i, 0, 0)).save(pathlib.Path(tmp_path, f"p{i:02}.png"))
    df = ifr.from_glob_path(str(tmp_path / "*.png")).sort("path")
    return df.with_column("img", decode_image(download(col("path"))))


def test_images_to_the_embedded_model_are_a_plan_error(pictures):
    with pytest.raises(PlanError) as e:
        pictures.with_column("a", prompt([lit("Describe:"), col("img")], model="gemma-3-270m")).schema()
    msg = str(e.value)
    assert "prompt(): the model 'gemma-3-270m' of provider 'local' reads text only" in msg
    assert "'img' is an image column" in msg and "no request was sent" in msg and "mmproj" not in msg


def test_classify_text_refuses_images_for_the_embedded_model(pictures):
    with pytest.raises(PlanError, match="classify_text\\(\\): the model 'gemma-3-270m' of provider 'local' reads text only"):
        pictures.with_column("a", classify_text([lit("Photo:"), col("img")], ["red", "blue"], method="generate")).schema()


def test_binary_and_url_images_count_as_images():
    df = ifr.from_pydict({"u": ["https://example.com/cat.png"], "b": [b"\x89PNG"]})
    for part in (image(col("u")), col("b")):
        with pytest.raises(PlanError, match="reads text only"):
            df.with_column("a", prompt([lit("Describe:"), part], model="gemma-3-270m")).schema()


def test_text_to_the_embedded_model_still_plans():
    df = ifr.from_pydict({"q": ["hi"], "n": [3]})
    assert df.with_column("a", prompt(col("q"), model="gemma-3-270m")).schema()["a"] == ifr.DataType.string()
    df.with_column("a", prompt([col("q"), col("n").cast(ifr.DataType.string())], model="gemma-3-270m")).schema()
    with pytest.raises(PlanError, match=r"input 'n' must be text, got int64"):  # issue 41 item 7: no silent cast
        df.with_column("a", prompt([col("q"), col("n")], model="gemma-3-270m")).schema()


def test_openai_models_known_without_vision_are_refused_and_vision_models_answer(pictures):
    with Simulator(SimulatorConfig(require_api_key=KEY, allow_unknown_models=True)) as sim:
        kw = dict(provider="openai", base_url=sim.base_url, api_key=KEY)
        with pytest.raises(PlanError, match="the model 'gpt-3.5-turbo' of provider 'openai' reads text only"):
            pictures.with_column("a", prompt([lit("Describe:"), col("img")], model="gpt-3.5-turbo", **kw)).schema()
        assert sim.stats()["total_requests"] == 0
        out = pictures.limit(2).with_column("a", prompt([lit("Describe:"), col("img")], model="gpt-5-mini", **kw)).to_pydict()
        assert out["a_error"] == [None, None] and all(out["a"])
        # A model the plan does not know is left to the server.
        pictures.with_column("a", prompt([lit("Describe:"), col("img")], model="my-finetune", **kw)).schema()


@pytest.mark.parametrize("status,message", [
    (500, "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"),  # llama.cpp
    (400, "Invalid content type. image_url is only supported by certain models."),  # OpenAI, text-only model
    (400, "Model does not support images. Please use a model that does."),  # LM Studio
    (400, "Qwen2ForCausalLM is not a multimodal model"),  # vLLM
])
def test_servers_saying_the_model_cannot_read_the_input_are_unsupported(status, message):
    out = parse_answer("chat", status, {"error": {"message": message, "type": "server_error"}}, {})
    assert out.error_kind == ErrorKind.UNSUPPORTED and not out.error_kind.retryable
    assert out.message.startswith("The model does not accept this input (images, audio or files): send text only")
    assert message in out.raw


@pytest.mark.parametrize("message", [
    "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    "This is not a chat model and thus not supported in the v1/chat/completions endpoint.",
    "Invalid image: cannot identify image file", "out of memory",
])
def test_other_errors_keep_their_kind(message):
    assert unsupported_input(400, f"HTTP 400: {message}") is None


@LOCAL_TIMEOUT
def test_a_server_without_vision_stops_the_job_without_retries(pictures):
    from inferframe.providers.local_server import get_local_server

    server = get_local_server()
    # The embedded llama.cpp server reached as a plain llama.cpp URL: the plan cannot know its model.
    expr = prompt([lit("Describe:"), col("img")], provider="llama_cpp", base_url=server.base_url,
                  model="gemma-3-270m", max_tokens=4, max_concurrency=1)
    with pytest.raises(ServiceError) as e:
        pictures.with_column("a", expr).to_pydict()
    msg = str(e.value)
    assert "The model refused 3 rows: The model does not accept this input (images, audio or files)" in msg
    assert "send text only, or use a model that reads them" in msg
    run = last_run()[0]
    assert run["retries"] == 0 and run["requests"] <= 4, run


@LOCAL_TIMEOUT
def test_unsupported_rows_are_data_until_the_breaker_trips(pictures):
    from inferframe.providers.local_server import get_local_server

    server = get_local_server()
    expr = prompt([lit("Describe:"), col("img")], provider="llama_cpp", base_url=server.base_url,
                  model="gemma-3-270m", max_tokens=4, max_concurrency=1)
    out = pictures.limit(2).with_column("a", expr).to_pydict()
    kinds = [e["kind"] for e in out["a_error"]]
    assert kinds == ["unsupported", "unsupported"] and out["a"] == [None, None]
    assert [e["attempts"] for e in out["a_error"]] == [1, 1]
    assert "mmproj" in out["a_error"][0]["raw"]  # the server's own words are kept, not shown first
