"""Which provider a call uses and where: plain data that travels with the plan, never a secret.

A spec resolved when the plan is built (``providers.registry.resolved``) also carries its wire
format (the provider class: bodies, answers, headers) and its capabilities, so the AI operators
that use it never consult the registry and never name a wire format; ``connect()`` builds the
transport in the process that sends.

Example:
    >>> ProviderSpec("openai", "http://127.0.0.1:8000/v1").option("timeout", 120.0)
    120.0
    >>> ProviderSpec("openai").wire_format().__name__
    'HostedOpenAIProvider'
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from inferframe.providers import secrets


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
    # Resolved once when the plan is built; not part of what the spec means (equality, repr).
    wire: Any = dataclasses.field(default=None, compare=False, repr=False)
    caps: Any = dataclasses.field(default=None, compare=False, repr=False)

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)

    def with_option(self, key: str, value: Any) -> "ProviderSpec":
        """A copy with one option set."""
        return dataclasses.replace(self, options=tuple(sorted({**dict(self.options), key: value}.items())))

    def wire_format(self) -> Any:
        """The provider class that builds this provider's bodies and reads its answers (resolved, else looked up)."""
        return self.wire if self.wire is not None else spec_lookups["resolve"](self).wire

    def capabilities(self) -> Any:
        """What the provider declares for this spec (resolved, else looked up)."""
        return self.caps if self.caps is not None else spec_lookups["resolve"](self).caps

    def connect(self) -> Any:
        """A live provider (its transport) for this spec, with its URL and key resolved in this process."""
        return spec_lookups["build"](self)

    def key_fingerprint(self) -> str:
        """A short digest of the key behind ``key_ref`` (which key answered, for the cache), never the key."""
        return secrets.fingerprint(self.key_ref)


# The registry installs ``resolve`` and ``build`` here when it is imported: it imports this module,
# so this one cannot import it (and every spec an AI call holds was resolved through it).
spec_lookups: dict[str, Callable[[ProviderSpec], Any]] = {}
