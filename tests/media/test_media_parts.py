"""Content parts: exact shapes for Chat Completions and Responses, validated against the openai SDK types."""

from __future__ import annotations

import base64

import pytest

from inferframe.media import MediaError, decode, file_part, image_part, text_part

from .conftest import read


APIS = ["chat", "responses"]


def data_url_bytes(url: str, mime: str) -> bytes:
    prefix = f"data:{mime};base64,"
    assert url.startswith(prefix), url[:60]
    return base64.b64decode(url[len(prefix):], validate=True)


def image_url_of(part: dict) -> str:
    return part["image_url"]["url"] if part["type"] == "image_url" else part["image_url"]


def test_validators_are_strict(validators):
    """Guard the guard: a misspelled key, a missing key or the other API's shape must fail."""
    ok_chat = {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "auto"}}
    validators["chat"].validate_python(ok_chat)
    bad = [
        {"type": "image_url", "image_url": {"url": "https://x/y.png", "detial": "auto"}},
        {"type": "image_url", "image_url": "https://x/y.png"},
        {"type": "file", "file": {"filename": "a.pdf", "data": "x"}},
        {"type": "input_text", "text": "hi"},
        {"type": "text", "text": "hi", "extra": 1},
    ]
    for part in bad:
        with pytest.raises(Exception):
            validators["chat"].validate_python(part)
    for part in (
        {"type": "input_image", "image_url": "https://x/y.png"},  # detail is required here
        {"type": "text", "text": "hi"},
        {"type": "input_file", "filename": "a.pdf", "file": "x"},
    ):
        with pytest.raises(Exception):
            validators["responses"].validate_python(part)


def test_text_part_shapes(validators):
    assert text_part("hi", "chat") == {"type": "text", "text": "hi"}
    assert text_part("hi", "responses") == {"type": "input_text", "text": "hi"}
    for api in APIS:
        validators[api].validate_python(text_part("hi", api))
    with pytest.raises(ValueError, match="api must be 'chat' or 'responses'"):
        text_part("hi", "completions")
    with pytest.raises(TypeError):
        text_part(b"hi", "chat")


@pytest.mark.parametrize("api", APIS)
def test_image_part_from_bytes_passes_through(api, validators):
    data = read("rgb_64x32.jpg")
    part = image_part(data, api, detail="low")
    validators[api].validate_python(part)
    assert data_url_bytes(image_url_of(part), "image/jpeg") == data
    if api == "chat":
        assert part == {"type": "image_url", "image_url": {"url": image_url_of(part), "detail": "low"}}
    else:
        assert part == {"type": "input_image", "image_url": image_url_of(part), "detail": "low"}


@pytest.mark.parametrize("api", APIS)
def test_image_part_resizes_and_converts(api, validators):
    part = image_part(read("rgba_40x20.png"), api, max_size=10, format="webp")
    validators[api].validate_python(part)
    assert decode(data_url_bytes(image_url_of(part), "image/webp")).size == (10, 5)


@pytest.mark.parametrize("api", APIS)
def test_image_part_urls(api, validators):
    url = "https://example.org/cat.jpg?x=1"
    part = image_part(url, api, max_size=10)  # a remote URL is the provider's to fetch; size does not apply
    validators[api].validate_python(part)
    assert image_url_of(part) == url

    data_url = "data:image/png;base64," + base64.b64encode(read("rgba_40x20.png")).decode()
    assert image_url_of(image_part(data_url, api)) == data_url
    shrunk = image_part(data_url, api, max_size=20)
    assert decode(data_url_bytes(image_url_of(shrunk), "image/png")).size == (20, 10)


def test_image_part_errors():
    with pytest.raises(MediaError, match="fetch_many"):
        image_part("/tmp/cat.png", "chat")
    with pytest.raises(MediaError, match="fetch_many"):
        image_part("s3://bucket/cat.png", "responses")
    with pytest.raises(MediaError, match="application/pdf, not an image"):
        image_part(read("hello.pdf"), "chat")
    with pytest.raises(MediaError, match="not base64"):
        image_part("data:image/png,rawdata", "chat", max_size=4)
    with pytest.raises(ValueError, match="detail"):
        image_part(read("rgba_40x20.png"), "chat", detail="medium")


@pytest.mark.parametrize("api", APIS)
def test_file_part_pdf_as_file(api, validators):
    data = read("hello.pdf")
    part = file_part("s3://bucket/reports/hello.pdf", data, api)
    validators[api].validate_python(part)
    if api == "chat":
        assert set(part) == {"type", "file"} and part["type"] == "file"
        assert part["file"]["filename"] == "hello.pdf"
        assert data_url_bytes(part["file"]["file_data"], "application/pdf") == data
    else:
        assert set(part) == {"type", "filename", "file_data"} and part["type"] == "input_file"
        assert part["filename"] == "hello.pdf"
        assert data_url_bytes(part["file_data"], "application/pdf") == data


@pytest.mark.parametrize("api", APIS)
def test_file_part_pdf_as_text(api, validators):
    part = file_part("two_pages.pdf", read("two_pages.pdf"), api, pdf_mode="text", max_pages=1)
    validators[api].validate_python(part)
    assert part == text_part("File: two_pages.pdf\n\nFirst page text", api)


def test_file_part_pdf_errors():
    with pytest.raises(MediaError, match="no extractable text"):
        file_part("blank.pdf", read("blank.pdf"), "chat", pdf_mode="text")
    with pytest.raises(MediaError, match="bytes are not a PDF"):
        file_part("fake.pdf", b"just words", "chat")
    with pytest.raises(MediaError, match="Could not read PDF"):
        file_part("broken.pdf", read("broken.pdf"), "responses", pdf_mode="text")
    with pytest.raises(ValueError, match="pdf_mode"):
        file_part("hello.pdf", read("hello.pdf"), "chat", pdf_mode="images")


@pytest.mark.parametrize("api", APIS)
def test_file_part_text_files(api, validators):
    part = file_part("docs/notes.md", read("notes.md"), api)
    validators[api].validate_python(part)
    assert part == text_part("File: notes.md\n\n# Notes\n\n- caf\u00e9\n- tea\n", api)
    html = file_part("https://x.org/page.html?a=1", read("page.html"), api)
    assert html["text"].startswith("File: page.html\n\nQuarterly report\n\nResults & outlook")
    assert "<" not in html["text"].replace("<ok>", "")


@pytest.mark.parametrize("api", APIS)
def test_file_part_images(api, validators):
    part = file_part("pics/photo.bmp", read("rgb_12x8.bmp"), api, max_size=6, detail="high")
    validators[api].validate_python(part)
    assert decode(data_url_bytes(image_url_of(part), "image/png")).size == (6, 4)


def test_file_part_rejects_unknown_binary():
    with pytest.raises(MediaError, match="Cannot send 'archive.zip' to the model: it is application/zip"):
        file_part("archive.zip", read("archive.zip"), "chat")
    with pytest.raises(MediaError, match="application/octet-stream"):
        file_part("random.bin", read("random.bin"), "responses")
