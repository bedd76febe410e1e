"""Files in, text or a kind out: classify bytes, read text-like files, extract PDF text.

pypdf is imported only when a PDF is read.
"""

from __future__ import annotations

import codecs
import io
import mimetypes
import posixpath
import re
from html.parser import HTMLParser
from types import MappingProxyType
from urllib.parse import urlsplit

from inferframe.errors import PlanError

from ._errors import MediaError, describe_bytes, require_bytes
from .image import sniff_mime

__all__ = ["basename", "classify", "looks_like_text", "mime_for", "pdf_text", "read_text_file"]

_IMAGE_EXTS = frozenset({
    ".png", ".jpg", ".jpeg", ".jpe", ".gif", ".webp", ".bmp", ".tif", ".tiff",
    ".ico", ".avif", ".heic", ".heif",
})
_HTML_EXTS = frozenset({".html", ".htm", ".xhtml"})
# mimetypes misses or varies across platforms for these; pin them.
_EXT_MIME = MappingProxyType({
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".ndjson": "application/x-ndjson",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".xml": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".py": "text/x-python",
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".heic": "image/heic",
})
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it shares that BOM's first two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Control characters other than \t \n \f \r and ESC; a few are tolerated, many mean binary.
_CONTROL = bytes(c for c in range(32) if c not in (9, 10, 12, 13, 27)) + b"\x7f"
_SNIFF_LEN = 8192


def basename(name: str) -> str:
    """The last path component of a path or URL, without query string or fragment.

    Example:
        >>> basename("https://x.org/docs/report.pdf?sig=abc")
        'report.pdf'
    """
    if "://" in name:
        name = urlsplit(name).path
    name = name.replace("\\", "/").rstrip("/")
    return posixpath.basename(name) or name


def _ext(name: str) -> str:
    return posixpath.splitext(basename(name or ""))[1].lower()


def _bom_encoding(data: bytes) -> str | None:
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return enc
    return None


def looks_like_text(data: bytes) -> bool:
    """True when the bytes look like text: a Unicode BOM, or no NULs and few control characters.

    Only the first 8 KiB are inspected.

    Example:
        >>> looks_like_text(b"hello"), looks_like_text(b"\\x00\\x01\\x02")
        (True, False)
    """
    head = bytes(data[:_SNIFF_LEN])
    if _bom_encoding(head):
        return True
    if b"\x00" in head:
        return False
    if not head:
        return True
    controls = len(head) - len(head.translate(None, _CONTROL))
    return controls <= max(1, len(head) // 100)


def mime_for(name: str, data: bytes) -> str:
    """The MIME type of a file: from magic bytes, else from the name's extension, else from its content.

    Args:
        name: file name, path or URL (only the extension is used).
        data: the file's bytes.

    Example:
        >>> mime_for("notes.md", b"# Title")
        'text/markdown'
    """
    data = require_bytes(data, "mime_for()")
    sniffed = sniff_mime(data)
    if sniffed is not None:
        return sniffed
    ext = _ext(name)
    if ext in _EXT_MIME:
        return _EXT_MIME[ext]
    guessed, _ = mimetypes.guess_type("x" + ext) if ext else (None, None)
    if guessed:
        return guessed
    return "text/plain" if looks_like_text(data) else "application/octet-stream"


def classify(name: str, data: bytes) -> str:
    """Sort a file into 'image', 'pdf', 'text' or 'binary': magic bytes first, extension second.

    A file whose magic bytes say nothing (text has none) counts as an image or
    PDF by extension, else as text when its content looks like text, else
    binary. A ".png" whose bytes are a ZIP is 'binary'.

    Args:
        name: file name, path or URL.
        data: the file's bytes.

    Example:
        >>> classify("scan.pdf", b"%PDF-1.4 ...")
        'pdf'
    """
    data = require_bytes(data, "classify()")
    sniffed = sniff_mime(data)
    if sniffed is not None:
        if sniffed == "application/pdf":
            return "pdf"
        return "image" if sniffed.startswith("image/") else "binary"
    ext = _ext(name)
    if ext == ".pdf":
        return "pdf"
    if ext in _IMAGE_EXTS:
        return "image"
    return "text" if looks_like_text(data) else "binary"


class _TextExtractor(HTMLParser):
    """Collect visible text; block elements become line breaks, list items get a dash."""

    _SKIP = {"script", "style", "noscript", "template", "svg", "iframe", "object"}
    _BLOCK = {
        "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details",
        "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2",
        "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
        "section", "summary", "table", "title", "tr", "ul",
    }

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.pre = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self._SKIP:
            self.skip += 1
        elif tag in self._BLOCK:
            self.out.append("\n")
            if tag == "li":
                self.out.append("- ")
            elif tag == "pre":
                self.pre += 1
        elif tag in ("td", "th"):
            self.out.append("\t")

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag in self._BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag in self._BLOCK and tag != "li":  # items end where the next starts; no blank line between
            self.out.append("\n")
            if tag == "pre":
                self.pre = max(0, self.pre - 1)

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        self.out.append(data if self.pre else re.sub(r"\s+", " ", data))


def _html_to_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = [re.sub(r" *\t *", "\t", line).strip() for line in "".join(parser.out).split("\n")]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _decode_text(data: bytes, name: str) -> str:
    enc = _bom_encoding(data)
    if enc is not None:
        try:
            return data.decode(enc)
        except UnicodeDecodeError as e:
            raise MediaError(f"Could not read {name!r} as text: it starts with a {enc} BOM but does not decode ({e})") from e
    if not looks_like_text(data):
        found = sniff_mime(data)
        what = found if found else describe_bytes(data)
        raise MediaError(f"Could not read {name!r} as text: it looks like binary data ({what})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # Not UTF-8 but clearly text: legacy Windows/Latin-1 files are the common case.
        try:
            return data.decode("cp1252")
        except UnicodeDecodeError:
            return data.decode("latin-1")


def read_text_file(data: bytes, name: str) -> str:
    """Decode a text-like file (.txt, .md, .csv, .json, .html, ...) into a str.

    UTF-8 is expected; UTF-16/32 with a BOM and legacy cp1252/Latin-1 are
    accepted. Line endings become "\\n". HTML (.html/.htm/.xhtml) is reduced
    to its readable text: scripts and styles dropped, blocks on their own
    lines, entities unescaped.

    Args:
        data: the file's bytes.
        name: file name, path or URL; its extension selects HTML handling and
            it names the file in errors.

    Raises:
        MediaError: the bytes are binary (NULs, many control characters, or a
            known binary format such as a PDF or an image).

    Example:
        >>> read_text_file(b"<p>Hi &amp; bye</p>", "page.html")
        'Hi & bye'
    """
    data = require_bytes(data, "read_text_file()")
    sniffed = sniff_mime(data)
    if sniffed is not None:
        raise MediaError(f"Could not read {name!r} as text: it is {sniffed}, not text")
    text = _decode_text(data, name).replace("\r\n", "\n").replace("\r", "\n")
    if _ext(name) in _HTML_EXTS:
        return _html_to_text(text)
    return text


def pdf_text(data: bytes, max_pages: int | None = None) -> str:
    """Extract the text of a PDF with pypdf, pages separated by a blank line.

    A valid PDF made only of scanned images gives "" (there is no text layer).

    Args:
        data: the PDF's bytes.
        max_pages: read at most this many pages from the start; None reads all.

    Raises:
        MediaError: the bytes are not a PDF, the PDF is broken, or it is
            encrypted with a password.

    Example:
        >>> import io, pypdf
        >>> writer = pypdf.PdfWriter()
        >>> _ = writer.add_blank_page(width=72, height=72)
        >>> buf = io.BytesIO()
        >>> _ = writer.write(buf)
        >>> pdf_text(buf.getvalue())  # a page without a text layer, like a scan
        ''
    """
    data = require_bytes(data, "pdf_text()")
    if max_pages is not None and (isinstance(max_pages, bool) or not isinstance(max_pages, int) or max_pages < 1):
        raise PlanError(f"max_pages must be a positive int or None, got {max_pages!r}")
    if sniff_mime(data) != "application/pdf":
        found = sniff_mime(data)
        raise MediaError(f"Could not read PDF: the bytes are not a PDF ({found or describe_bytes(data)})")
    try:
        import pypdf
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("PDF support needs pypdf: pip install pypdf") from e
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise MediaError("Could not read PDF: it is encrypted with a password")
        pages = reader.pages if max_pages is None else reader.pages[:max_pages]
        texts = [(page.extract_text() or "").strip() for page in pages]
    except MediaError:
        raise
    except Exception as e:
        raise MediaError(f"Could not read PDF: it is broken or unsupported ({type(e).__name__}: {e})") from e
    return "\n\n".join(t for t in texts if t)
