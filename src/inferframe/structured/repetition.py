"""Spot an answer that loops (a small model repeating one phrase until a limit) and say what helps.

A model that repeats itself writes until max_tokens (or, under a grammar, to a string's length
bound): a larger max_tokens only buys more of the same, so the row's error says so and names a fix.

Example:
    >>> repeated_phrase('{"summary":"A fun show. Great anime. Great anime. Great anime. Great anime. Great')
    'Great anime.'
    >>> repeated_phrase("A calm, short summary of the review.") is None
    True
    >>> runaway_number('{"name":"Ann","rating":1000000020000030000004000000500')
    '1000000020000030000004000000500'
"""

from __future__ import annotations

from typing import Any

MIN_REPEATS = 3     # a phrase said three times in a row, to the very end, is a loop
MIN_SPAN = 40       # ... over at least this many characters (short "ha ha ha" is not)
MAX_PERIOD = 200    # the longest phrase looked for, in characters
# A JSON number cut at max_tokens after this many digits is a loop: no quantity a record holds needs them
# (an int64 has 19), and a small model writing "1000000020000030..." one digit a token never ends it.
RUNAWAY_DIGITS = 20
_NUMBER_CHARS = frozenset("0123456789.eE+-")
_SHOWN = 60


def repeated_phrase(text: str, min_distinct: int = 2) -> str | None:
    """The phrase ``text`` ends by repeating (at least 3 times, over 40+ characters), else None.

    The last repeat may be cut off (the limit fell inside it). The shortest such phrase is returned,
    trimmed of surrounding spaces. A phrase needs ``min_distinct`` different letters or digits: in
    a finished string a run of '-' or 'x' may be meant; in an answer cut at max_tokens (pass 0)
    "0000..." is a loop too.
    """
    n = len(text)
    for period in range(1, min(MAX_PERIOD, n // MIN_REPEATS) + 1):
        # Characters, from the end back, that equal the one a period earlier (as many as a loop needs).
        need = max(MIN_REPEATS * period, MIN_SPAN) - period
        same = 0
        while same < min(need, n - period) and text[n - 1 - same] == text[n - 1 - same - period]:
            same += 1
        if same >= need and len({c for c in text[n - period:] if c.isalnum()}) >= min_distinct:
            while same < n - period and text[n - 1 - same] == text[n - 1 - same - period]:
                same += 1  # back to where the loop began, to show the phrase as it was first written
            start = n - same - period
            return _rotate(text[start:start + period], text[start - 1] if start else " ").strip()
    return None


def runaway_number(text: str, min_digits: int = RUNAWAY_DIGITS) -> str | None:
    """The digits an answer cut at max_tokens ends in, where they are a JSON number too long to be one, else None.

    The digits need not repeat exactly ("1000000020000030..."), so ``repeated_phrase`` does not see
    the loop; a number (after ``:``, ``,`` or ``[``, not inside a string) of ``min_digits`` digits is one.

    Example:
        >>> runaway_number('{"rating":' + "12" * 15)[:8]
        '12121212'
        >>> runaway_number('{"rating":4,"phone":"1234567890123456789012') is None   # inside a string
        True
        >>> runaway_number('{"rating":1000000020000030') is None                     # 16 digits: a value
        True
    """
    i = len(text)
    while i > 0 and text[i - 1] in _NUMBER_CHARS:
        i -= 1
    run = text[i:]
    before = text[:i].rstrip()
    if sum(c.isdigit() for c in run) < min_digits or (before and before[-1] not in ":,["):
        return None
    return run


def _rotate(phrase: str, before: str) -> str:
    """A loop's phrase, rotated to start at a word when it starts elsewhere (". Great anime" -> "Great anime. ")."""
    if phrase[0].isalnum() and not before.isalnum():
        return phrase
    for i in range(1, len(phrase)):
        if phrase[i - 1].isspace() and not phrase[i].isspace():
            return phrase[i:] + phrase[:i]
    return phrase


def looping_field(value: Any, path: str = "") -> tuple[str, str] | None:
    """(field path, phrase) of the first string in a parsed answer that ends in a loop, else None.

    Example:
        >>> looping_field({"rating": 4, "summary": "Good. " + "I love it. " * 5})
        ('summary', 'I love it.')
    """
    if isinstance(value, str):
        phrase = repeated_phrase(value)
        return (path or "value", phrase) if phrase is not None else None
    if isinstance(value, dict):
        items = [(f"{path}.{k}" if path else str(k), v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    else:
        return None
    for sub, v in items:
        found = looping_field(v, sub)
        if found is not None:
            return found
    return None


def repetition_message(phrase: str, field: str | None = None, *, llama_cpp: bool = False) -> str:
    """The row error for an answer that loops on ``phrase``: what happened, and fixes that work.

    Parameters:
        phrase: the repeated phrase (shortened when long).
        field: the field whose string loops (None: the answer was cut at max_tokens inside the loop).
        llama_cpp: a llama.cpp server answered (the embedded model): its fix is a stronger DRY penalty.

    Example:
        >>> repetition_message("Great anime.")[:60]
        "The model repeated itself; its answer repeats 'Great anime.'"
    """
    shown = phrase if len(phrase) <= _SHOWN else phrase[:_SHOWN - 3] + "..."
    if field is not None:
        where = f"field {field!r} repeats {shown!r} up to its length bound"
    elif phrase[:1].isdigit() and len(phrase) >= RUNAWAY_DIGITS:
        where = f"its answer writes the digits of one number ({shown!r}) until max_tokens"
    else:
        where = f"its answer repeats {shown!r} until max_tokens"
    if llama_cpp:
        fix = ("Fix: penalise repetition harder, e.g. prompt(..., dry_multiplier=2.0), or show the model an "
               "example answer in system_message, or use a larger model (model=... on an OpenAI-compatible "
               "provider)")
    else:
        fix = ("Fix: set a repetition penalty the server supports (frequency_penalty=0.5 on OpenAI-compatible "
               "servers), show an example answer in system_message, or use a larger model")
    return f"The model repeated itself; {where}, so a larger max_tokens would not help. {fix}."
