"""Structured outputs and multimodal prompts against the simulator, checked with the openai SDK's types."""

import enum
import json
import pathlib
from typing import Literal, Optional

import pyarrow as pa
import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

import inferframe as ifr
from inferframe import col, lit
from inferframe.functions import classify_text, file, prompt, unnest
from inferframe.simulator import Simulator, SimulatorConfig

DATA = pathlib.Path(__file__).parent / "media" / "data"


class Address(BaseModel):
    city: str
    zip: Optional[str] = None


class Person(BaseModel):
    name: str = Field(description="full name")
    age: int
    mood: Literal["happy", "sad"]
    tags: list[str]
    home: Address


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(record_requests=True)) as s:
        yield s


def ask(sim, messages, return_format=None, **kw):
    kw.setdefault("model", "gpt-5-mini")
    return prompt(messages, return_format, provider="openai", base_url=sim.base_url, api_key="k", **kw)


@pytest.mark.parametrize("chat", [False, True])
def test_pydantic_model_gives_typed_struct(sim, chat):
    df = ifr.from_pydict({"q": [f"person {i}" for i in range(30)]})
    df = df.with_column("p", ask(sim, col("q"), Person, use_chat_completions=chat))
    t = df.schema()["p"].to_arrow()
    assert pa.types.is_struct(t) and t.field("home").type.names == ["city", "zip"]
    assert t.field("home").type.field("zip").nullable and not t.field("home").type.field("city").nullable
    assert pa.types.is_dictionary(t.field("mood").type)
    out = df.select(unnest(col("p")), "p_error").to_pydict()
    assert out["p_error"] == [None] * 30
    assert set(out["mood"]) <= {"happy", "sad"} and all(isinstance(a, int) for a in out["age"])
    body = sim.requests()[0]["body"]
    fmt = body["response_format"]["json_schema"] if chat else body["text"]["format"]
    assert fmt["strict"] is True and fmt["schema"]["additionalProperties"] is False
    assert fmt["schema"]["properties"]["name"]["description"] == "full name"


def _responder(bad):
    def respond(req):
        text = json.dumps(req)
        for marker, answer in bad.items():
            if marker in text:
                return answer
        return None  # the simulator's own schema-conforming answer

    return respond


def test_invalid_json_and_schema_violations_are_row_errors(sim):
    sim.configure(responder=_responder({"row 3": "this is not json {", "row 5": json.dumps({"name": "x", "age": "old"})}))
    df = ifr.from_pydict({"q": [f"row {i}" for i in range(8)]}).with_column("p", ask(sim, col("q"), Person))
    out = df.to_pydict()
    assert out["p"][3] is None and out["p_error"][3]["kind"] == "schema"
    assert "not valid JSON" in out["p_error"][3]["message"] and out["p_error"][3]["raw"] == "this is not json {"
    assert out["p_error"][5]["kind"] == "schema" and "age" in out["p_error"][5]["message"]
    assert [i for i, e in enumerate(out["p_error"]) if e] == [3, 5]


def test_repair_asks_once_more(sim):
    good = json.dumps({"name": "Ann", "age": 3, "mood": "happy", "tags": [], "home": {"city": "Oslo", "zip": None}})

    def respond(req):
        text = json.dumps(req)
        if "row 1" in text and "could not be used" not in text:
            return "{broken"
        return good

    sim.configure(responder=respond)
    out = ifr.from_pydict({"q": ["row 0", "row 1"]}).with_column("p", ask(sim, col("q"), Person, repair=True)).to_pydict()
    assert out["p_error"] == [None, None]
    assert out["p"][1]["home"]["city"] == "Oslo"


def test_literal_and_enum_and_choices(sim):
    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"

    sim.configure(responder=lambda req: "Blue." if "sky" in json.dumps(req) else None)
    df = ifr.from_pydict({"q": ["the sky", "a rose"]})
    out = df.with_column("c", ask(sim, col("q"), Color)).to_pydict()
    assert out["c"][0] == "blue" and out["c"][1] in ("red", "blue")
    lit_out = df.with_column("c", ask(sim, col("q"), Literal["red", "blue"])).to_arrow()
    assert pa.types.is_dictionary(lit_out.schema.field("c").type)
    cls = df.with_column("c", classify_text(col("q"), ["red", "blue"], provider="openai", base_url=sim.base_url,
                                            api_key="k", model="gpt-5-mini")).to_pydict()
    assert cls["c"][0] == "blue"


def test_unmappable_model_fails_before_any_request(sim):
    from typing import Any

    class Bad(BaseModel):
        x: Any

    with pytest.raises(ifr.PlanError, match="x"):
        ask(sim, col("q"), Bad)
    assert sim.stats()["total_requests"] == 0


def _strict(t):
    return TypeAdapter(t, config=ConfigDict(extra="forbid", strict=True))


@pytest.mark.parametrize("chat", [False, True])
def test_image_and_file_parts_match_the_sdk_request_types(sim, chat):
    from openai.types.chat import ChatCompletionContentPartParam
    from openai.types.responses import ResponseInputContentParam

    image = (DATA / "rgba_40x20.png").read_bytes()
    df = ifr.from_pydict({"img": [image], "doc": [str(DATA / "hello.pdf")], "md": [str(DATA / "notes.md")]})
    df = df.with_column("img", col("img").cast(ifr.DataType.image()))
    df = df.with_column("a", ask(sim, [lit("Look:"), col("img"), file(col("doc")), file(col("md"))],
                                 use_chat_completions=chat, max_image_size=16))
    out = df.to_pydict()
    assert out["a_error"] == [None]
    body = sim.requests()[0]["body"]
    content = body["messages"][0]["content"] if chat else body["input"][0]["content"]
    adapter = _strict(ChatCompletionContentPartParam if chat else ResponseInputContentParam)
    for part in content:
        adapter.validate_python(part)
    types = [p["type"] for p in content]
    assert types == (["text", "image_url", "file", "text"] if chat else ["input_text", "input_image", "input_file", "input_text"])
    assert "The meeting" in content[3]["text"] or "Notes" in content[3]["text"]


def test_pdf_as_text_and_missing_file_is_row_error(sim):
    df = ifr.from_pydict({"doc": [str(DATA / "hello.pdf"), str(DATA / "nope.pdf")]})
    out = df.with_column("a", ask(sim, [lit("Summarise:"), file(col("doc"))], pdf_mode="text")).to_pydict()
    assert out["a"][0] and out["a"][1] is None
    assert out["a_error"][1]["kind"] == "input" and "nope.pdf" in out["a_error"][1]["message"]
    assert sim.stats()["total_requests"] == 1


def test_images_encoded_once_per_row_not_per_retry(sim, monkeypatch):
    import inferframe.media.parts as parts

    calls = []
    real = parts.normalize
    monkeypatch.setattr(parts, "normalize", lambda *a, **k: calls.append(1) or real(*a, **k))
    sim.configure(fail_rules=[{"match": "Look", "status": 500, "times": 2}])
    image = (DATA / "rgb_64x32.jpg").read_bytes()
    df = ifr.from_pydict({"img": [image] * 5, "q": [f" row {i}" for i in range(5)]})
    df = df.with_column("img", col("img").cast(ifr.DataType.image()))
    out = df.with_column("a", ask(sim, [lit("Look"), col("q"), col("img")], max_image_size=16)).to_pydict()
    assert out["a_error"] == [None] * 5
    assert sim.stats()["total_requests"] == 15  # every row failed twice, then succeeded
    assert len(calls) == 5


def test_conversation_column(sim):
    conv = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye"}]]
    out = ifr.from_pydict({"c": conv}).with_column("a", ask(sim, col("c"), use_chat_completions=True)).to_pydict()
    assert out["a_error"] == [None]
    assert [m["role"] for m in sim.requests()[0]["body"]["messages"]] == ["user", "assistant", "user"]


def test_image_urls_go_to_the_model_as_urls(sim):
    from inferframe.functions import image

    df = ifr.from_pydict({"url": ["https://example.com/cat.png"]})
    out = df.with_column("a", ask(sim, [lit("What is this?"), image(col("url"))], use_chat_completions=True)).to_pydict()
    assert out["a_error"] == [None]
    part = sim.requests()[0]["body"]["messages"][0]["content"][1]
    assert part == {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "auto"}}
