"""Files and images as columns: ``download``, ``file``, ``decode_image``, ``resize_image``, ``encode_image``.

Example:
    >>> import inferframe as ifr, pathlib, tempfile
    >>> from PIL import Image
    >>> from inferframe.functions import download, decode_image
    >>> folder = tempfile.mkdtemp()
    >>> Image.new("RGB", (64, 32), "red").save(pathlib.Path(folder, "red.png"))
    >>> df = ifr.from_glob_path(folder + "/*.png")
    >>> df = df.with_column("image", decode_image(download(ifr.col("path")), max_size=16))
    >>> row = df.select("image", "image_error").to_pylist()[0]
    >>> Image.open(__import__("io").BytesIO(row["image"])).size, row["image_error"]
    ((16, 8), None)
"""

from __future__ import annotations

import pyarrow as pa

from inferframe.ai.call import AICall, sizing
from inferframe.ai.media import Downloader, ImageCodec, MediaConfig
from inferframe.ai.options import check, in_range, whole_number
from inferframe.datatype import DataType
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression
from inferframe.functions._calls import ai_expression


def _media_call(owner, arg: Expression, value_type: pa.DataType, config: MediaConfig, name: str) -> Expression:
    if not isinstance(arg, Expression):
        raise PlanError(f"{name}() takes a column expression, e.g. {name}(col('path')).")
    return ai_expression(AICall(name, owner, (config,), (arg._node,), value_type, sizing(config.max_concurrency)))


def download(locations: Expression, *, max_concurrency: int = 32, timeout: float = 30.0) -> Expression:
    """Read the bytes at each path or URL (local, file://, http(s)://, s3://, ...).

    A missing file or failed request gives a null value and its error in ``<name>_error``.
    """
    cfg = MediaConfig(check("download", "max_concurrency", max_concurrency, whole_number(1)), "download",
                      timeout=check("download", "timeout", timeout, in_range(0, None, low_open=True)))
    return _media_call(Downloader, locations, pa.binary(), cfg, "download")


def decode_image(data: Expression, *, max_size: int | None = None) -> Expression:
    """Check and normalise encoded image bytes into an image column (optionally shrunk to ``max_size``)."""
    cfg = MediaConfig(8, "decode_image", max_size=check("decode_image", "max_size", max_size, whole_number(1)))
    return _media_call(ImageCodec, data, DataType.image().to_arrow(), cfg, "decode_image")


def resize_image(images: Expression, max_size: int) -> Expression:
    """Shrink images so the longest side is at most ``max_size`` pixels (never enlarges)."""
    if max_size is None:
        raise PlanError("resize_image() needs max_size=..., the longest side in pixels, e.g. resize_image(col('image'), 512).")
    cfg = MediaConfig(8, "resize_image", max_size=check("resize_image", "max_size", max_size, whole_number(1)))
    return _media_call(ImageCodec, images, DataType.image().to_arrow(), cfg, "resize_image")


def encode_image(images: Expression, format: str = "png") -> Expression:
    """Re-encode images as "png", "jpeg" or "webp"."""
    if format.lower() not in ("png", "jpeg", "jpg", "webp"):
        raise PlanError(f"encode_image() format must be 'png', 'jpeg' or 'webp', got {format!r}.")
    cfg = MediaConfig(8, "encode_image", format=format.lower())
    return _media_call(ImageCodec, images, DataType.image().to_arrow(), cfg, "encode_image")


def file(paths: Expression) -> Expression:
    """Mark a column of paths or URLs as files; ``prompt()`` reads them and sends them as parts."""
    if not isinstance(paths, Expression):
        raise PlanError("file() takes a column expression, e.g. file(col('path')).")
    return paths.cast(DataType.file())


def image(data: Expression) -> Expression:
    """Mark a column as images: encoded bytes, or http(s)/data URLs that the model fetches itself."""
    return data.cast(DataType.image())
