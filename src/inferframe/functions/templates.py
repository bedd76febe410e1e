"""Templates of the semantic operators: ``"{review} is a positive review"``, with ``{column}`` or ``{column:left}`` fields.

A template is text with fields in braces that name columns; ``{{`` and ``}}`` are literal braces.
In a join, ``{column:left}`` and ``{column:right}`` say which side a column comes from (a field
without a side means the only side there is). ``Template.message`` turns it into the expressions a
row's message is made of (text and columns in order), as ``prompt`` and ``classify_text`` take them.

Example:
    >>> t = parse_template("{review:left} and {review:right} agree", "sem_join", sides=True)
    >>> [(f.column, f.side) for f in t.fields]
    [('review', 'left'), ('review', 'right')]
    >>> t.render({"review:left": "good", "review:right": "bad"})
    'good and bad agree'
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, col, lit

SIDES = ("left", "right")
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


@dataclasses.dataclass(frozen=True)
class Field:
    """One ``{column}`` or ``{column:side}`` of a template."""

    column: str
    side: str | None = None

    @property
    def key(self) -> str:
        """How ``render`` looks the field's value up: ``"column"`` or ``"column:side"``."""
        return f"{self.column}:{self.side}" if self.side else self.column


@dataclasses.dataclass(frozen=True)
class Template:
    """A parsed template: literal text and fields, in order.

    Parameters:
        text: the template as written.
        parts: literal strings and :class:`Field` objects, in order.
    """

    text: str
    parts: tuple

    @property
    def fields(self) -> tuple[Field, ...]:
        """The fields, in order (a column named twice appears twice)."""
        return tuple(p for p in self.parts if isinstance(p, Field))

    def columns(self, side: str | None = None) -> list[str]:
        """The distinct columns the template reads (of one side, when given), in order of first use.

        Example:
            >>> parse_template("{a:left} {b:right} {a:left}", "f", sides=True).columns("left")
            ['a']
        """
        out: list[str] = []
        for f in self.fields:
            if (side is None or f.side == side) and f.column not in out:
                out.append(f.column)
        return out

    def message(self, column_of: Mapping[str, str] | None = None) -> list[Expression]:
        """The expressions of one row's message: literal text and columns, in the template's order.

        Parameters:
            column_of: the column each field reads, by ``Field.key`` (default: the field's own column),
                e.g. ``{"review:right": "right.review"}`` after a join renamed the right side's column.

        Example:
            >>> parse_template("Is {x} big?", "f").message()
            [lit('Is '), col(x), lit(' big?')]
        """
        out: list[Expression] = []
        for p in self.parts:
            if isinstance(p, Field):
                out.append(col((column_of or {}).get(p.key, p.column)))
            else:
                out.append(lit(p))
        return out

    def render(self, values: Mapping[str, Any]) -> str:
        """The template filled with ``values`` by ``Field.key`` (for one row, in Python)."""
        return "".join(str(values[p.key]) if isinstance(p, Field) else p for p in self.parts)


def parse_template(text: Any, fn: str, sides: bool = False) -> Template:
    """Parse ``text`` into a :class:`Template`; a PlanError names what is wrong and the fix.

    Parameters:
        text: the template, e.g. ``"{review} is positive"``.
        fn: the operator's name, for messages.
        sides: fields may (and then must) name a side, ``{column:left}`` / ``{column:right}`` (a join).

    Example:
        >>> parse_template("{review} is positive", "sem_filter").columns()
        ['review']
        >>> parse_template("no fields", "sem_filter")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: sem_filter(): the template 'no fields' names no column; write the columns it reads in braces, e.g. '{review} is a positive review'.
    """
    if not isinstance(text, str) or not text.strip():
        raise PlanError(f"{fn}() takes a template string, e.g. '{{review}} is a positive review', got {text!r}.")
    parts: list[Any] = []
    pos = 0
    for m in _FIELD.finditer(text):
        if m.start() > pos:
            _add(parts, text[pos:m.start()])
        token = m.group(0)
        if token in ("{{", "}}"):
            _add(parts, token[0])
        elif m.group(1) is None:
            raise PlanError(f"{fn}(): the template {text!r} has an unmatched {token!r} at position {m.start()}; "
                            "write a literal brace as '{{' or '}}'.")
        else:
            parts.append(_field(m.group(1), text, fn, sides))
        pos = m.end()
    if pos < len(text):
        _add(parts, text[pos:])
    template = Template(text, tuple(parts))
    if not template.fields:
        raise PlanError(f"{fn}(): the template {text!r} names no column; write the columns it reads in braces, "
                        "e.g. '{review} is a positive review'.")
    if sides and {f.side for f in template.fields} != set(SIDES):
        raise PlanError(f"{fn}(): the template {text!r} must read a column of each side, e.g. "
                        "'{review:left} and {review:right} express the same sentiment'.")
    return template


def _add(parts: list, literal: str) -> None:
    if parts and isinstance(parts[-1], str):
        parts[-1] += literal
    else:
        parts.append(literal)


def _field(inner: str, text: str, fn: str, sides: bool) -> Field:
    name, _, side = inner.partition(":")
    name, side = name.strip(), side.strip()
    if not name:
        raise PlanError(f"{fn}(): the template {text!r} has an empty field {{{inner}}}; name a column in it.")
    if side and side not in SIDES:
        raise PlanError(f"{fn}(): the field {{{inner}}} in {text!r} names the side {side!r}; a side is 'left' or "
                        f"'right', e.g. {{{name}:left}}.")
    if sides and not side:
        raise PlanError(f"{fn}(): the field {{{inner}}} in {text!r} names no side; in a join write "
                        f"{{{name}:left}} or {{{name}:right}}.")
    if side and not sides:
        raise PlanError(f"{fn}(): the field {{{inner}}} in {text!r} names a side, but {fn}() reads one table; "
                        f"write {{{name}}}.")
    return Field(name, side or None)
