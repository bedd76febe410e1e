"""The secret channel: API keys live in process memory under opaque handles, and reach worker
processes through their environment, never through a plan, a pickle, a cache, a log or an error.

A plan carries only a handle (``ProviderSpec.key_ref``: random, unrelated to the key). The driver
keeps ``handle -> key`` in memory. A runner that starts a worker process puts
``worker_env()`` into that process's environment (``INFERFRAME_SECRET_<handle>=<key>``); a provider
built in the worker finds the key there. The environment is chosen because it is the one channel
every kind of worker has (a subprocess, a Ray worker's ``runtime_env``), it is private to the
user's processes, and nothing in it is ever written by inferframe to disk or into a pickle.

Example:
    >>> ref = put("sk-test")
    >>> get(ref), ref.startswith("k") and "sk-test" not in ref
    ('sk-test', True)
"""

from __future__ import annotations

import os
import hashlib
import threading
import uuid

ENV_PREFIX = "INFERFRAME_SECRET_"

_lock = threading.Lock()
_keys: dict[str, str] = {}


def put(key: str) -> str:
    """Keep ``key`` in memory; return the handle that stands for it."""
    ref = "k" + uuid.uuid4().hex
    with _lock:
        _keys[ref] = key
    return ref


def put_store(url: str) -> str:
    """Keep a cache store's URL (it holds a password) in memory; the same URL keeps its one handle.

    Store handles start with "s" and outlive ``forget()`` (which drops provider keys): the cache a
    session was pointed at stays set when its provider is reset.

    Example:
        >>> ref = put_store("postgresql://me:pw@db/cache")
        >>> ref == put_store("postgresql://me:pw@db/cache"), ref.startswith("s"), "pw" in ref
        (True, True, False)
    """
    with _lock:
        for ref, key in _keys.items():
            if ref.startswith("s") and key == url:
                return ref
        ref = "s" + uuid.uuid4().hex
        _keys[ref] = url
    return ref


def get(ref: str | None) -> str | None:
    """The key behind ``ref``: from this process's memory, else from the environment a runner gave it."""
    if not ref:
        return None
    with _lock:
        key = _keys.get(ref)
    return key if key is not None else os.environ.get(ENV_PREFIX + ref)


def fingerprint(ref: str | None) -> str:
    """A short one-way digest of the key behind ``ref`` ("" for none): tells keys apart in this process's memory.

    Example:
        >>> fingerprint(put("sk-a")) == fingerprint(put("sk-a")) != fingerprint(put("sk-b")), fingerprint(None)
        (True, '')
    """
    key = get(ref)
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest() if key else ""


def worker_env() -> dict[str, str]:
    """The environment variables that hand this process's keys to a worker process it starts."""
    with _lock:
        return {ENV_PREFIX + ref: key for ref, key in _keys.items()}


def forget() -> None:
    """Drop every provider key held in memory (cache store URLs stay: see ``put_store``)."""
    with _lock:
        for ref in [r for r in _keys if not r.startswith("s")]:
            del _keys[ref]
