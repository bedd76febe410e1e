"""A persistent, content-addressed response cache: a paid answer is never paid for twice.

The key is a SHA-256 of the canonical JSON of everything that determines the
answer: the provider's identity (kind and endpoint), the API path, the request
body (model, messages, parameters, schema) and an optional user
``prompt_version``. API keys are never part of it. The answers live in a store
(``inferframe.runtime.store``): a SQLite file on one machine, PostgreSQL for a
cluster; each answer is stored the moment it arrives, so a crash loses nothing
that was paid for. An entry keeps what the answer was: its value, tokens and why
generation stopped (``finish_reason``), so a rerun served from the cache gives
the same output.

Example:
    >>> import tempfile
    >>> cache = ResponseCache(tempfile.mkdtemp())
    >>> k = cache_key("openai:https://api.openai.com/v1", "chat", {"model": "m", "messages": []})
    >>> cache.put(k, "hi", 3, 1, "length")
    >>> cache.get(k)
    ('hi', 3, 1, 'length')
"""

from __future__ import annotations

import enum
import hashlib
import os
from typing import Any

from inferframe.runtime.store import open_store
from inferframe.runtime.store.base import CacheStore, Hit, canonical_bytes, default_cache_dir
from inferframe.runtime.store.sqlite import MIGRATIONS, CacheReader, ResponseCache, refuse_network_fs

__all__ = ["CachePolicy", "POLICIES", "CacheReader", "CacheStore", "Hit", "KeyTemplate", "MIGRATIONS", "ResponseCache",
           "cache_key", "cache_keys", "default_cache_dir", "json_numbers", "open_cache", "refuse_network_fs"]


class CachePolicy(str, enum.Enum):
    """How a call uses the response cache; the value is the string users pass as ``cache=``.

    Example:
        >>> CachePolicy("read_only").reads, CachePolicy.READ_ONLY.writes
        (True, False)
    """

    READ_WRITE = "read_write"
    READ_ONLY = "read_only"
    REFRESH = "refresh"  # send again and overwrite
    OFF = "off"

    @property
    def reads(self) -> bool:
        """Answers are looked up before sending."""
        return self in (CachePolicy.READ_WRITE, CachePolicy.READ_ONLY)

    @property
    def writes(self) -> bool:
        """New answers are stored."""
        return self in (CachePolicy.READ_WRITE, CachePolicy.REFRESH)


POLICIES = tuple(p.value for p in CachePolicy)

def json_numbers(value: Any) -> Any:
    """``value`` with every whole float written as an int: JSON has one kind of number.

    ``temperature=0`` from Python and ``--temperature 0`` from the command line (a float) are one
    request; without this their bodies serialise as ``0`` and ``0.0``, and so hash to two cache
    keys. Request options go through it once per call, when the plan is built, so the body sent and
    the key hashed hold the same number whoever wrote it (row texts are strings: untouched).

    Example:
        >>> json_numbers({"temperature": 0.0, "top_p": 0.5, "stop": ["0.0"], "extra": {"seed": 7.0}})
        {'temperature': 0, 'top_p': 0.5, 'stop': ['0.0'], 'extra': {'seed': 7}}
    """
    t = type(value)
    if t is float:
        return int(value) if value.is_integer() and abs(value) < 2 ** 63 else value
    if t is dict:
        return {k: json_numbers(v) for k, v in value.items()}
    if t is list or t is tuple:
        return t(json_numbers(v) for v in value)
    return value


def cache_key(identity: str, endpoint: str, body: dict, prompt_version: str | None = None) -> str:
    """The content address of one request: identical inputs, identical key; secrets never enter it."""
    doc = {"v": 1, "provider": identity, "endpoint": endpoint, "body": body}
    if prompt_version is not None:
        doc["prompt_version"] = prompt_version
    return hashlib.sha256(canonical_bytes(doc)).hexdigest()


def cache_keys(identity: str, requests: list, prompt_version: str | None = None) -> list[str | None]:
    """``cache_key`` of every request (anything with ``endpoint`` and ``body``; None stays None), batched.

    The canonical document has sorted keys and ``body`` sorts first, so each key hashes
    ``{"body":`` + the body's canonical JSON + a tail shared by every request to one endpoint:
    the same bytes ``cache_key`` hashes, without building and sorting the document per row.

    Example:
        >>> from types import SimpleNamespace as R
        >>> rs = [R(endpoint="chat", body={"model": "m", "n": i}) for i in range(2)] + [None]
        >>> cache_keys("p", rs, "v2") == [cache_key("p", "chat", r.body, "v2") for r in rs[:2]] + [None]
        True
    """
    tails: dict[str, bytes] = {}
    sha256, canonical = hashlib.sha256, canonical_bytes
    out: list[str | None] = []
    for r in requests:
        if r is None:
            out.append(None)
            continue
        tail = tails.get(r.endpoint)
        if tail is None:
            doc = {"v": 1, "provider": identity, "endpoint": r.endpoint, "body": None}
            if prompt_version is not None:
                doc["prompt_version"] = prompt_version
            whole = canonical(doc)
            head = b'{"body":null'
            assert whole.startswith(head), whole  # "body" sorts before every other field
            tail = tails[r.endpoint] = whole[len(head):]
        out.append(sha256(b'{"body":' + canonical(r.body) + tail).hexdigest())
    return out


class KeyTemplate:
    """``cache_key`` of bodies that differ only in one string: the canonical JSON around it is made once.

    A cached rerun of a text prompt is mostly key making; splicing each row's text into the
    bytes around a placeholder gives the very bytes ``cache_key`` hashes, without building a
    body per row.

    Parameters:
        identity, endpoint, prompt_version: as for ``cache_key``.
        body: the body with ``KeyTemplate.SLOT`` where the row's string goes (exactly once).

    Example:
        >>> t = KeyTemplate("p", "chat", {"model": "m", "messages": [{"content": KeyTemplate.SLOT}]})
        >>> t.keys(["hi", None]) == [cache_key("p", "chat", {"model": "m", "messages": [{"content": "hi"}]}), None]
        True
    """

    SLOT = "\x00inferframe-row-text\x00"

    def __init__(self, identity: str, endpoint: str, body: dict, prompt_version: str | None = None) -> None:
        doc = {"v": 1, "provider": identity, "endpoint": endpoint, "body": body}
        if prompt_version is not None:
            doc["prompt_version"] = prompt_version
        parts = canonical_bytes(doc).split(canonical_bytes(self.SLOT))
        if len(parts) != 2:
            raise ValueError(f"the body must hold the slot exactly once, not {len(parts) - 1} times")
        self.head, self.tail = parts

    def keys(self, texts: list[str | None]) -> list[str | None]:
        """The key of each text's body (None stays None)."""
        sha256, canonical, head, tail = hashlib.sha256, canonical_bytes, self.head, self.tail
        return [None if t is None else sha256(head + canonical(t) + tail).hexdigest() for t in texts]


def open_cache(directory: str | os.PathLike | None = None, url: str | None = None) -> CacheStore:
    """The process's shared handle on a job's cache: the PostgreSQL store at ``url``, else the SQLite file
    in ``directory`` (default: default_cache_dir())."""
    return open_store(directory, url)
