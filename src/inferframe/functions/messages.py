"""Turn one row's prompt inputs (text, images, files, conversations) into a request body.

Each input column has a kind decided by its Arrow type: text (strings),
image (image or binary columns: encoded bytes), file (file columns: a path
or URL read at run time), or messages (a list of {role, content} structs: a
whole conversation). Images are encoded here once per row; retries reuse the
built body.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.datatype import DataType


@dataclasses.dataclass(frozen=True)
class MediaOptions:
    """How images and files become message parts.

    Parameters:
        max_image_size: longest image side in pixels (None: as is).
        image_format: "png", "jpeg" or "webp" to re-encode images (None: keep).
        image_detail: "auto", "low", "high".
        pdf_mode: "file" sends PDFs as file parts; "text" sends their extracted text.
    """

    max_image_size: int | None = None
    image_format: str | None = None
    image_detail: str = "auto"
    pdf_mode: str = "file"


def column_kind(t: pa.DataType) -> str:
    dt = DataType(t)
    if dt.is_file():
        return "file"
    if dt.is_image() or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "image"
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        names = {t.value_type.field(i).name for i in range(t.value_type.num_fields)}
        if {"role", "content"} <= names:
            return "messages"
    return "text"


def content_parts(values: list[Any], kinds: list[str], names: list[str | None], api: str, media: MediaOptions) -> str | list[dict]:
    """The user message content for one row: a plain string when every part is text."""
    from inferframe.media import file_part, image_part, text_part

    if all(k == "text" for k in kinds):
        return "".join(str(v) for v in values)
    parts = []
    for value, kind, name in zip(values, kinds, names):
        if kind == "text":
            parts.append(text_part(str(value), api))
        elif kind == "image":
            if isinstance(value, bytes) and value[:8].lower().startswith((b"http://", b"https://", b"data:")):
                value = value.decode()  # image(col("url")): the URL itself goes to the model
            parts.append(image_part(value, api, max_size=media.max_image_size, format=media.image_format,
                                    detail=media.image_detail))
        elif kind == "file":
            parts.append(file_part(name or "file", value, api, pdf_mode=media.pdf_mode,
                                   max_size=media.max_image_size, format=media.image_format, detail=media.image_detail))
        else:
            raise ValueError("a conversation column must be the only input of prompt()")
    return parts


def conversation(messages: list[dict], api: str) -> list[dict]:
    """A column value of [{role, content}] as API messages (content kept as text)."""
    out = []
    for m in messages:
        if m is None or m.get("role") is None:
            continue
        out.append({"role": m["role"], "content": "" if m.get("content") is None else str(m["content"])})
    if not out:
        raise ValueError("the conversation is empty")
    return out
