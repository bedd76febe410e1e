r"""A one-time note when a prompt puts the row's value before a long constant part (prompt caches reuse prefixes only).

Server prompt caches (vLLM's prefix caching, llama.cpp's ``cache_prompt``, OpenAI's prompt caching)
skip the work for the longest prefix a request shares with earlier ones. Constant instructions
placed after the row's value sit behind text that differs per row, so every row pays for them
again; placed first (or in ``system_message``, which the request carries before the user message)
they are computed once. The check reads the expression nodes when ``prompt()`` builds its
expression: no data, no request. The user's prompt is never changed.

Example:
    >>> from inferframe import col, lit
    >>> layout_hint([col("text")._node, lit("Answer in French. " * 20)._node]) is not None
    True
    >>> layout_hint([lit("Answer in French. " * 20)._node, col("text")._node]) is None
    True
"""

from __future__ import annotations

import json
import threading
from typing import Iterator, Sequence

import pyarrow as pa

from inferframe.errors import warn_user
from inferframe.expressions.nodes import Alias, Call, Col, Lit, Node

# 256 characters is about 64 tokens: four of vLLM's 16-token cache blocks. Below that, moving the
# text saves less prefill than the note costs in attention; above it the saving grows with every
# row. (OpenAI caches only prompts of 1,024 tokens or more, so there the gain starts later; the local
# servers reuse any block-aligned prefix.) The tail must also outweigh the constant text already in
# front of the value: with long instructions first and a short footer after, the layout is
# static-first in all that matters and moving the footer would gain little.
MIN_TAIL_CHARS = 256

_SEEN: set[int] = set()
_LOCK = threading.Lock()


class PromptLayoutHint(UserWarning):
    """A prompt puts the row's value before a long constant part; a prompt cache cannot reuse that part.

    Silence it with ``warnings.filterwarnings("ignore", category=inferframe.PromptLayoutHint)``.
    """


def layout_hint(parts: Sequence[Node], system_message: str | None = None) -> str | None:
    r"""The note for a prompt whose row value comes before a long constant part, else None.

    Parameters:
        parts: the expression nodes of the user message, in order (``prompt()``'s parts).
        system_message: the instructions sent before the user message; their text counts as in front.

    Example:
        >>> from inferframe import col
        >>> from inferframe.functions import format
        >>> tail = "\n\nClassify the sentiment as positive or negative. " * 8
        >>> note = layout_hint([format("{}" + tail, col("review"))._node])
        >>> note.split(". ")[0]
        'prompt(): 400 characters of constant text follow the row\'s value col("review")'
        >>> layout_hint([format(tail + "Review: {}", col("review"))._node]) is None
        True
        >>> layout_hint([col("review")._node], system_message=tail) is None
        True
    """
    return _note([s for p in parts for s in _segments(p)], parts, system_message)


def warn_layout(parts: Sequence[Node], system_message: str | None = None) -> None:
    """Warn once per distinct prompt layout (per process) when ``layout_hint`` has a note, at the user's line.

    Parameters:
        parts: the expression nodes of the user message, in order.
        system_message: the instructions sent before the user message.

    Example:
        >>> import warnings
        >>> from inferframe import col, lit
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     for _ in range(2):
        ...         warn_layout([col("doc")._node, lit("Summarise it in one line. " * 12)._node])
        >>> [w.category.__name__ for w in caught]
        ['PromptLayoutHint']
    """
    segments = [s for p in parts for s in _segments(p)]
    note = _note(segments, parts, system_message)
    if note is None:
        return
    # Keyed by the layout, so the same prompt built again (a notebook cell run twice, a prompt built
    # in a loop) says nothing new, while a different prompt still gets its own note.
    key = hash((system_message, tuple(s if isinstance(s, str) else ("value", str(s)) for s in segments)))
    with _LOCK:
        if key in _SEEN:
            return
        _SEEN.add(key)
    warn_user(note, PromptLayoutHint)


def _note(segments: list, parts: Sequence[Node], system_message: str | None) -> str | None:
    """The note for a prompt already split into segments (see ``_segments``), else None."""
    first = next((i for i, s in enumerate(segments) if not isinstance(s, str)), None)
    if first is None:
        return None
    before = len(system_message or "") + sum(len(s) for s in segments[:first])
    after = sum(len(s) for s in segments[first + 1:] if isinstance(s, str))
    if after < MIN_TAIL_CHARS or after <= before:
        return None
    value = segments[first]
    shared = f"only their first {before:,} characters" if before else "no prefix"
    return (f"prompt(): {after:,} characters of constant text follow the row's value {_show(value)}. "
            f"Server prompt caches (vLLM, llama.cpp, OpenAI) reuse only a prefix shared with earlier requests, "
            f"and these prompts share {shared}, so every row pays for those {after:,} characters again. Put the constant text first: {_reordered(parts, value)}, or "
            f"system_message=\"<your instructions>\" (sent before every row's message). "
            f"The prompt is sent as written. To silence this note: "
            f"warnings.filterwarnings(\"ignore\", category=inferframe.PromptLayoutHint).")


def _segments(node: Node) -> Iterator[str | Node]:
    """One part's text in the order it is sent: constant text as str, a per-row value as its node."""
    if isinstance(node, Alias):
        yield from _segments(node.child)
    elif isinstance(node, Lit):
        value = node.value.as_py() if isinstance(node.value, pa.Scalar) else node.value
        if isinstance(value, str) and value:
            yield value
    elif isinstance(node, Call) and node.function == "format":
        # Split as the format kernel does, so the pieces are exactly the text around each value.
        pieces = dict(node.params)["template"].split("{}")
        for i, piece in enumerate(pieces):
            if piece:
                yield piece
            if i < len(node.args):
                yield from _segments(node.args[i])
    elif isinstance(node, Call) and node.function == "str.concat":
        for arg in node.args:
            yield from _segments(arg)
    elif node.referenced_columns():
        yield node
    # Anything else is a constant whose text is known only once evaluated: it counts as neither
    # side, so an unusual expression cannot make the note fire.


def _show(node: Node) -> str:
    return f"col({json.dumps(node.column)})" if isinstance(node, Col) else str(node)


def _reordered(parts: Sequence[Node], value: Node) -> str:
    """The user's prompt with the constant text moved in front, in the shape they wrote it."""
    if len(parts) == 1:
        node = parts[0].child if isinstance(parts[0], Alias) else parts[0]
        if isinstance(node, Call) and node.function == "format":
            values = [a for a in node.args if a.referenced_columns()]
            holes = "...".join("{}" for _ in values)
            return f"format(\"<your instructions>...{holes}\", {', '.join(_show(v) for v in values)})"
    if len(parts) > 1:
        values = [p for p in parts if p.referenced_columns()]
        return f"prompt([lit(\"<your instructions>\"), {', '.join(_show(v) for v in values)}], ...)"
    return f"the constant text before {_show(value)}"
