"""The AI steps of ``sem_join``: a pair check (yes/no) over a join template, a batched check (which of
several numbered right rows satisfy it), and one side's property; ``JoinSteps`` hands them to the planner.

All are ordinary AI calls (``classify_text``, or ``prompt`` with a JSON schema), so their answers
parse by construction (label scoring, a grammar or a JSON schema of the allowed answers), and the
runtime's limits, cache, resume, errors-as-data and ``last_run()`` apply unchanged. Their labels in
``last_run()`` and the progress line are ``sem_join.check[<model>]``, ``sem_join.batch[<model>]`` and
``sem_join.property[<model>]``.

Example:
    >>> from inferframe.functions.templates import parse_template
    >>> t = parse_template("{review:left} and {review:right} agree", "sem_join", sides=True)
    >>> side_message(t, "left")
    [col(review)]
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import pyarrow as pa

from inferframe.expressions.expression import Expression, col, lit
from inferframe.functions._calls import ai_expression
from inferframe.functions.embed import embed_text
from inferframe.functions.general import concat
from inferframe.functions.templates import Field, Template
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.plan.semantic.join.batches import clean_numbers
from inferframe.plan.semantic.join.names import CANDIDATES, KEY
from inferframe.providers import secrets

CHECK_LABELS = ("yes", "no")
CHECK_INSTRUCTIONS = "Decide whether the statement is true. Answer yes or no."
BATCH_INSTRUCTIONS = ("Each numbered candidate below stands in turn for {slot} in the statement. For each one, "
                      "decide whether the statement is then true. Answer with the numbers of the candidates for "
                      "which it is true (an empty list if there are none).")
# Options of classify_text that a prompt() call does not take: dropped for the batched check.
CLASSIFY_ONLY = ("method", "examples", "examples_per_label", "calibrate", "confidence_column", "nearest_examples",
                  "label_descriptions")


def pair_check(template: Template, column_of: Mapping[str, str] | None = None, *,
               system_message: str | None = None, **options: Any) -> Expression:
    """A "yes"/"no" column: does the template, filled with a pair's values, hold?

    Parameters:
        template: the join's template (``{col:left}`` / ``{col:right}`` fields).
        column_of: the column each field reads, by ``Field.key`` (e.g. ``{"review:right": "right.review"}``).
        system_message: the system message (default: decide whether the statement is true, yes or no).
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
                         system_message=system_message or CHECK_INSTRUCTIONS, **options)
    return ai_expression(_relabel(call, "sem_join.check"))


def batch_parts(template: Template, column_of: Mapping[str, str] | None = None) -> list:
    """The batched check's message, as literal strings and column names (``Field``): the statement with
    each right field replaced by a placeholder, then the numbered candidates (the field ``candidates``).

    Adjacent literals are merged, so each string is one message part.

    Example:
        >>> from inferframe.functions.templates import parse_template
        >>> t = parse_template("{r:left} and {r:right} agree", "sem_join", sides=True)
        >>> batch_parts(t)
        ['Statement: ', Field(column='r', side=None), ' and [candidate] agree\\n\\nCandidates:\\n', Field(column='candidates', side=None)]
    """
    column_of = column_of or {}
    several = len(template.columns("right")) > 1
    out: list = ["Statement: "]
    for part in template.parts:
        if isinstance(part, Field) and part.side == "right":
            part = f"[candidate's {part.column}]" if several else "[candidate]"
        elif isinstance(part, Field):
            part = Field(column_of.get(part.key, part.column))
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        else:
            out.append(part)
    if isinstance(out[-1], str):
        out[-1] += "\n\nCandidates:\n"
    else:
        out.append("\n\nCandidates:\n")
    out.append(Field("candidates"))
    return out


def batch_check(template: Template, candidates: str, pairs_per_request: int, *,
                column_of: Mapping[str, str] | None = None, system_message: str | None = None, raw: bool = False,
                **options: Any) -> Expression:
    """A ``list<int64>`` column: the numbers (1..``pairs_per_request``) of the candidates that satisfy the template.

    The model reads the statement (right fields shown as ``[candidate]``) and the numbered right
    rows in column ``candidates``, and answers a JSON object ``{"matches": [numbers]}``, enforced by a
    JSON schema (constrained generation where the provider offers it; every answer is validated). The
    numbers are deduplicated and those outside 1..``pairs_per_request`` dropped. A failed request is a
    null list (errors as data), or stops the job with ``on_error="raise"``.

    Parameters:
        template: the join's template.
        candidates: the column of numbered candidates, one per line (``"1. text"``), see ``number_candidates``.
        pairs_per_request: the most candidates one request holds.
        column_of: the column each left field reads, by ``Field.key``.
        system_message: the system message (default: ``BATCH_INSTRUCTIONS``).
        raw: return the AI call's answer itself (a ``struct<matches: list<int64>>``), for estimates.
        **options: ``prompt()``'s options (provider, model, on_error, ...); ``classify_text``-only ones are dropped.

    Example:
        >>> from inferframe.functions.templates import parse_template
        >>> t = parse_template("{a:left} equals {a:right}", "sem_join", sides=True)
        >>> e = batch_check(t, "c", 8, model="gemma-3-270m")
        >>> type(e).__name__
        'Expression'
    """
    from inferframe.functions.ai import prompt_call

    several = len(template.columns("right")) > 1
    system = system_message or BATCH_INSTRUCTIONS.format(slot="the [candidate's ...] fields" if several else "[candidate]")
    message = [col(candidates if p == Field("candidates") else p.column) if isinstance(p, Field) else lit(p)
               for p in batch_parts(template, column_of)]
    schema = {"type": "object",
              # maxItems bounds the answer (a grammar cannot loop on one number), so it fits its max_tokens
              "properties": {"matches": {"type": "array", "maxItems": pairs_per_request,
                                         "items": {"type": "integer", "minimum": 1, "maximum": pairs_per_request}}},
              "required": ["matches"], "additionalProperties": False}
    opts = {k: v for k, v in options.items() if k not in CLASSIFY_ONLY}
    call = prompt_call(message, schema, system, opts.pop("provider", None), opts.pop("model", None),
                       opts.pop("use_chat_completions", None), opts)
    answer = ai_expression(_relabel(call, "sem_join.batch"))
    if raw:
        return answer
    return answer.struct.get("matches").apply(functools.partial(clean_numbers, top=pairs_per_request),
                                              pa.list_(pa.int64()))


def number_candidates(items: list | None) -> str | None:
    """The candidates ``"n. text"`` one per line, in the order of their numbers (whatever order they came in).

    Example:
        >>> number_candidates(["2. bad", "10. fine", "1. good"])
        '1. good\\n2. bad\\n10. fine'
    """
    if items is None:
        return None
    return "\n".join(sorted(items, key=lambda s: int(s.split(".", 1)[0])))


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
                  system_message: str | None = None, examples: Any = None, raw: bool = False,
                  **options: Any) -> Expression:
    """One side's property as a string column: one of ``values`` (``classify_text``), else a short answer.

    Parameters:
        template: the join's template.
        side: "left" or "right".
        prop: the property's name, e.g. "sentiment".
        values: the property's values; without them the model answers a short string (a JSON
            schema), lower-cased and stripped, so equal properties compare equal.
        system_message: the system message (default: asks for the property by name).
        examples: (text, value) pairs shown as demonstrations (``classify_text``'s ``examples``).
        raw: return the AI call's answer itself (so that its error column is kept); ``property_key`` makes the key.
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
        system = system_message or (f"What is the {prop} of the text? Answer with exactly one of: "
                                  + ", ".join(values) + ".")
        call = classify_call(message, list(values), system_message=system, examples=examples,
                             confidence_column=False, **options)
        answer = ai_expression(_relabel(call, "sem_join.property"))
        return answer if raw else property_key(answer, values)
    system = system_message or f"What is the {prop} of the text? Answer with one or two words."
    schema = {"type": "object", "properties": {"value": {"type": "string", "maxLength": 24}},
              "required": ["value"], "additionalProperties": False}
    opts = dict(options)
    call = prompt_call(message, schema, system, opts.pop("provider", None), opts.pop("model", None),
                       opts.pop("use_chat_completions", None), opts)
    answer = ai_expression(_relabel(call, "sem_join.property"))
    return answer if raw else property_key(answer, values)


def property_key(answer: Expression, values: list[str] | None) -> Expression:
    """The join key of a property's answer: the label, or the short answer lower-cased and stripped.

    Example:
        >>> property_key(col("a"), None)
        str.strip(str.lower(struct.get(col(a), field='value') as value))
    """
    if values is not None:
        return answer.cast(pa.string())
    return answer.struct.get("value").str.lower().str.strip()


def _relabel(call: Any, name: str) -> Any:
    """The call shown as ``name[model]`` in ``last_run()`` and the progress line."""
    config = dataclasses.replace(call.config, label=f"{name}[{call.config.model}]")
    return dataclasses.replace(call, args=(config, *call.args[1:]))


# The one call that proposes the property a statement compares (``JoinSteps.proposal``).
PROPOSE_INSTRUCTIONS = (
    "A join keeps the pairs of texts (A, B) for which a statement holds. Decide whether the statement only compares "
    "one property that each text has on its own (for example its sentiment, topic, author or language), so that "
    "each text could be labelled alone and the pairs found by comparing the labels. If so, name that property in "
    "one to three words and the comparison: equal, different or opposite. If the statement needs both texts at "
    "once, answer the property \"\" and the comparison none.")
PROPOSAL_SCHEMA = {"type": "object",
             "properties": {"property": {"type": "string", "maxLength": 40},
                            "comparison": {"type": "string", "enum": ["equal", "different", "opposite", "none"]}},
             "required": ["property", "comparison"], "additionalProperties": False}


@dataclasses.dataclass
class JoinSteps:
    """The AI steps of one join (``plan.semantic.join.Steps``): plain data (the template, the options) whose methods
    build the AI expressions the planner asks for; building them reads no data and sends no request.

    Parameters:
        template: the join's template.
        column_of: the column each field reads in the joined rows, by ``Field.key``.
        options: ``classify_text``'s options for every model call.
        check_message: the pair check's (and batched check's) system message, or None (the default).
        property_options: the property's extra options (its ``system_message``, ``examples``).
        embed_options: ``embed_text``'s options for blocking.
        pairs_per_request: right rows per batched request (already fitted to the answer's max_tokens).

    Example:
        >>> from inferframe.functions.templates import parse_template
        >>> t = parse_template("{r:left} and {r:right} agree", "sem_join", sides=True)
        >>> steps = JoinSteps(t, {"r:left": "r", "r:right": "right.r"}, {"model": "gemma-3-270m"}, None, {}, {}, 8)
        >>> steps.model, steps.statement, steps.raise_first
        ('gemma-3-270m', 'A and B agree', False)
    """

    template: Template
    column_of: dict
    options: dict
    check_message: str | None
    property_options: dict
    embed_options: dict
    pairs_per_request: int

    def __post_init__(self):
        self.check = pair_check(self.template, self.column_of, system_message=self.check_message, **self.options)
        self.batch = batch_check(self.template, CANDIDATES, self.pairs_per_request,
                                 system_message=self.check_message, raw=True, **self.options)
        self.model = call_of(self.check).config.model
        self.raise_first = self.options.get("on_error") == "raise"
        self.statement = "".join(("A" if p.side == "left" else "B") if isinstance(p, Field) else p
                                 for p in self.template.parts)
        # A key given as an option stays out of the plan's pickle: its handle travels, as an AI call's does.
        self.options, self.embed_options = dict(self.options), dict(self.embed_options)
        self.key_refs = {name: secrets.put(opts.pop("api_key")) for name, opts in
                         (("options", self.options), ("embed_options", self.embed_options))
                         if isinstance(opts.get("api_key"), str)}

    def _options(self, name: str = "options") -> dict:
        """The options as the user gave them (the key read back from its handle)."""
        opts = dict(getattr(self, name))
        if name in self.key_refs:
            opts["api_key"] = secrets.get(self.key_refs[name])
        return opts

    def prop(self, side: str, prop: str, values: list | None) -> Expression:
        return side_property(self.template, side, prop, values, raw=True, **{**self._options(), **self.property_options})

    def key(self, values: list | None) -> Expression:
        return property_key(col(KEY), values)

    def embed(self, side: str) -> Expression:
        parts = side_message(self.template, side)
        return embed_text(parts[0] if len(parts) == 1 else concat(*parts), **self._options("embed_options"))

    def round_check(self, size: int) -> Expression:
        """The batched check's raw answer for ``size`` candidates, failures kept as data (split, or counted)."""
        opts = {**self._options(), "on_error": "null", "error_column": True}
        return batch_check(self.template, CANDIDATES, size, system_message=self.check_message, raw=True, **opts)

    def proposal(self) -> Expression:
        """The one call that proposes the property the statement compares, over column ``q``."""
        from inferframe.functions.ai import prompt

        opts = {k: v for k, v in self._options().items() if k not in CLASSIFY_ONLY and k != "on_error"}
        return prompt(col("q"), return_format=PROPOSAL_SCHEMA, system_message=PROPOSE_INSTRUCTIONS, **opts)


def call_of(expr: Expression) -> Any:
    """The AI call an expression makes (its first argument's, through e.g. ``.str.lower()``)."""
    node = expr._node
    while ai_call_of(node) is None and node.children():
        node = node.children()[0]
    return ai_call_of(node).udf.call
