"""Build OpenAI message content parts from one value, for the Chat Completions and Responses APIs.

Shapes follow the openai SDK's TypedDicts:

=========  ======================================================  ==========================================================
part       chat (ChatCompletionContentPartParam)                    responses (ResponseInputContentParam)
=========  ======================================================  ==========================================================
text       {"type": "text", "text"}                                {"type": "input_text", "text"}
image      {"type": "image_url", "image_url": {"url", "detail"}}   {"type": "input_image", "image_url", "detail"}
file       {"type": "file", "file": {"filename", "file_data"}}     {"type": "input_file", "filename", "file_data"}
=========  ======================================================  ==========================================================

file_data is a data URL ("data:application/pdf;base64,..."). Nothing here does I/O:
locations must be fetched first (see download.fetch_many).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from inferframe.errors import ArgumentTypeError, PlanError

from ._errors import MediaError, require_bytes
from .files import basename, classify, mime_for, pdf_text, read_text_file
from .image import normalize, sniff_mime, to_data_url

__all__ = ["APIS", "DETAILS", "file_part", "image_part", "text_part"]

APIS = ("chat", "responses")
#: Image detail levels both APIs accept.
DETAILS = ("auto", "low", "high", "original")
PDF_MODES = ("file", "text")


def _check_api(api: str) -> str:
    if api not in APIS:
        raise PlanError(f"api must be 'chat' or 'responses', got {api!r}")
    return api


def text_part(text: str, api: str) -> dict[str, Any]:
    """A text content part.

    Args:
        text: the text.
        api: "chat" or "responses".

    Example:
        >>> text_part("Describe this:", "responses")
        {'type': 'input_text', 'text': 'Describe this:'}
    """
    _check_api(api)
    if not isinstance(text, str):
        raise ArgumentTypeError(f"text_part() expects a str, got {type(text).__name__}")
    return {"type": "text" if api == "chat" else "input_text", "text": text}


def _image_url_part(url: str, api: str, detail: str) -> dict[str, Any]:
    if api == "chat":
        return {"type": "image_url", "image_url": {"url": url, "detail": detail}}
    return {"type": "input_image", "image_url": url, "detail": detail}


def _decode_data_url(url: str) -> bytes:
    header, sep, payload = url.partition(",")
    if not sep or not header.endswith(";base64"):
        raise MediaError(f"image_part() got a data URL that is not base64-encoded: {url[:40]!r}...")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as e:
        raise MediaError(f"image_part() got a data URL with invalid base64 ({e})") from e


def image_part(
    data_or_url: bytes | str,
    api: str,
    *,
    max_size: int | None = None,
    format: str | None = None,
    detail: str = "auto",
) -> dict[str, Any]:
    """An image content part from image bytes or an image URL.

    Bytes are normalized (image.normalize: pass-through when already fine,
    else resized/re-encoded) and sent inline as a base64 data URL. An
    http(s):// URL is passed to the provider as-is, so max_size and format do
    not apply to it. A data: URL passes through unless max_size or format ask
    for a change. Other strings (paths, s3://) are rejected: fetch them first.

    Args:
        data_or_url: encoded image bytes, or an http(s):// or data: URL.
        api: "chat" or "responses".
        max_size: longest side in pixels for bytes; None keeps the size.
        format: "png", "jpeg" or "webp" to force a format for bytes.
        detail: "auto", "low", "high" or "original".

    Raises:
        MediaError: the bytes are not an image, or the string is not a URL.

    Example:
        >>> image_part("https://x.org/cat.jpg", "chat")
        {'type': 'image_url', 'image_url': {'url': 'https://x.org/cat.jpg', 'detail': 'auto'}}
    """
    _check_api(api)
    if detail not in DETAILS:
        raise PlanError(f"detail must be one of {', '.join(map(repr, DETAILS))}, got {detail!r}")
    if isinstance(data_or_url, str):
        lowered = data_or_url[:8].lower()
        if lowered.startswith(("http://", "https://")):
            return _image_url_part(data_or_url, api, detail)
        if lowered.startswith("data:"):
            if max_size is None and format is None:
                return _image_url_part(data_or_url, api, detail)
            data_or_url = _decode_data_url(data_or_url)
        else:
            raise MediaError(
                f"image_part() got the location {data_or_url[:200]!r}; only http(s):// and data: URLs are "
                "sent as-is. Read the bytes first (media.fetch_many) and pass them instead."
            )
    data = require_bytes(data_or_url, "image_part()")
    out, mime = normalize(data, max_size=max_size, format=format)
    return _image_url_part(to_data_url(out, mime), api, detail)


def file_part(
    name: str,
    data: bytes,
    api: str,
    *,
    pdf_mode: str = "file",
    max_pages: int | None = None,
    max_size: int | None = None,
    format: str | None = None,
    detail: str = "auto",
) -> dict[str, Any]:
    """A content part for a file, chosen by what the file is (files.classify).

    - image: an image part (see image_part; max_size, format, detail apply).
    - pdf: pdf_mode="file" sends the PDF itself as a file part (the model sees
      text and page images); pdf_mode="text" sends its extracted text as a text
      part headed "File: <name>" (cheaper; max_pages limits it).
    - text: the decoded text (HTML reduced to readable text) as a text part
      headed "File: <name>".
    - anything else: MediaError.

    Args:
        name: file name, path or URL; its last component is the filename shown.
        data: the file's bytes.
        api: "chat" or "responses".
        pdf_mode: "file" or "text".
        max_pages: with pdf_mode="text", extract at most this many pages.
        max_size, format, detail: for images, as in image_part.

    Raises:
        MediaError: unsupported binary file, broken PDF or image, or a PDF with
            no text layer in pdf_mode="text".

    Example:
        >>> file_part("notes.md", b"# Todo", "chat")
        {'type': 'text', 'text': 'File: notes.md\\n\\n# Todo'}
    """
    _check_api(api)
    if pdf_mode not in PDF_MODES:
        raise PlanError(f"pdf_mode must be 'file' or 'text', got {pdf_mode!r}")
    if not isinstance(name, str):
        raise ArgumentTypeError(f"file_part() expects name to be a str, got {type(name).__name__}")
    data = require_bytes(data, "file_part()")
    filename = basename(name) or "file"
    kind = classify(name, data)
    if kind == "image":
        return image_part(data, api, max_size=max_size, format=format, detail=detail)
    if kind == "pdf":
        if pdf_mode == "text":
            text = pdf_text(data, max_pages=max_pages)
            if not text.strip():
                raise MediaError(
                    f"PDF {filename!r} has no extractable text (it may be scanned images); use pdf_mode='file'"
                )
            return text_part(f"File: {filename}\n\n{text}", api)
        if sniff_mime(data) != "application/pdf":
            # classify() trusted the ".pdf" extension; the provider would reject these bytes anyway.
            raise MediaError(f"Could not read PDF {filename!r}: the bytes are not a PDF")
        url = to_data_url(data, "application/pdf")
        if api == "chat":
            return {"type": "file", "file": {"filename": filename, "file_data": url}}
        return {"type": "input_file", "filename": filename, "file_data": url}
    if kind == "text":
        return text_part(f"File: {filename}\n\n{read_text_file(data, name)}", api)
    raise MediaError(
        f"Cannot send {filename!r} to the model: it is {mime_for(name, data)}, not an image, PDF or text file"
    )

