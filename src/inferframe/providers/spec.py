"""Which provider a call uses and where: plain data that travels with the plan, never a secret.

Example:
    >>> ProviderSpec("openai", "http://127.0.0.1:8000/v1").option("timeout", 120.0)
    120.0
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class ProviderSpec:
    """Which provider to use and where; never holds a secret.

    Parameters:
        name: the registered provider name ("openai", "local", "lm_studio", or a plugin's).
        base_url: where its API lives (None: the provider's default).
        options: extra provider options as sorted (key, value) pairs (``timeout``, ``headers``, ...).
        key_ref: an opaque handle of a key held by ``inferframe.providers.secrets``, never the key.
    """

    name: str
    base_url: str | None = None
    options: tuple = ()
    key_ref: str | None = None

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)

    def with_option(self, key: str, value: Any) -> "ProviderSpec":
        """A copy with one option set."""
        return dataclasses.replace(self, options=tuple(sorted({**dict(self.options), key: value}.items())))
