"""Media operators: download bytes and decode, resize or re-encode images, a failure being data for its row.

Example:
    >>> import asyncio, pyarrow as pa
    >>> from inferframe.series import Series
    >>> out = asyncio.run(Downloader(MediaConfig(4, "download")).__call__(Series(pa.array(["/no/such/file"]))))
    >>> out[0]["error"]["kind"]
    'download'
"""

from __future__ import annotations

import asyncio
import dataclasses

from inferframe.errors import ErrorKind


@dataclasses.dataclass(frozen=True)
class MediaConfig:
    """One media step: how many reads at once, its label, and the image size/format it produces."""

    max_concurrency: int
    label: str
    max_size: int | None = None
    format: str | None = None
    timeout: float = 30.0


def _error(e: BaseException, kind: ErrorKind) -> dict:
    return {"kind": kind.value, "message": f"{type(e).__name__}: {e}", "status": getattr(e, "status", None), "attempts": 1,
            "raw": None}


class Downloader:
    """Reads each location's bytes with bounded concurrency; a failed read is that row's error."""

    def __init__(self, config: MediaConfig) -> None:
        self.config = config

    async def __call__(self, locations) -> list[dict]:
        from inferframe.media import fetch_many

        values = await fetch_many(locations.to_pylist(), max_concurrency=self.config.max_concurrency,
                                  timeout=self.config.timeout)
        return [
            {"value": None, "error": _error(v, ErrorKind.DOWNLOAD), "usage": None} if isinstance(v, BaseException)
            else {"value": v, "error": None, "usage": None}
            for v in values
        ]


class ImageCodec:
    """Decodes, resizes or re-encodes images off the event loop; a bad image is that row's error."""

    def __init__(self, config: MediaConfig) -> None:
        self.config = config

    def _one(self, data: bytes | None):
        from inferframe.media import normalize

        if data is None:
            return {"value": None, "error": None, "usage": None}
        try:
            out, _ = normalize(data, max_size=self.config.max_size, format=self.config.format)
            return {"value": out, "error": None, "usage": None}
        except Exception as e:  # one bad image is data for its row
            return {"value": None, "error": _error(e, ErrorKind.IMAGE), "usage": None}

    async def __call__(self, images) -> list[dict]:
        values = images.to_pylist()
        return await asyncio.to_thread(lambda: [self._one(v) for v in values])
