"""The AI functions of SQL (``ai_complete``, ``ai_classify``, ...): each one's arguments, and the Python AI function it is.

Every SQL call becomes the column expression of the Python function (``prompt``, ``classify_text``,
``sem_predicate``, ``embed_text``...), so its batching, limits, retries, cache, cost and errors as
data are those of Python. Named options are passed to that function by the same names, which checks
them (a bad value raises its own PlanError): ``system_message => '...'``, ``on_error => 'raise'``. The
old ``fail_on_error => true`` still means ``on_error => 'raise'`` for one release, with a warning.

Example:
    >>> sorted(FUNCTIONS)[:3]
    ['ai_agg', 'ai_classify', 'ai_complete']
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, col, lit
from inferframe.functions._vocabulary import sql_renamed

TEXT, CONST = "text", "const"


@dataclass(frozen=True)
class Function:
    """One SQL AI function: its parameters (name, TEXT or CONST), how many are required, and what it returns."""

    name: str
    params: tuple[tuple[str, str], ...]
    required: int
    returns: str  # for the README's table and errors
    doc: str
    aggregate: bool = False
    result: str = "{col}"  # SQL that reads the result column in the rewritten query


def options_of(fn: Function, options: dict[str, Any]) -> dict[str, Any]:
    """The SQL call's named options as the Python function's keyword arguments."""
    out = dict(options)
    if "api_key" in out:
        raise PlanError(f"{fn.name}(): a key does not belong in the query's text; set OPENAI_API_KEY, or "
                        "ifr.set_provider('openai', api_key=...), and leave api_key => ... out.")
    return sql_renamed(fn.name, out)


def expressions(fn: Function, inputs: dict[str, Any], options: dict[str, Any]) -> list[tuple[str, Expression]]:
    """The columns the call adds, in order (suffixes of its result column: "" is the result itself).

    ``inputs`` holds the TEXT parameters as column names and the CONST ones as values.
    """
    from inferframe.functions import classify_text, embed_text, prompt, sem_predicate

    opts = options_of(fn, options)
    name = fn.name
    if name in ("ai_complete", "ai_query"):
        if inputs.get("model") is not None:
            if "model" in options:
                raise PlanError(f"{name}(): the model is given twice (as an argument and as model => ...); give it once.")
            opts["model"] = _string(fn, "model", inputs["model"])
        return [("", prompt(col(inputs["prompt"]), **opts))]
    if name == "ai_classify":
        labels = inputs["labels"]
        if not isinstance(labels, list) or len(labels) < 2 or not all(isinstance(x, str) for x in labels):
            raise PlanError(f"ai_classify(): labels must be a list of two or more string constants, e.g. "
                            f"['positive', 'negative'], got {labels!r}.")
        return [("", classify_text(col(inputs["text"]), labels, **opts))]
    if name == "ai_extract":
        schema = json_schema(_string(fn, "schema", inputs["schema"]))
        opts.setdefault("system_message", "Extract the fields from the text. Answer in JSON.")
        return [("", prompt(col(inputs["text"]), schema, **opts))]
    if name == "ai_filter":
        instruction = inputs.get("instruction")
        field = "{" + inputs["predicate"] + "}"
        template = field if instruction is None else _escape(_string(fn, "instruction", instruction)) + "\nText: " + field
        return [("", sem_predicate(template, **opts))]
    if name == "ai_score":
        instruction = _string(fn, "instruction", inputs["instruction"])
        parts = [lit(instruction + "\nText: "), col(inputs["text"]),
                 lit("\nHow well does the text meet this, from 1 (not at all) to 5 (completely)? Answer 1 to 5.")]
        opts.setdefault("system_message", "Answer with one digit from 1 to 5.")
        return [("", classify_text(parts, [str(i) for i in range(1, 6)], **opts))]
    if name == "ai_embed":
        return [("", embed_text(col(inputs["text"]), **opts))]
    if name == "ai_similarity":
        # Both vectors are columns of their own, so each side's errors are data and each is cached.
        return [("_a", embed_text(col(inputs["a"]), **opts)), ("_b", embed_text(col(inputs["b"]), **opts)),
                ("", None)]  # the similarity of the two: computed by the caller over "_a" and "_b"
    raise PlanError(f"{name}() is an aggregate; it is planned with GROUP BY, not as a column.")


def similarity(left: str, right: str) -> Expression:
    """The cosine similarity of two vector columns."""
    from inferframe.functions import cosine_similarity

    return cosine_similarity(col(left), col(right))


def json_schema(text: str) -> dict:
    """A JSON schema from ai_extract's second argument: a JSON schema, or a field list ``"name, age int, tags list"``.

    Example:
        >>> json_schema("name, age int")["properties"]
        {'name': {'type': 'string'}, 'age': {'type': 'integer'}}
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as e:
            raise PlanError(f"ai_extract(): the schema is not valid JSON ({e}); pass a JSON schema or a field list "
                            "such as 'name, age int'.") from None
        if not isinstance(schema, dict):
            raise PlanError("ai_extract(): the JSON schema must be an object, e.g. '{\"type\": \"object\", ...}'.")
        return schema
    props: dict[str, dict] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        bits = item.replace(":", " ").split()
        kind = bits[1].lower() if len(bits) > 1 else "string"
        if len(bits) > 2 or kind not in _TYPES:
            raise PlanError(f"ai_extract(): cannot read the field {item!r}; write 'name' or 'name type' with type "
                            f"one of {', '.join(sorted(_TYPES))}, e.g. 'name, age int'.")
        props[bits[0]] = dict(_TYPES[kind])
    if not props:
        raise PlanError("ai_extract(): name the fields to extract, e.g. 'name, age int', or pass a JSON schema.")
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


_TYPES = MappingProxyType({
    "string": {"type": "string"}, "str": {"type": "string"}, "text": {"type": "string"},
    "varchar": {"type": "string"}, "int": {"type": "integer"}, "integer": {"type": "integer"},
    "bigint": {"type": "integer"}, "float": {"type": "number"}, "double": {"type": "number"},
    "number": {"type": "number"}, "bool": {"type": "boolean"}, "boolean": {"type": "boolean"},
    "list": {"type": "array", "items": {"type": "string"}},
})


def _string(fn: Function, param: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PlanError(f"{fn.name}(): {param} must be a non-empty string constant, got {value!r}.")
    return value


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _f(name: str, params: list[tuple[str, str]], required: int, returns: str, doc: str, **kw: Any) -> Function:
    return Function(name, tuple(params), required, returns, doc, **kw)


FUNCTIONS: MappingProxyType[str, Function] = MappingProxyType({f.name: f for f in [
    _f("ai_complete", [("prompt", TEXT), ("model", CONST)], 1, "VARCHAR", "the model's answer to the prompt"),
    _f("ai_query", [("model", CONST), ("prompt", TEXT)], 2, "VARCHAR", "ai_complete with the model first"),
    _f("ai_classify", [("text", TEXT), ("labels", CONST)], 2, "VARCHAR", "one of the labels"),
    _f("ai_extract", [("text", TEXT), ("schema", CONST)], 2, "STRUCT",
       "the fields of a JSON schema or a field list ('name, age int'), typed"),
    _f("ai_filter", [("predicate", TEXT), ("instruction", CONST)], 1, "BOOLEAN",
       "whether the statement is true (in WHERE; in JOIN ... ON: a semantic join)"),
    _f("ai_score", [("text", TEXT), ("instruction", CONST)], 2, "INTEGER", "how well the text meets it, 1 to 5",
       result="CAST({col} AS INTEGER)"),
    _f("ai_embed", [("text", TEXT)], 1, "FLOAT[]", "the text's embedding vector"),
    _f("ai_similarity", [("a", TEXT), ("b", TEXT)], 2, "FLOAT", "cosine similarity of the two texts' embeddings"),
    _f("ai_agg", [("text", TEXT), ("instruction", CONST)], 2, "VARCHAR",
       "one answer to the instruction over the group's texts (sem_agg)", aggregate=True),
    _f("ai_summarize_agg", [("text", TEXT)], 1, "VARCHAR", "a summary of the group's texts (sem_agg)",
       aggregate=True),
]})
