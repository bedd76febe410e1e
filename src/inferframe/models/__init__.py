"""In-process models: loaded once per worker, fed batches of rows (no HTTP, no runtime).

Example:
    >>> from inferframe.models import INPROCESS_PROVIDERS
    >>> "sentence_transformers" in INPROCESS_PROVIDERS
    True
"""

INPROCESS_PROVIDERS = ("sentence_transformers", "transformers")
