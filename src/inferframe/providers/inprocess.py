"""Model families that ``embed_text``/``embed_image`` run inside this process (no HTTP, no runtime).

They are registered like any provider, so that a call names them the same way and nothing branches
on their names.

Example:
    >>> from inferframe.providers.registry import REGISTRY
    >>> REGISTRY.get("sentence_transformers").capabilities.in_process
    True
"""

from __future__ import annotations

from inferframe.providers.interface import Capabilities


def register(registry) -> None:
    """Entry-point hook: the in-process model families (``sentence_transformers`` is the offline default)."""
    registry.register("sentence_transformers", None, capabilities=Capabilities(in_process=True, local=True),
                      offline_default=False)
    registry.register("transformers", None, capabilities=Capabilities(in_process=True, local=True))
