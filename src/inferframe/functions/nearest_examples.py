"""``classify_text(examples=..., nearest_examples=k)``: each row's demonstrations are its k nearest examples per label.

The demonstrations column is computed in this process by ``NearestDemos`` (``inferframe.ai.nearest``)
with the embedding model ``resolve_model`` finds; this module builds its expression.

Example:
    >>> import inferframe as ifr
    >>> pairs = [("a football match", "sport"), ("the tennis final", "sport"),
    ...          ("a bowl of pasta", "food"), ("fresh bread", "food")]
    >>> df = ifr.from_pydict({"t": ["a rugby game"]})
    >>> demos = df.with_column("d", nearest_demonstrations(ifr.col("t"), pairs, 1)).to_pydict()["d"][0]
    >>> demos.count("Label: food"), demos.endswith("Text: a football match\\nLabel: sport\\n\\nText: ")
    (1, True)
"""

from __future__ import annotations

import pyarrow as pa

from inferframe.ai.nearest import NearestDemos
from inferframe.expressions.expression import Expression, to_node
from inferframe.expressions.nodes import UDFCall
from inferframe.expressions.udf import ClassSpec
from inferframe.expressions.udf_spec import UDFSpec
from inferframe.models.registry import resolve_model

__all__ = ["nearest_demonstrations"]


def nearest_demonstrations(text: Expression, pairs: list[tuple[str, str]], k: int, *,
                           embed_model: str | None = None) -> Expression:
    """A string column: per row, the ``k`` examples of each label most similar to it, as demonstrations.

    Parameters:
        text: the row's text.
        pairs: the labelled examples to choose from.
        k: examples per label (at most the smallest label's count).
        embed_model: the in-process embedding model (default: the packaged all-MiniLM-L6-v2).

    The text ends with "Text: ", ready for the row; the most similar example of each label comes
    last (nearest the row). A null or empty row gets no demonstrations.
    """
    ref = resolve_model("classify_text", "sentence_transformers", embed_model, kind="text", options={})
    owner = ClassSpec(NearestDemos, (ref.path,), {"embedder": ref.runner, "examples": tuple(pairs), "k": int(k),
                                                  "label": f"nearest examples[{ref.model}]"})
    spec = UDFSpec(name="classify_text[nearest examples]", fn=NearestDemos.demos, return_dtype=pa.string(),
                   is_batch=True, batch_size=1024, owner=owner, layout=(("expr", 0),))
    return Expression(UDFCall(spec, (to_node(text),)))
