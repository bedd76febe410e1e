"""Store URLs: which are PostgreSQL, and how to name one without its password.

Example:
    >>> safe_name("postgresql://me:s3cret@db.internal:5432/cache")
    'postgresql://db.internal:5432/cache'
    >>> is_store_url("postgres://x"), is_store_url("/tmp/cache")
    (True, False)
"""

from __future__ import annotations

import urllib.parse

SCHEMES = ("postgresql", "postgres")


def is_store_url(text: object) -> bool:
    """Whether ``text`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return isinstance(text, str) and text.split("://", 1)[0].lower() in SCHEMES and "://" in text


def safe_name(url: str) -> str:
    """``postgresql://host:port/db`` of a store URL: no user, no password, no query but the socket host.

    Example:
        >>> safe_name("postgresql://u:pw@/postgres?host=/tmp/sock&password=pw")
        'postgresql:///postgres?host=/tmp/sock'
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        query = urllib.parse.parse_qs(parts.query)
        where = f"?host={query['host'][0]}" if not host and "host" in query else ""
        return f"{parts.scheme}://{host}{port}{parts.path}{where}"
    except ValueError:  # a malformed URL: name nothing from it
        return "postgresql://<unparsable URL>"


def host_of(url: str) -> str:
    """The host (or socket directory) a store URL names, for messages.

    Example:
        >>> host_of("postgresql://u:pw@10.0.0.5:6543/db"), host_of("postgresql://u@/db?host=/run/pg")
        ('10.0.0.5:6543', '/run/pg')
    """
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.hostname:
            return parts.hostname + (f":{parts.port}" if parts.port else "")
        return urllib.parse.parse_qs(parts.query).get("host", ["localhost"])[0]
    except ValueError:
        return "<unparsable URL>"
