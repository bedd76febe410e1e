"""Files and images as columns: ``download``, ``file``, ``decode_image``, ``resize_image``, ``encode_image``.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import download, decode_image
    >>> df = ifr.from_glob_path("examples/data/images/*.png")  # doctest: +SKIP
    >>> df = df.with_column("image", decode_image(download(ifr.col("path"))))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import dataclasses

import pyarrow as pa

from inferframe.datatype import DataType
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression
from inferframe.functions.ai import _ai_expression
from inferframe.runtime import RuntimeConfig


@dataclasses.dataclass(frozen=True)
class _MediaConfig:
    runtime: RuntimeConfig
    label: str
    max_size: int | None = None
    format: str | None = None
    timeout: float = 30.0


def _error(e: BaseException, kind: str) -> dict:
    return {"kind": kind, "message": f"{type(e).__name__}: {e}", "status": getattr(e, "status", None), "attempts": 1,
            "raw": None}


class _Downloader:
    """Reads each location's bytes with bounded concurrency; a failed read is that row's error."""

    def __init__(self, config: _MediaConfig) -> None:
        self.config = config

    async def __call__(self, locations) -> list[dict]:
        from inferframe.media import fetch_many

        values = await fetch_many(locations.to_pylist(), max_concurrency=self.config.runtime.max_concurrency,
                                  timeout=self.config.timeout)
        return [
            {"value": None, "error": _error(v, "download"), "usage": None} if isinstance(v, BaseException)
            else {"value": v, "error": None, "usage": None}
            for v in values
        ]


class _ImageCodec:
    """Decodes, resizes or re-encodes images off the event loop; a bad image is that row's error."""

    def __init__(self, config: _MediaConfig) -> None:
        self.config = config

    def _one(self, data: bytes | None):
        from inferframe.media import normalize

        if data is None:
            return {"value": None, "error": None, "usage": None}
        try:
            out, _ = normalize(data, max_size=self.config.max_size, format=self.config.format)
            return {"value": out, "error": None, "usage": None}
        except Exception as e:  # one bad image is data for its row
            return {"value": None, "error": _error(e, "image"), "usage": None}

    async def __call__(self, images) -> list[dict]:
        values = images.to_pylist()
        return await asyncio.to_thread(lambda: [self._one(v) for v in values])


def _media_call(owner, arg: Expression, value_type: pa.DataType, config: _MediaConfig, name: str) -> Expression:
    if not isinstance(arg, Expression):
        raise PlanError(f"{name}() takes a column expression, e.g. {name}(col('path')).")
    return _ai_expression(config, [arg._node], value_type, error_column=True, usage_column=False, owner=owner, name=name)


def download(locations: Expression, *, max_concurrency: int = 32, timeout: float = 30.0) -> Expression:
    """Read the bytes at each path or URL (local, file://, http(s)://, s3://, ...).

    A missing file or failed request gives a null value and its error in ``<name>_error``.
    """
    cfg = _MediaConfig(RuntimeConfig(max_concurrency=max_concurrency), "download", timeout=timeout)
    return _media_call(_Downloader, locations, pa.binary(), cfg, "download")


def decode_image(data: Expression, *, max_size: int | None = None) -> Expression:
    """Check and normalise encoded image bytes into an image column (optionally shrunk to ``max_size``)."""
    cfg = _MediaConfig(RuntimeConfig(max_concurrency=8), "decode_image", max_size=max_size)
    return _media_call(_ImageCodec, data, DataType.image().to_arrow(), cfg, "decode_image")


def resize_image(images: Expression, max_size: int) -> Expression:
    """Shrink images so the longest side is at most ``max_size`` pixels (never enlarges)."""
    if max_size < 1:
        raise PlanError(f"resize_image() needs max_size >= 1, got {max_size}.")
    cfg = _MediaConfig(RuntimeConfig(max_concurrency=8), "resize_image", max_size=max_size)
    return _media_call(_ImageCodec, images, DataType.image().to_arrow(), cfg, "resize_image")


def encode_image(images: Expression, format: str = "png") -> Expression:
    """Re-encode images as "png", "jpeg" or "webp"."""
    if format.lower() not in ("png", "jpeg", "jpg", "webp"):
        raise PlanError(f"encode_image() format must be 'png', 'jpeg' or 'webp', got {format!r}.")
    cfg = _MediaConfig(RuntimeConfig(max_concurrency=8), "encode_image", format=format.lower())
    return _media_call(_ImageCodec, images, DataType.image().to_arrow(), cfg, "encode_image")


def file(paths: Expression) -> Expression:
    """Mark a column of paths or URLs as files; ``prompt()`` reads them and sends them as parts."""
    if not isinstance(paths, Expression):
        raise PlanError("file() takes a column expression, e.g. file(col('path')).")
    return paths.cast(DataType.file())


def image(data: Expression) -> Expression:
    """Mark a column as images: encoded bytes, or http(s)/data URLs that the model fetches itself."""
    return data.cast(DataType.image())
