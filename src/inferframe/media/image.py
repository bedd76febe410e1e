"""Image bytes in, model-ready image bytes out: sniff, decode, resize, encode, data URLs.

Pillow is imported only when pixels are needed, so sniffing and pass-through of
already-acceptable images work (and cost nothing) without it.
"""

from __future__ import annotations

import base64
import io
from types import MappingProxyType
from typing import TYPE_CHECKING

from inferframe.errors import PlanError

from ._errors import MediaError, describe_bytes, require_bytes

if TYPE_CHECKING:
    from PIL import Image as PILImage

__all__ = [
    "PASSTHROUGH_MIMES",
    "decode",
    "encode",
    "normalize",
    "resize",
    "sniff_mime",
    "to_data_url",
]

#: Image types vision APIs accept as-is (OpenAI: PNG, JPEG, WEBP, non-animated GIF).
PASSTHROUGH_MIMES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})

_FORMATS = MappingProxyType({"png": "PNG", "jpeg": "JPEG", "jpg": "JPEG", "webp": "WEBP"})
_FORMAT_MIME = MappingProxyType({"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"})
_MIME_FORMAT = MappingProxyType({v: k for k, v in _FORMAT_MIME.items()})

# BMP info-header sizes; checking them keeps text that starts with "BM" from sniffing as BMP.
_BMP_HEADER_SIZES = frozenset({12, 16, 40, 52, 56, 64, 108, 124})
_FTYP_BRANDS = MappingProxyType({
    b"avif": "image/avif",
    b"avis": "image/avif",
    b"heic": "image/heic",
    b"heix": "image/heic",
    b"mif1": "image/heif",
    b"msf1": "image/heif",
    b"qt  ": "video/quicktime",
    b"M4A ": "audio/mp4",
})


def sniff_mime(data: bytes) -> str | None:
    """Guess a MIME type from magic bytes alone; None when nothing is recognised.

    Recognises PNG, JPEG, GIF, WEBP, BMP, TIFF, ICO, AVIF/HEIC, PDF, ZIP, GZIP,
    7z, RAR and common audio/video containers. Text formats have no magic and
    give None.

    Args:
        data: the file's bytes (only the first few dozen are looked at).

    Example:
        >>> sniff_mime(b"\\x89PNG\\r\\n\\x1a\\n...")
        'image/png'
    """
    head = bytes(data[:64])
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and len(head) >= 12:
        kind = head[8:12]
        if kind == b"WEBP":
            return "image/webp"
        if kind == b"WAVE":
            return "audio/wav"
        if kind == b"AVI ":
            return "video/x-msvideo"
    # The PDF header may follow whitespace or a BOM; readers accept it there.
    if head.lstrip(b"\xef\xbb\xbf \t\r\n\f\x00").startswith(b"%PDF-"):
        return "application/pdf"
    if head[:2] == b"BM" and len(head) >= 18 and int.from_bytes(head[14:18], "little") in _BMP_HEADER_SIZES:
        return "image/bmp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "image/tiff"
    if head[:4] == b"\x00\x00\x01\x00" and len(head) >= 6 and head[4:6] != b"\x00\x00":
        return "image/x-icon"
    if head[4:8] == b"ftyp" and len(head) >= 12:
        brand = head[8:12]
        if brand in _FTYP_BRANDS:
            return _FTYP_BRANDS[brand]
        return "video/mp4"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "application/zip"
    if head.startswith(b"\x1f\x8b"):
        return "application/gzip"
    if head.startswith(b"7z\xbc\xaf\x27\x1c"):
        return "application/x-7z-compressed"
    if head.startswith(b"Rar!\x1a\x07"):
        return "application/vnd.rar"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"ID3") or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xF6 == 0xF2):
        return "audio/mpeg"
    if head.startswith(b"\x1aE\xdf\xa3"):
        return "video/webm"
    return None


def _pil():
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("Image support needs Pillow: pip install pillow") from e
    return Image


def _open(data: bytes) -> PILImage.Image:
    """Open lazily: only the header is parsed, so size and format are cheap to read."""
    Image = _pil()
    try:
        img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:
        raise MediaError(f"Could not decode image: it is too large to decode safely ({e})") from e
    except Exception as e:
        found = sniff_mime(data)
        if found is not None and not found.startswith("image/"):
            what = f"the bytes are {found}, not an image"
        elif found is not None:
            # Pillow's "cannot identify image file <BytesIO ...>" adds nothing for the reader.
            detail = "" if isinstance(e, Image.UnidentifiedImageError) else f" ({e})"
            what = f"{found} data is truncated, corrupt or unsupported{detail}"
        else:
            what = f"the bytes are not a known image format ({describe_bytes(data)})"
        raise MediaError(f"Could not decode image: {what}") from e
    return img


def _load(img: PILImage.Image, data: bytes) -> PILImage.Image:
    from PIL import Image, ImageOps

    try:
        img.load()
        # Re-encoding drops EXIF, so bake the orientation in or the model sees it sideways.
        ImageOps.exif_transpose(img, in_place=True)
    except Image.DecompressionBombError as e:
        raise MediaError(f"Could not decode image: it is too large to decode safely ({e})") from e
    except Exception as e:
        kind = sniff_mime(data) or (img.format or "image")
        raise MediaError(f"Could not decode image: {kind} data is truncated or corrupt ({e})") from e
    return img


def decode(data: bytes) -> PILImage.Image:
    """Decode image bytes into a fully loaded Pillow image, with EXIF orientation applied.

    Animated images give their first frame.

    Args:
        data: encoded image bytes (PNG, JPEG, GIF, WEBP, BMP, TIFF, AVIF, ...).

    Raises:
        MediaError: the bytes are not an image (the message names what they look
            like, e.g. "application/pdf" or their first bytes) or are corrupt.

    Example:
        >>> from PIL import Image
        >>> img = decode(encode(Image.new("RGB", (640, 480))))
        >>> img.size, img.mode
        ((640, 480), 'RGB')
    """
    data = require_bytes(data, "decode()")
    if not data:
        raise MediaError("Could not decode image: the data is empty (0 bytes)")
    return _load(_open(data), data)


def _check_max_size(max_size: int) -> int:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise PlanError(f"max_size must be a positive int, got {max_size!r}")
    return max_size


def _fit(size: tuple[int, int], max_size: int) -> tuple[int, int]:
    w, h = size
    if max(w, h) <= max_size:
        return w, h
    scale = max_size / max(w, h)
    if w >= h:
        return max_size, max(1, round(h * scale))
    return max(1, round(w * scale)), max_size


def resize(img: PILImage.Image, max_size: int) -> PILImage.Image:
    """Shrink an image so its longest side is at most max_size, keeping the aspect ratio.

    Never upscales: an image that already fits is returned as the same object.

    Args:
        img: a Pillow image.
        max_size: the largest allowed width or height, in pixels.

    Example:
        >>> from PIL import Image
        >>> resize(Image.new("RGB", (2000, 1000)), 512).size
        (512, 256)
    """
    Image = _pil()
    _check_max_size(max_size)
    new = _fit(img.size, max_size)
    if new == img.size:
        return img
    if img.mode in ("1", "P", "PA"):
        # Pillow silently falls back to nearest-neighbour for these modes; convert for a smooth result.
        img = img.convert("RGBA" if img.has_transparency_data else ("L" if img.mode == "1" else "RGB"))
    return img.resize(new, Image.Resampling.LANCZOS, reducing_gap=3.0)


def _format_name(format: str) -> str:
    if not isinstance(format, str) or format.lower() not in _FORMATS:
        raise PlanError(f"format must be one of 'png', 'jpeg', 'webp', got {format!r}")
    return _FORMATS[format.lower()]


def _flatten(img: PILImage.Image) -> PILImage.Image:
    """Composite transparency onto white: a plain RGB convert turns transparent areas black."""
    Image = _pil()
    if img.mode in ("RGB", "L", "CMYK"):
        return img
    if img.has_transparency_data:
        rgba = img.convert("RGBA")
        bg = Image.new("RGB", rgba.size, (255, 255, 255))
        bg.paste(rgba, mask=rgba.getchannel("A"))
        return bg
    return img.convert("RGB")


def encode(img: PILImage.Image, format: str = "png", quality: int = 85) -> bytes:
    """Encode a Pillow image as PNG, JPEG or WEBP bytes.

    JPEG has no alpha channel, so transparent images are flattened onto white.

    Args:
        img: a Pillow image.
        format: "png", "jpeg" (or "jpg") or "webp"; case-insensitive.
        quality: 1-100 for JPEG and WEBP; ignored for PNG.

    Example:
        >>> from PIL import Image
        >>> encode(Image.new("RGBA", (8, 8)), "jpeg")[:3]
        b'\\xff\\xd8\\xff'
    """
    fmt = _format_name(format)
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise PlanError(f"quality must be an int from 1 to 100, got {quality!r}")
    buf = io.BytesIO()
    if fmt == "JPEG":
        _flatten(img).save(buf, "JPEG", quality=quality)
    elif fmt == "WEBP":
        if img.mode not in ("RGB", "RGBA"):
            img = img.convert("RGBA" if img.has_transparency_data else "RGB")
        img.save(buf, "WEBP", quality=quality)
    else:
        if img.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
            img = img.convert("RGBA" if img.has_transparency_data else "RGB")
        # Level 1 is ~3x faster than the default 6 for ~15% larger files; models bill images by pixels.
        img.save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def normalize(data: bytes, *, max_size: int | None = None, format: str | None = None) -> tuple[bytes, str]:
    """Make image bytes acceptable to a vision API, re-encoding only when needed.

    PNG, JPEG, WEBP and still GIF bytes that already fit max_size and match
    format are returned unchanged (the same object; no decode, no re-encode).
    Anything else is decoded, shrunk to max_size and encoded as `format`, or
    as the source format when that is PNG/JPEG/WEBP, else PNG. Animated GIFs
    become a PNG of their first frame, since APIs reject them; GIF bytes are
    therefore always opened (header and second-frame probe, no full decode).

    Args:
        data: encoded image bytes.
        max_size: longest side in pixels; None keeps the size. Never upscales.
        format: "png", "jpeg" or "webp" to force an output format; None keeps
            an acceptable source format.

    Returns:
        (bytes, mime), e.g. (b"\\x89PNG...", "image/png").

    Raises:
        MediaError: the bytes are not a decodable image.

    Example:
        >>> from PIL import Image
        >>> jpeg_bytes = encode(Image.new("RGB", (2048, 1536)), "jpeg")
        >>> out, mime = normalize(jpeg_bytes, max_size=1024)
        >>> mime, decode(out).size
        ('image/jpeg', (1024, 768))
        >>> normalize(out, max_size=1024)[0] is out  # already fine: returned untouched
        True
    """
    data = require_bytes(data, "normalize()")
    if max_size is not None:
        _check_max_size(max_size)
    want = _format_name(format) if format is not None else None
    if not data:
        raise MediaError("Could not decode image: the data is empty (0 bytes)")
    mime = sniff_mime(data)
    if mime is not None and not mime.startswith("image/"):
        raise MediaError(f"Could not decode image: the bytes are {mime}, not an image")

    same_format = mime in PASSTHROUGH_MIMES and (want is None or _FORMAT_MIME.get(want) == mime)
    if same_format and max_size is None and mime != "image/gif":
        return data, mime

    img = _open(data)
    animated = mime == "image/gif" and bool(getattr(img, "is_animated", False))
    if same_format and not animated and (max_size is None or max(img.size) <= max_size):
        return data, mime

    if want is None:
        src = _MIME_FORMAT.get(mime or "", "")
        want = src if src in _FORMAT_MIME else "PNG"
    if max_size is not None and img.format == "JPEG":
        # DCT-domain downscaling skips most decode work; it never goes below the target size.
        img.draft(None, _fit(img.size, max_size))
    img = _load(img, data)
    if max_size is not None:
        img = resize(img, max_size)
    return encode(img, want), _FORMAT_MIME[want]


def to_data_url(data: bytes, mime: str) -> str:
    """Wrap bytes in a base64 data URL, the form APIs take for inline images and files.

    Args:
        data: the raw bytes.
        mime: their MIME type, e.g. "image/png" or "application/pdf".

    Example:
        >>> to_data_url(b"hi", "text/plain")
        'data:text/plain;base64,aGk='
    """
    data = require_bytes(data, "to_data_url()")
    if not isinstance(mime, str) or "/" not in mime or any(c in mime for c in " ,;"):
        raise PlanError(f"mime must be a type like 'image/png', got {mime!r}")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
