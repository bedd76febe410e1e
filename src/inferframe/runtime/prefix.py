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


def common_prefix_len(a: str, b: str) -> int:
    """The length of the longest common prefix of two strings.

    A binary search over slice equality: each step is one C comparison, so a shared prefix of
    8,000 characters costs about 13 of them (os.path.commonprefix loops over characters in Python).

    Example:
        >>> common_prefix_len("abcd", "abxy"), common_prefix_len("ab", "abc"), common_prefix_len("", "a")
        (2, 2, 0)
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


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
