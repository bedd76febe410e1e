"""Per-value media helpers the engine wraps as column functions: download, images, files, content parts.

Everything here works on one value (or one list of locations) and raises a
MediaError/DownloadError naming the problem; batching and errors-as-data are the
engine's job. Pillow and pypdf are imported only when pixels or PDFs are touched.

Example:
    >>> import pathlib, tempfile
    >>> from PIL import Image
    >>> from inferframe import media
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp, "cat.png")
    ...     Image.new("RGB", (2048, 1024)).save(path)
    ...     [data] = media.fetch_many_sync([str(path)])
    >>> part = media.image_part(data, "responses", max_size=1024)
    >>> part["type"], part["image_url"][:22]
    ('input_image', 'data:image/png;base64,')
"""

from ._errors import MediaError
from .download import DownloadError, fetch_many, fetch_many_sync
from .files import basename, classify, looks_like_text, mime_for, pdf_text, read_text_file
from .image import PASSTHROUGH_MIMES, decode, encode, normalize, resize, sniff_mime, to_data_url
from .parts import APIS, DETAILS, file_part, image_part, text_part

__all__ = [
    "APIS",
    "DETAILS",
    "PASSTHROUGH_MIMES",
    "DownloadError",
    "MediaError",
    "basename",
    "classify",
    "decode",
    "encode",
    "fetch_many",
    "fetch_many_sync",
    "file_part",
    "image_part",
    "looks_like_text",
    "mime_for",
    "normalize",
    "pdf_text",
    "read_text_file",
    "resize",
    "sniff_mime",
    "text_part",
    "to_data_url",
]
