"""Functions over expressions: ``format``, ``concat``, ``when``, ``unnest``, and the AI functions
(``prompt``, ``classify_text``, ``sem_predicate``, ``embed_text``, ``embed_image``), files and images, and similarity.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import format
    >>> df = ifr.from_pydict({"name": ["Ada"]})
    >>> df.select(format("Hello {}!", ifr.col("name")).alias("greeting")).to_pydict()
    {'greeting': ['Hello Ada!']}
"""

from inferframe.expressions.expression import col, lit
from inferframe.functions.ai import classify_text, prompt
from inferframe.functions.embed import embed_image, embed_text
from inferframe.functions.files import decode_image, download, encode_image, file, image, resize_image
from inferframe.functions.general import concat, format, unnest, when
from inferframe.functions.sem_filter import sem_predicate
from inferframe.functions.similarity import cosine_similarity

__all__ = [
    "classify_text", "col", "concat", "cosine_similarity", "decode_image", "download", "embed_image", "embed_text", "encode_image", "file", "format", "image", "lit", "prompt",
    "resize_image", "sem_predicate", "unnest", "when",
]
