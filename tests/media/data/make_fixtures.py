"""Regenerate the tiny media fixtures in this folder (deterministic; under 50 KB in all).

Run: .venv/bin/python tests/media/data/make_fixtures.py
"""

from __future__ import annotations

import io
import pathlib
import zipfile

HERE = pathlib.Path(__file__).resolve().parent


def text_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page, xref offsets computed."""
    n = len(pages)
    # Objects: 1 catalog, 2 pages, 3 font, then (page, content) pairs.
    page_ids = [4 + 2 * i for i in range(n)]
    objs: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % p for p in page_ids) + b"] /Count %d >>" % n,
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    for pid, text in zip(page_ids, pages):
        stream = b"BT /F1 18 Tf 40 100 Td (" + text.encode("latin-1") + b") Tj ET"
        objs[pid] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (pid + 1)
        )
        objs[pid + 1] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for num in sorted(objs):
        offsets[num] = len(out)
        out += b"%d 0 obj\n" % num + objs[num] + b"\nendobj\n"
    xref = len(out)
    size = max(objs) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for num in range(1, size):
        out += b"%010d 00000 n \n" % offsets[num]
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    return bytes(out)


def blank_pdf() -> bytes:
    import pypdf

    w = pypdf.PdfWriter()
    w.add_blank_page(width=72, height=72)
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def images() -> dict[str, bytes]:
    from PIL import Image

    out = {}

    def save(img, fmt, **kw):
        buf = io.BytesIO()
        img.save(buf, fmt, **kw)
        return buf.getvalue()

    rgba = Image.new("RGBA", (40, 20), (255, 0, 0, 255))
    rgba.paste((0, 0, 255, 0), (20, 0, 40, 20))  # right half fully transparent
    out["rgba_40x20.png"] = save(rgba, "PNG")
    out["rgb_64x32.jpg"] = save(Image.new("RGB", (64, 32), (0, 128, 0)), "JPEG", quality=80)
    out["still_10x10.gif"] = save(Image.new("P", (10, 10), 3), "GIF")
    frames = [Image.new("RGB", (10, 10), c) for c in ((255, 0, 0), (0, 0, 255))]
    out["anim_10x10.gif"] = save(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    out["rgb_16x16.webp"] = save(Image.new("RGB", (16, 16), (10, 20, 30)), "WEBP", quality=80)
    out["rgb_12x8.bmp"] = save(Image.new("RGB", (12, 8), (200, 100, 0)), "BMP")
    # EXIF orientation 6 means "rotate 90 degrees clockwise to display": stored 30x10, shown 10x30.
    exif = Image.Exif()
    exif[0x0112] = 6
    out["exif_rot6_30x10.jpg"] = save(Image.new("RGB", (30, 10), (0, 0, 0)), "JPEG", exif=exif)
    return out


def zip_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("a.txt", date_time=(2020, 1, 1, 0, 0, 0)), "hello")
    return buf.getvalue()


HTML = """<!doctype html>
<html><head><title>Quarterly report</title>
<style>body { color: red; }</style>
<script>var secret = "do not show";</script></head>
<body>
<h1>Results &amp; outlook</h1>
<p>Revenue   grew
by 12%.</p>
<ul><li>North</li><li>South</li></ul>
<noscript>enable js</noscript>
<p>Caf&eacute; &lt;ok&gt;<br>next line</p>
</body></html>
"""


def main() -> None:
    files: dict[str, bytes] = {
        "hello.pdf": text_pdf(["Hello inferframe"]),
        "two_pages.pdf": text_pdf(["First page text", "Second page text"]),
        "blank.pdf": blank_pdf(),
        "broken.pdf": text_pdf(["Hello inferframe"])[:60],
        "page.html": HTML.encode(),
        "notes.md": "# Notes\r\n\r\n- café\r\n- tea\r\n".encode(),
        "table.csv": b"id,name\n1,alpha\n2,beta\n",
        "data.json": b'{"a": [1, 2, 3]}\n',
        "utf16.txt": "hello \u00fcber".encode("utf-16"),
        "latin1.txt": "na\u00efve caf\u00e9".encode("cp1252"),
        "archive.zip": zip_bytes(),
        "random.bin": bytes(range(256)) * 2,
        **images(),
    }
    for name, data in files.items():
        (HERE / name).write_bytes(data)
    total = sum(len(d) for d in files.values())
    assert total < 50_000, total
    print(f"wrote {len(files)} fixtures, {total} bytes")


if __name__ == "__main__":
    main()
