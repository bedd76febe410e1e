"""File helpers: classification, MIME types, text decoding, HTML stripping, PDF text extraction."""

from __future__ import annotations


import pytest

from inferframe.media import MediaError, basename, classify, looks_like_text, mime_for, pdf_text, read_text_file

from .conftest import read


@pytest.mark.parametrize(
    "name, kind",
    [
        ("rgba_40x20.png", "image"),
        ("rgb_64x32.jpg", "image"),
        ("rgb_12x8.bmp", "image"),
        ("hello.pdf", "pdf"),
        ("broken.pdf", "pdf"),
        ("notes.md", "text"),
        ("page.html", "text"),
        ("table.csv", "text"),
        ("data.json", "text"),
        ("utf16.txt", "text"),
        ("latin1.txt", "text"),
        ("archive.zip", "binary"),
        ("random.bin", "binary"),
    ],
)
def test_classify_fixtures(name, kind):
    assert classify(name, read(name)) == kind


def test_classify_magic_beats_extension():
    assert classify("photo.txt", read("rgba_40x20.png")) == "image"
    assert classify("report.png", read("hello.pdf")) == "pdf"
    assert classify("slides.pdf", read("archive.zip")) == "binary"
    assert classify("https://x.org/a/notes.md?sig=1", b"# hi") == "text"


def test_classify_extension_when_no_magic():
    assert classify("scan.pdf", b"not really a pdf") == "pdf"
    assert classify("cat.png", b"not really a png") == "image"
    assert classify("README", b"plain words") == "text"
    assert classify("script.py", b"print('hi')\n") == "text"
    assert classify("blob.dat", bytes(range(256))) == "binary"
    assert classify("empty.txt", b"") == "text"


def test_mime_for():
    assert mime_for("notes.md", read("notes.md")) == "text/markdown"
    assert mime_for("table.csv", read("table.csv")) == "text/csv"
    assert mime_for("data.json", read("data.json")) == "application/json"
    assert mime_for("page.htm", read("page.html")) == "text/html"
    assert mime_for("whatever.bin", read("hello.pdf")) == "application/pdf"
    assert mime_for("noext", b"words") == "text/plain"
    assert mime_for("noext", bytes(range(256))) == "application/octet-stream"


def test_looks_like_text():
    assert looks_like_text(b"")
    assert looks_like_text("h\u00e9llo\tworld\r\n".encode())
    assert looks_like_text(read("utf16.txt"))  # NULs, but a BOM says it is UTF-16
    assert not looks_like_text(b"abc\x00def")
    assert not looks_like_text(bytes(range(1, 32)) * 4)


def test_basename():
    assert basename("https://x.org/docs/report.pdf?sig=abc#p2") == "report.pdf"
    assert basename("s3://bucket/dir/notes.md") == "notes.md"
    assert basename("C:\\Users\\me\\a.txt") == "a.txt"
    assert basename("plain.txt") == "plain.txt"
    assert basename("dir/sub/") == "sub"


def test_read_text_files():
    assert read_text_file(read("notes.md"), "notes.md") == "# Notes\n\n- caf\u00e9\n- tea\n"  # CRLF normalized
    assert read_text_file(read("table.csv"), "table.csv") == "id,name\n1,alpha\n2,beta\n"
    assert read_text_file(read("data.json"), "data.json") == '{"a": [1, 2, 3]}\n'
    assert read_text_file(read("utf16.txt"), "utf16.txt") == "hello \u00fcber"
    assert read_text_file(read("latin1.txt"), "latin1.txt") == "na\u00efve caf\u00e9"
    assert read_text_file("\ufeffbom".encode("utf-8"), "x.txt") == "bom"
    assert read_text_file(b"", "empty.txt") == ""


def test_read_html_strips_tags_to_readable_text():
    text = read_text_file(read("page.html"), "page.html")
    assert text == (
        "Quarterly report\n\n"
        "Results & outlook\n\n"
        "Revenue grew by 12%.\n\n"
        "- North\n- South\n\n"
        "Caf\u00e9 <ok>\nnext line"
    )
    for hidden in ("secret", "color: red", "enable js", "<p>", "&amp;"):
        assert hidden not in text


def test_html_only_by_extension():
    # A .txt holding markup is the user's text; only HTML files are stripped.
    assert read_text_file(b"<b>x</b>", "a.txt") == "<b>x</b>"
    assert read_text_file(b"<table><tr><td>a</td><td>b</td></tr></table>", "t.htm") == "a\tb"


@pytest.mark.parametrize(
    "name, needle",
    [
        ("archive.zip", "it is application/zip, not text"),
        ("hello.pdf", "it is application/pdf, not text"),
        ("rgba_40x20.png", "it is image/png, not text"),
        ("random.bin", "looks like binary data"),
    ],
)
def test_read_text_file_rejects_binary(name, needle):
    with pytest.raises(MediaError, match=f"Could not read '{name}' as text") as info:
        read_text_file(read(name), name)
    assert needle in str(info.value)


def test_pdf_text():
    assert pdf_text(read("hello.pdf")) == "Hello inferframe"
    assert pdf_text(read("two_pages.pdf")) == "First page text\n\nSecond page text"
    assert pdf_text(read("two_pages.pdf"), max_pages=1) == "First page text"
    assert pdf_text(read("two_pages.pdf"), max_pages=5) == "First page text\n\nSecond page text"
    assert pdf_text(read("blank.pdf")) == ""  # valid, but no text layer


def test_pdf_text_errors():
    with pytest.raises(MediaError, match="Could not read PDF: it is broken"):
        pdf_text(read("broken.pdf"))
    with pytest.raises(MediaError, match="not a PDF .*image/png"):
        pdf_text(read("rgba_40x20.png"))
    with pytest.raises(MediaError, match="not a PDF .*b'hello'"):
        pdf_text(b"hello")
    with pytest.raises(ValueError, match="max_pages"):
        pdf_text(read("hello.pdf"), max_pages=0)
