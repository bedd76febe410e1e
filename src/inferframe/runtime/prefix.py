"""Prompt prefixes: which rows share the start of their prompt, and how much of it.

A server's prompt cache (vLLM/SGLang automatic prefix caching, a llama.cpp slot, OpenAI's
prompt caching) reuses the longest cached *prefix* of a prompt. Rows sorted by their prompt
text sit next to the rows they share the longest prefix with, so one sort answers both "which
rows go out together" and "how much of each row a cache could serve".

Example:
    >>> shared_prefix_chars(["Doc A: q1", "Doc B: q1", "Doc A: q2"])
    [0, 4, 8]
"""

from __future__ import annotations

import os


def common_prefix_len(a: str, b: str) -> int:
    """The length of the longest common prefix of two strings (C speed via os.path.commonprefix).

    Example:
        >>> common_prefix_len("abcd", "abxy")
        2
    """
    return len(os.path.commonprefix((a, b)))


def shared_prefix_chars(texts: list[str]) -> list[int]:
    """Per text, the characters of its start that an earlier text (in sorted order) already had.

    With rows sent in sorted order a prefix cache could serve exactly these characters of each
    row (given room to keep them): the first row of a group pays for the shared part, the rest
    find it cached. Cost: one sort, then one prefix comparison per row.

    Example:
        >>> shared_prefix_chars(["sys: hello", "sys: help", "other"])
        [0, 8, 0]
    """
    order = sorted(range(len(texts)), key=texts.__getitem__)
    out = [0] * len(texts)
    for prev, cur in zip(order, order[1:]):
        out[cur] = common_prefix_len(texts[prev], texts[cur])
    return out
