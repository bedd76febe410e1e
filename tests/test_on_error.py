"""on_error means the same for every AI function and every failure kind.

With ``on_error="raise"`` the first failed row, whatever failed (an HTTP error, a malformed body,
a vector of the wrong size, an answer off the schema, a bad input), stops the job with a
``RowFailed`` that names the row's error kind and message; with ``"null"`` (the default) that row
gets a null value and its error in ``<name>_error`` and the other rows are untouched.

API calls go to the project's simulator: a fail rule (or a responder) makes the row holding
"BAD" fail the same way every time. In-process calls use the packaged MiniLM and a tiny CLIP
model saved to disk with random weights (no image model ships with inferframe).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import RowFailed
from inferframe.functions import classify_text, embed_image, embed_text, prompt
from inferframe.simulator import Simulator, SimulatorConfig
from inferframe.simulator import embeddings as sim_embeddings

IMAGES = sorted((Path(__file__).parent.parent / "examples" / "data" / "mcq").glob("*.png"))
BAD = 2  # the row that fails in every case
TEXTS = ["row 0 about cats", "row 1 about dogs", "row 2 BAD", "row 3 about rain"]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


@pytest.fixture(scope="module")
def sim():
    with Simulator(SimulatorConfig()) as s:
        yield s


@pytest.fixture
def server(sim):
    """The module's simulator with no faults before and after the test."""
    sim.configure(fail_rules=[], responder=None)
    sim.reset()
    yield sim
    sim.configure(fail_rules=[], responder=None)


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    from inferframe.models.loading import packaged_minilm

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config={"vocab_size": 30522, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                     "num_attention_heads": 2, "max_position_embeddings": 64, "eos_token_id": 102},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 32, "patch_size": 8},
        projection_dim=24,
    )
    path = tmp_path_factory.mktemp("tiny-clip")
    CLIPModel(config).save_pretrained(path)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(packaged_minilm() / name, path / name)
    return path


def _bad_answer(body: dict):
    """The simulator's responder: an answer that breaks the return format for the BAD row only."""
    return "maybe, or not at all" if "BAD" in json.dumps(body) else None


# -- the calls: each builds its expression against the simulator / the local models --------------

def _api(sim) -> dict:
    return {"provider": "openai", "base_url": sim.base_url, "api_key": "k", "cache": "off", "max_retries": 0}


def _prompt(ctx, **kw):
    return prompt([col(c) for c in ctx.columns], model="gpt-5-mini", **_api(ctx.sim), **kw)


def _prompt_schema(ctx, **kw):
    return _prompt(ctx, return_format=SCHEMA, **kw)


def _classify(ctx, **kw):
    return classify_text([col(c) for c in ctx.columns], ["yes", "no"], model="gpt-5-mini", **_api(ctx.sim), **kw)


def _embed_api(ctx, **kw):
    return embed_text(col("t"), **_api(ctx.sim), **kw)


def _embed_local(ctx, **kw):
    return embed_text(col("t"), **kw)


def _embed_image(ctx, **kw):
    return embed_image(col("t"), model=str(ctx.clip_dir), **kw)


# -- the failures: each sets up the server (or the data) so that row BAD fails --------------------

def _fail(**rule) -> Callable:
    def setup(ctx):
        ctx.sim.configure(fail_rules=[{"match": "BAD", **rule}])
    return setup


def _responder(ctx):
    ctx.sim.configure(responder=_bad_answer)


def _wrong_size(ctx):
    real = sim_embeddings.embed
    ctx.monkeypatch.setattr(sim_embeddings, "embed", lambda text, dims: real(text, 12 if "BAD" in text else dims))


def _empty_text(ctx):
    ctx.data["t"][BAD] = ""


def _bad_image_bytes(ctx):
    # The row's "image" is text: it cannot be decoded, so its request cannot be built.
    ctx.data["img"] = [IMAGES[0].read_bytes()] * len(TEXTS)
    ctx.data["img"][BAD] = b"BAD: not an image"
    ctx.columns = ("t", "img")


def _bad_image_file(ctx):
    bad = ctx.tmp_path / "BAD.png"
    bad.write_text("not an image")
    ctx.data["t"] = [str(p) for p in IMAGES[:len(TEXTS)]]
    ctx.data["t"][BAD] = str(bad)


def _missing_image_file(ctx):
    ctx.data["t"] = [str(p) for p in IMAGES[:len(TEXTS)]]
    ctx.data["t"][BAD] = str(ctx.tmp_path / "no-such-BAD.png")


@dataclasses.dataclass
class Case:
    call: Callable
    setup: Callable
    kind: str  # the row's error kind
    says: str  # a piece of the row's error message
    options: dict = dataclasses.field(default_factory=dict)
    sends: bool = True  # whether the failure is known only after a request


# One packed embedding request holds every row: a fault that fails the whole request is given
# one row per request, so the other rows stay unaffected.
ALONE = {"max_batch_inputs": 1}

CASES = {
    "prompt-http4xx": Case(_prompt, _fail(status=400, message="BAD row refused"), "bad_request", "BAD row refused"),
    "prompt-http5xx": Case(_prompt, _fail(status=502), "server", "502"),
    "prompt-malformed": Case(_prompt, _fail(kind="malformed"), "malformed", ""),
    "prompt-refusal": Case(_prompt, _fail(kind="refusal"), "refusal", ""),
    "prompt-schema": Case(_prompt_schema, _responder, "schema", "does not match the return format"),
    "prompt-input": Case(_prompt, _bad_image_bytes, "input", "MediaError", sends=False),
    "classify-http4xx": Case(_classify, _fail(status=400, message="BAD row refused"), "bad_request", "BAD row refused"),
    "classify-http5xx": Case(_classify, _fail(status=503), "server", "503"),
    "classify-malformed": Case(_classify, _fail(kind="malformed"), "malformed", ""),
    "classify-schema": Case(_classify, _responder, "schema", "does not match the return format"),
    "classify-input": Case(_classify, _bad_image_bytes, "input", "MediaError", sends=False),
    "embed_api-http4xx": Case(_embed_api, _fail(status=400, message="BAD row refused"), "bad_request", "BAD row refused"),
    "embed_api-http5xx": Case(_embed_api, _fail(status=502), "server", "502", ALONE),
    "embed_api-malformed": Case(_embed_api, _fail(kind="malformed"), "malformed", "", ALONE),
    "embed_api-wrong_size": Case(_embed_api, _wrong_size, "malformed", "12 dimensions, not 1536"),
    "embed_api-input": Case(_embed_api, _empty_text, "input", "empty text", sends=False),
    "embed_api_batch-wrong_size": Case(_embed_api, _wrong_size, "malformed", "12 dimensions, not 1536",
                                       {"batch": True, "batch_poll_interval": 0.02}),
    "embed_local-input": Case(_embed_local, _empty_text, "input", "empty text", sends=False),
    "embed_image-undecodable": Case(_embed_image, _bad_image_file, "image", "Could not decode image"),
    "embed_image-missing": Case(_embed_image, _missing_image_file, "image", "no-such-BAD.png"),
}


@dataclasses.dataclass
class Context:
    sim: Simulator
    monkeypatch: pytest.MonkeyPatch
    tmp_path: Path
    clip_dir: Path | None
    data: dict
    columns: tuple = ("t",)


def _frame(case: Case, request, server, monkeypatch, tmp_path, on_error: str):
    clip = request.getfixturevalue("clip_dir") if case.call is _embed_image else None
    ctx = Context(server, monkeypatch, tmp_path, clip, {"t": list(TEXTS)})
    case.setup(ctx)
    expr = case.call(ctx, on_error=on_error, **case.options)
    return ifr.from_pydict(ctx.data).with_column("out", expr)


def _api_requests(sim) -> int:
    return sum(sim.stats()["by_endpoint"].values())


@pytest.mark.parametrize("name", list(CASES))
def test_raise_stops_the_job_with_the_rows_error(name, request, server, monkeypatch, tmp_path):
    case = CASES[name]
    df = _frame(case, request, server, monkeypatch, tmp_path, "raise")
    with pytest.raises(RowFailed) as info:
        df.to_pydict()
    e = info.value
    assert str(e).startswith(f"A row failed ({case.kind}"), str(e)
    assert case.says in str(e)
    assert e.kind == case.kind and e.error["kind"] == case.kind and case.says in e.error["message"]
    if not case.sends:  # known before sending: the job stops before any request
        assert _api_requests(server) == 0


@pytest.mark.parametrize("name", list(CASES))
def test_null_keeps_the_failed_row_as_data(name, request, server, monkeypatch, tmp_path):
    case = CASES[name]
    out = _frame(case, request, server, monkeypatch, tmp_path, "null").to_pydict()
    assert out["out"][BAD] is None
    error = out["out_error"][BAD]
    assert error["kind"] == case.kind and case.says in error["message"]
    others = [i for i in range(len(TEXTS)) if i != BAD]
    assert all(out["out"][i] is not None for i in others), out["out"]
    assert all(out["out_error"][i] is None for i in others), out["out_error"]


def test_the_error_survives_a_worker_process():
    import pickle

    e = RowFailed.of({"kind": "malformed", "message": "the embedding has 12 dimensions, not 1536", "status": 200,
                      "attempts": 1, "raw": None})
    again = pickle.loads(pickle.dumps(e))
    assert str(again) == str(e) == "A row failed (malformed, status 200, 1 attempt): the embedding has 12 dimensions, not 1536"
    assert again.kind == "malformed" and again.error == e.error


def test_a_wrong_size_vector_raises_as_a_502_does(server, monkeypatch):
    """The report behind this file: a vector of the wrong size came back as data under on_error="raise"."""
    _wrong_size(Context(server, monkeypatch, Path(), None, {}))
    df = ifr.from_pydict({"t": TEXTS}).with_column("e", embed_text(col("t"), **_api(server), on_error="raise"))
    with pytest.raises(RowFailed, match=r"^A row failed \(malformed, status 200, 1 attempt\): "
                                        r"the embedding has 12 dimensions, not 1536$"):
        df.to_pydict()
    server.configure(fail_rules=[{"match": "BAD", "status": 502}])
    with pytest.raises(RowFailed, match=r"^A row failed \(server, status 502, 1 attempt\): HTTP 502"):
        df.to_pydict()


def test_an_in_process_model_in_a_worker_process_raises_the_same_error():
    texts = list(TEXTS)
    texts[BAD] = ""
    df = ifr.from_pydict({"t": texts}).with_column("v", embed_text(col("t"), use_process=True, on_error="raise"))
    with pytest.raises(RowFailed, match=r"^A row failed \(input\): an empty text has no embedding$") as info:
        df.to_pydict()
    assert info.value.kind == "input"


def test_on_error_is_checked_when_the_call_is_built(clip_dir):
    with pytest.raises(ifr.PlanError, match="on_error='stop' is not accepted; on_error must be one of 'null', 'raise'"):
        embed_text(col("t"), on_error="stop")
    with pytest.raises(ifr.PlanError, match="on_error='stop' is not accepted"):
        embed_image(col("p"), model=str(clip_dir), on_error="stop")
    df = ifr.from_pydict({"t": ["a", ""]}).with_column("v", embed_text(col("t"), error_column=False))
    assert df.column_names == ["t", "v"] and df.to_pydict()["v"][1] is None
