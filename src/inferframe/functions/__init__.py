"""Functions over expressions: ``format``, ``concat``, ``when``, ``unnest``, and the AI functions
(``prompt``, ``classify_text``, ``sem_predicate``, ``embed_text``, ``embed_image``), files and images, and similarity;
and the semantic operators as functions of a DataFrame (``sem_filter``, ``sem_topk``, ``sem_rank``, ``sem_agg``,
``sem_dedup``, ``sem_cluster_by``, ``sem_join``: ``sem_filter(df, ...)`` is ``df.sem_filter(...)``).

Every name here is a function: the modules behind them are private, so ``from inferframe.functions import
sem_filter`` gives the function.

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
from inferframe.functions._sem_agg import sem_agg
from inferframe.functions._sem_dedup import sem_cluster_by, sem_dedup
from inferframe.functions._sem_filter import sem_filter, sem_predicate
from inferframe.functions._sem_topk import sem_rank, sem_topk
# functions/sem_join.py (the pair checks) is loaded first (by _sem_join_api), so the name below binds the function,
# not that module: a later import of the module finds it loaded and leaves the package's name alone.
from inferframe.functions._sem_join_api import sem_join  # noqa: E402  isort: skip
from inferframe.functions.similarity import cosine_similarity

__all__ = [
    "classify_text", "col", "concat", "cosine_similarity", "decode_image", "download", "embed_image", "embed_text", "encode_image", "file", "format", "image", "lit", "prompt",
    "resize_image", "sem_agg", "sem_cluster_by", "sem_dedup", "sem_filter", "sem_join", "sem_predicate", "sem_rank",
    "sem_topk", "unnest", "when",
]
