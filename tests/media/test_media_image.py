"""Image helpers: sniffing, decode errors, resize geometry, encode round trips, pass-through without re-encode."""

from __future__ import annotations

import base64
import io

import pytest

from inferframe.errors import InferframeError
from inferframe.media import MediaError, decode, encode, image, normalize, resize, sniff_mime, to_data_url

from .conftest import read

from PIL import Image  # noqa: E402


def png_bytes(size=(40, 20), mode="RGB", color=(1, 2, 3)) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, color).save(buf, "PNG")
    return buf.getvalue()


def jpeg_bytes(size=(40, 20)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (90, 120, 150)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


@pytest.mark.parametrize(
    "name, mime",
    [
        ("rgba_40x20.png", "image/png"),
        ("rgb_64x32.jpg", "image/jpeg"),
        ("still_10x10.gif", "image/gif"),
        ("anim_10x10.gif", "image/gif"),
        ("rgb_16x16.webp", "image/webp"),
        ("rgb_12x8.bmp", "image/bmp"),
        ("hello.pdf", "application/pdf"),
        ("archive.zip", "application/zip"),
        ("notes.md", None),
        ("page.html", None),
    ],
)
def test_sniff_mime_fixtures(name, mime):
    assert sniff_mime(read(name)) == mime


def test_sniff_mime_edge_cases():
    assert sniff_mime(b"") is None
    assert sniff_mime(b"BMW is a car brand, not a bitmap") is None
    assert sniff_mime(b"\n  %PDF-1.7 ...") == "application/pdf"
    assert sniff_mime(b"\x00\x00\x00\x1cftypavif\x00\x00") == "image/avif"
    assert sniff_mime(memoryview(b"GIF89a....")) == "image/gif"


def test_decode_fixture_sizes():
    assert decode(read("rgba_40x20.png")).size == (40, 20)
    assert decode(read("rgba_40x20.png")).mode == "RGBA"
    assert decode(read("rgb_64x32.jpg")).size == (64, 32)
    assert decode(read("rgb_16x16.webp")).size == (16, 16)
    assert decode(read("rgb_12x8.bmp")).size == (12, 8)
    assert decode(bytearray(read("still_10x10.gif"))).size == (10, 10)


def test_decode_applies_exif_orientation():
    # Stored 30x10 with orientation 6: displayed (and re-encoded) as 10x30.
    assert decode(read("exif_rot6_30x10.jpg")).size == (10, 30)


@pytest.mark.parametrize(
    "data, needle",
    [
        (read("hello.pdf"), "application/pdf, not an image"),
        (read("archive.zip"), "application/zip, not an image"),
        (b"hello world, not an image", "b'hello world, not'"),
        (b"", "empty"),
        (read("rgba_40x20.png")[:60], "image/png data is truncated"),
        (read("rgb_64x32.jpg")[:200], "image/jpeg data is truncated"),
    ],
)
def test_decode_errors_name_what_was_found(data, needle):
    with pytest.raises(MediaError, match="Could not decode image") as info:
        decode(data)
    assert needle in str(info.value)
    assert isinstance(info.value, InferframeError) and isinstance(info.value, ValueError)


def test_decode_rejects_non_bytes():
    with pytest.raises(TypeError, match="expects bytes, got str"):
        decode("cat.png")


@pytest.mark.parametrize(
    "size, max_size, expected",
    [
        ((2000, 1000), 512, (512, 256)),
        ((1000, 2000), 512, (256, 512)),
        ((1000, 1000), 100, (100, 100)),
        ((3000, 7), 300, (300, 1)),  # extreme aspect: the short side never reaches 0
        ((640, 480), 640, (640, 480)),
        ((100, 50), 4096, (100, 50)),  # never upscale
    ],
)
def test_resize_keeps_aspect(size, max_size, expected):
    out = resize(Image.new("RGB", size), max_size)
    assert out.size == expected
    assert max(out.size) <= max_size


def test_resize_returns_same_object_when_it_fits():
    img = Image.new("RGB", (50, 40))
    assert resize(img, 50) is img


def test_resize_palette_image_is_smoothed_not_nearest():
    img = Image.new("P", (100, 100))
    out = resize(img, 10)
    assert out.size == (10, 10) and out.mode in ("RGB", "RGBA")


@pytest.mark.parametrize("bad", [0, -1, 1.5, None, True])
def test_resize_rejects_bad_max_size(bad):
    with pytest.raises(ValueError, match="max_size"):
        resize(Image.new("RGB", (4, 4)), bad)


@pytest.mark.parametrize("fmt, mime", [("png", "image/png"), ("jpeg", "image/jpeg"), ("JPG", "image/jpeg"), ("webp", "image/webp")])
@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P", "LA", "1"])
def test_encode_round_trip(fmt, mime, mode):
    img = Image.new(mode, (33, 17))
    data = encode(img, fmt)
    assert sniff_mime(data) == mime
    assert decode(data).size == (33, 17)


def test_encode_jpeg_flattens_transparency_onto_white():
    img = decode(read("rgba_40x20.png"))  # right half fully transparent
    out = decode(encode(img, "jpeg", quality=95)).convert("RGB")
    assert out.mode == "RGB"
    r, g, b = out.getpixel((35, 10))
    assert min(r, g, b) > 240  # white, not black
    r, g, b = out.getpixel((5, 10))
    assert r > 200 and g < 60 and b < 60


def test_encode_quality_changes_jpeg_size():
    img = Image.effect_noise((64, 64), 64).convert("RGB")
    assert len(encode(img, "jpeg", quality=20)) < len(encode(img, "jpeg", quality=95))


@pytest.mark.parametrize("kwargs, match", [({"format": "gif"}, "format"), ({"format": "png", "quality": 0}, "quality")])
def test_encode_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        encode(Image.new("RGB", (2, 2)), **kwargs)


@pytest.mark.parametrize(
    "name, mime",
    [
        ("rgba_40x20.png", "image/png"),
        ("rgb_64x32.jpg", "image/jpeg"),
        ("rgb_16x16.webp", "image/webp"),
        ("still_10x10.gif", "image/gif"),
    ],
)
def test_normalize_passes_through_without_reencode(name, mime, monkeypatch):
    data = read(name)
    # Prove no pixel decode happens: loading is forbidden for the pass-through paths.
    monkeypatch.setattr(image, "_load", lambda *a: pytest.fail("decoded a pass-through image"))
    cases = [{}, {"max_size": 64}]
    if mime != "image/gif":  # GIF is never an output format, so it cannot be asked for
        fmt = mime.split("/")[1]
        cases += [{"format": fmt}, {"format": fmt.upper(), "max_size": 64}]
    for kwargs in cases:
        out, out_mime = normalize(data, **kwargs)
        assert out is data
        assert out_mime == mime


def test_normalize_without_resize_does_not_open_the_image(monkeypatch):
    monkeypatch.setattr(image, "_open", lambda *a: pytest.fail("opened a pass-through image"))
    data = read("rgb_64x32.jpg")
    assert normalize(data) == (data, "image/jpeg")


def test_normalize_resizes_keeping_format():
    out, mime = normalize(read("rgb_64x32.jpg"), max_size=16)
    assert mime == "image/jpeg" and sniff_mime(out) == mime
    assert decode(out).size == (16, 8)
    out, mime = normalize(read("rgba_40x20.png"), max_size=10)
    assert mime == "image/png" and decode(out).size == (10, 5) and decode(out).mode == "RGBA"


def test_normalize_large_jpeg_uses_fast_path_and_exact_size():
    out, mime = normalize(jpeg_bytes((2000, 1000)), max_size=300)
    assert mime == "image/jpeg"
    assert decode(out).size == (300, 150)


def test_normalize_converts_format():
    out, mime = normalize(read("rgba_40x20.png"), format="webp")
    assert (mime, sniff_mime(out)) == ("image/webp", "image/webp")
    out, mime = normalize(read("rgb_64x32.jpg"), format="png", max_size=32)
    assert mime == "image/png" and decode(out).size == (32, 16)


def test_normalize_reencodes_unsupported_types_as_png():
    out, mime = normalize(read("rgb_12x8.bmp"))
    assert mime == "image/png" and decode(out).size == (12, 8)
    out, mime = normalize(read("exif_rot6_30x10.jpg"), format="png")
    assert decode(out).size == (10, 30)  # orientation baked in since EXIF is dropped


def test_normalize_animated_gif_becomes_still_png():
    out, mime = normalize(read("anim_10x10.gif"))
    assert mime == "image/png"
    assert not getattr(Image.open(io.BytesIO(out)), "is_animated", False)


def test_normalize_errors():
    with pytest.raises(MediaError, match="application/pdf, not an image"):
        normalize(read("hello.pdf"))
    with pytest.raises(MediaError, match="not a known image format"):
        normalize(b"plain text here")
    with pytest.raises(ValueError, match="format"):
        normalize(read("rgba_40x20.png"), format="tiff")


def test_to_data_url():
    data = read("rgba_40x20.png")
    url = to_data_url(data, "image/png")
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1], validate=True) == data
    assert to_data_url(b"hi", "text/plain") == "data:text/plain;base64,aGk="
    with pytest.raises(ValueError, match="mime"):
        to_data_url(b"x", "png")


def test_decompression_bomb_is_a_media_error(monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 64x32 is over twice this: Pillow refuses
    with pytest.raises(MediaError, match="too large to decode safely"):
        decode(read("rgb_64x32.jpg"))
