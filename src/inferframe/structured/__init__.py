"""Structured outputs: typed Arrow columns from ``prompt(..., return_format=...)``.

Three pure pieces, all derived from one parse of the return format so they always agree:

* :func:`arrow_type_for` - the column type (struct, list, dictionary-encoded labels, ...);
* :func:`json_schema_for` / :func:`response_format_for` - the schema a server enforces while
  generating (OpenAI strict mode rules), and the request fragment that carries it;
* :class:`Validator` / :func:`repair_message` - the check every answer goes through, and the
  follow-up message when it fails.

Example:
    >>> from pydantic import BaseModel
    >>> class Item(BaseModel):
    ...     name: str
    ...     qty: int
    >>> name, schema = json_schema_for(Item)
    >>> body_fragment = response_format_for(name, schema, "chat")
    >>> value, error = Validator(Item).validate('{"name": "pen", "qty": 3}')
    >>> import pyarrow as pa
    >>> pa.array([value], type=arrow_type_for(Item)).to_pylist()
    [{'name': 'pen', 'qty': 3}]
"""

from inferframe.structured._spec import Spec, build_spec
from inferframe.structured.arrow_types import arrow_type_for
from inferframe.structured.json_schema import ENDPOINTS, json_schema_for, response_format_for
from inferframe.structured.validate import Validator, repair_message

__all__ = ["ENDPOINTS", "Spec", "Validator", "build_spec", "arrow_type_for", "json_schema_for", "repair_message", "response_format_for"]
