"""The one input rule of every AI function, in Python and SQL: text is text, and nothing else is turned into text silently.

An AI function reads text (and, where its model reads them, images, files and whole
conversations). A column of numbers, booleans, dates, lists or structs given where text is read
(the input column, a part of a message list, a template's ``{field}``, a SQL argument) is a
``PlanError`` when the expression is built, before any request: it names the function, the column,
its type and the cast to write (``col("stars").cast(DataType.string())`` in Python,
``CAST(stars AS VARCHAR)`` in SQL). The number 5 sent as "5" is rarely what was meant (an
embedding of "5", a prompt that is only a digit), so the choice is the user's, written once:
a cast, or ``format("Rated {} stars", col("stars"))`` that puts the value in a sentence.

Example:
    >>> import pyarrow as pa
    >>> check_input("prompt", pa.field("review", pa.string()))   # text: accepted
    >>> check_input("prompt", pa.field("stars", pa.int64()))
    Traceback (most recent call last):
    ...
    inferframe.errors.PlanError: prompt(): input 'stars' must be text, got int64; a number, boolean or date is never turned into text silently. Cast it: col('stars').cast(DataType.string()), or put it in a sentence: format('stars: {}', col('stars')). No request was sent.
"""

from __future__ import annotations

import pyarrow as pa

from inferframe.ai.requests import column_kind
from inferframe.errors import PlanError

__all__ = ["castable", "check_input", "is_text"]


def is_text(t: pa.DataType) -> bool:
    """Whether an Arrow type is read as text as it is: strings (any width, a view, dictionary-encoded) or all-null.

    Example:
        >>> is_text(pa.dictionary(pa.int32(), pa.string())), is_text(pa.int64())
        (True, False)
    """
    if isinstance(t, pa.ExtensionType):
        t = t.storage_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)
            or (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t)))


def check_input(fn: str, field: pa.Field, accepts: tuple = (), *, sql: str | None = None, param: str = "",
                template: bool = False) -> None:
    """Raise the rule's PlanError when ``field`` cannot be an input of ``fn``; return None when it can.

    Parameters:
        fn: the function as the user wrote it ("prompt", "embed_text[transformers]": the bracket is dropped).
        field: the input's name and Arrow type.
        accepts: the kinds an in-process model takes ("text", "binary"); () (a provider's model) also takes
            images, binary, files and conversations (a list of {role, content}).
        sql: the SQL text of the argument when the call is SQL's: the fix is then ``CAST(... AS VARCHAR)``.
        param: SQL's name of the argument ("prompt", "text").
        template: the column is a ``{field}`` of a semantic operator's template (the cast goes before the operator).

    Example:
        >>> check_input("ai_embed", pa.field("stars", pa.int32()), sql="stars", param="text")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: sql(): ai_embed()'s text must be text (VARCHAR), got int32 from 'stars'; a number, boolean or date is never turned into text silently. Cast it: CAST(stars AS VARCHAR). No request was sent.
    """
    t = field.type
    if is_text(t):
        return
    storage = t.storage_type if isinstance(t, pa.ExtensionType) else t
    if accepts:
        if "binary" in accepts and (pa.types.is_binary(storage) or pa.types.is_large_binary(storage)):
            return
    elif column_kind(t) in ("image", "file", "messages"):
        return
    raise PlanError(_message(fn.split("[")[0], field, accepts, sql, param, template))


def _message(fn: str, field: pa.Field, accepts: tuple, sql: str | None, param: str, template: bool) -> str:
    name, t = field.name, field.type
    why = "a number, boolean or date is never turned into text silently"
    if sql is not None:
        return (f"sql(): {fn}()'s {param} must be text (VARCHAR), got {t} from {sql!r}; {why}. "
                f"Cast it: CAST({sql} AS VARCHAR). No request was sent.")
    if "binary" in accepts:  # an image model: a cast to text is no fix
        return (f"{fn}(): input {name!r} must be images (an image or binary column, or paths as text), got {t}. "
                "Give it images, e.g. decode_image(download(col('path'))). No request was sent.")
    head = f"{fn}(): input {name!r} must be text, got {t}; {why}."
    cast = f"col({name!r}).cast(DataType.string())"
    if not castable(t):
        return (f"{head} Turn it into text first, as the model should read it (e.g. an @ifr.func that writes "
                "it out). No request was sent.")
    if template or fn.startswith("sem_"):
        return (f"{head} The template reads it as {{{name}}}: cast the column first, "
                f"df.with_column({name!r}, {cast}). No request was sent.")
    return (f"{head} Cast it: {cast}, or put it in a sentence: format('{name}: {{}}', col({name!r})). "
            "No request was sent.")


def castable(t: pa.DataType) -> bool:
    """Whether Arrow casts the type to text (numbers, booleans, dates and times do; lists and structs do not).

    Example:
        >>> castable(pa.date32()), castable(pa.list_(pa.string()))
        (True, False)
    """
    try:
        pa.array([], t).cast(pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
        return False
    return True
