"""Errors raised for one bad media value (an image, a PDF, a text file)."""

from __future__ import annotations

from inferframe.errors import ArgumentTypeError, MediaError

__all__ = ["MediaError", "describe_bytes", "require_bytes"]


def describe_bytes(data: bytes, n: int = 16) -> str:
    """Short, printable description of what some bytes start with, for error messages."""
    head = bytes(data[:n])
    more = "..." if len(data) > n else ""
    return f"{len(data)} bytes starting {head!r}{more}"


def require_bytes(data: object, what: str) -> bytes:
    """Return data as bytes (bytes, bytearray and memoryview accepted) or raise an ArgumentTypeError naming `what`."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise ArgumentTypeError(f"{what} expects bytes, got {type(data).__name__}")
