"""Errors raised for one bad media value (an image, a PDF, a text file)."""

from __future__ import annotations

from inferframe.errors import InferframeError


class MediaError(InferframeError, ValueError):
    """One value cannot be used as media: not an image, a broken PDF, binary data where text was expected.

    Subclasses ValueError so callers that validate input generically still catch it.
    """


def describe_bytes(data: bytes, n: int = 16) -> str:
    """Short, printable description of what some bytes start with, for error messages."""
    head = bytes(data[:n])
    more = "..." if len(data) > n else ""
    return f"{len(data)} bytes starting {head!r}{more}"


def require_bytes(data: object, what: str) -> bytes:
    """Return data as bytes (bytes, bytearray and memoryview accepted) or raise a TypeError naming `what`."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} expects bytes, got {type(data).__name__}")
