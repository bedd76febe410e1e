"""The AI steps of ``sem_join``: a pair check (yes/no) over a join template, and one side's property.

Both are ordinary AI calls (``classify_text``, or ``prompt`` with a JSON schema), so their answers
parse by construction (label scoring, a grammar or a JSON schema of the allowed answers), and the
runtime's limits, cache, resume, errors-as-data and ``last_run()`` apply unchanged. Their labels in
``last_run()`` and the progress line are ``sem_join.check[<model>]`` and ``sem_join.property[<model>]``.

Example:
    >>> from inferframe.functions.templates import parse_template
    >>> t = parse_template("{review:left} and {review:right} agree", "sem_join", sides=True)
    >>> side_message(t, "left")
    [col(review)]
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from inferframe.expressions.expression import Expression, col, lit
from inferframe.functions._calls import ai_expression
from inferframe.functions.templates import Template

CHECK_LABELS = ("yes", "no")
CHECK_INSTRUCTIONS = "Decide whether the statement is true. Answer yes or no."


def pair_check(template: Template, column_of: Mapping[str, str] | None = None, *,
               instructions: str | None = None, **options: Any) -> Expression:
    """A "yes"/"no" column: does the template, filled with a pair's values, hold?

    Parameters:
        template: the join's template (``{col:left}`` / ``{col:right}`` fields).
        column_of: the column each field reads, by ``Field.key`` (e.g. ``{"review:right": "right.review"}``).
        instructions: the system message (default: decide whether the statement is true, yes or no).
        **options: ``classify_text``'s options (provider, model, method, examples, on_error, ...).

    Example:
        >>> from inferframe.functions.templates import parse_template
        >>> t = parse_template("{a:left} equals {a:right}", "sem_join", sides=True)
        >>> e = pair_check(t, {"a:right": "right.a"}, model="gemma-3-270m", method="generate")
        >>> type(e).__name__
        'Expression'
    """
    from inferframe.functions.ai import classify_call

    call = classify_call(template.message(column_of), list(CHECK_LABELS),
                         system_message=instructions or CHECK_INSTRUCTIONS, **options)
    return ai_expression(_relabel(call, "sem_join.check"))


def side_message(template: Template, side: str) -> list[Expression]:
    """The message of one side's row: its one column, or ``"name: value"`` lines for several.

    Example:
        >>> from inferframe.functions.templates import parse_template
        >>> t = parse_template("{title:left} {body:left} vs {title:right}", "sem_join", sides=True)
        >>> side_message(t, "left")
        [lit('title: '), col(title), lit('\\nbody: '), col(body)]
    """
    names = template.columns(side)
    if len(names) == 1:
        return [col(names[0])]
    out: list[Expression] = []
    for i, name in enumerate(names):
        out += [lit(("\n" if i else "") + f"{name}: "), col(name)]
    return out


def side_property(template: Template, side: str, prop: str, values: list[str] | None = None, *,
                  instructions: str | None = None, examples: Any = None, **options: Any) -> Expression:
    """One side's property as a string column: one of ``values`` (``classify_text``), else a short answer.

    Parameters:
        template: the join's template.
        side: "left" or "right".
        prop: the property's name, e.g. "sentiment".
        values: the property's values; without them the model answers a short string (a JSON
            schema), lower-cased and stripped, so equal properties compare equal.
        instructions: the system message (default: asks for the property by name).
        examples: (text, value) pairs shown as demonstrations (``classify_text``'s ``examples``).
        **options: the AI function's options (provider, model, on_error, ...).

    Example:
        >>> from inferframe.functions.templates import parse_template
        >>> t = parse_template("{r:left} and {r:right} share a sentiment", "sem_join", sides=True)
        >>> e = side_property(t, "left", "sentiment", ["positive", "negative"], model="gemma-3-270m")
        >>> type(e).__name__
        'Expression'
    """
    from inferframe.functions.ai import classify_call, prompt_call

    message = side_message(template, side)
    if values is not None:
        system = instructions or (f"What is the {prop} of the text? Answer with exactly one of: "
                                  + ", ".join(values) + ".")
        call = classify_call(message, list(values), system_message=system, examples=examples,
                             confidence_column=False, **options)
        return ai_expression(_relabel(call, "sem_join.property"))
    system = instructions or f"What is the {prop} of the text? Answer with one or two words."
    schema = {"type": "object", "properties": {"value": {"type": "string", "maxLength": 24}},
              "required": ["value"], "additionalProperties": False}
    opts = dict(options)
    call = prompt_call(message, schema, system, opts.pop("provider", None), opts.pop("model", None),
                       opts.pop("use_chat_completions", None), opts)
    return ai_expression(_relabel(call, "sem_join.property")).struct.get("value").str.lower().str.strip()


def _relabel(call: Any, name: str) -> Any:
    """The call shown as ``name[model]`` in ``last_run()`` and the progress line."""
    config = dataclasses.replace(call.config, label=f"{name}[{call.config.model}]")
    return dataclasses.replace(call, args=(config, *call.args[1:]))
