"""The operator of ``classify_text(examples=..., nearest_examples=k)``: each row's k nearest examples per label.

The examples and the rows are embedded in this process by the model resolved when the plan was
built (the packaged all-MiniLM-L6-v2 by default; its class comes with the call); per row,
the k most similar examples of every label are written as demonstrations ("Text: ...\\nLabel: ...")
in a string column that goes before the row in the prompt. The instructions (the system message)
stay first and constant, so a server's prompt cache still serves them; the demonstrations differ
per row, which is the price of choosing them per row.

Example:
    >>> import inferframe as ifr
    >>> pairs = [("a football match", "sport"), ("the tennis final", "sport"),
    ...          ("a bowl of pasta", "food"), ("fresh bread", "food")]
    >>> from inferframe.models.registry import resolve_model
    >>> ref = resolve_model("classify_text", "sentence_transformers", None, kind="text", options={})
    >>> demos = NearestDemos(ref.path, embedder=ref.runner, examples=tuple(pairs), k=1)
    >>> out = demos.demos(ifr.Series.from_pylist(["a rugby game"])).to_pylist()[0]
    >>> out.count("Label: food"), out.endswith("Text: a football match\\nLabel: sport\\n\\nText: ")
    (1, True)
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.ai.examples import demonstrations, nearest
from inferframe.ai.head import TextEmbedder
from inferframe.observe.stats import RunCounters
from inferframe.series import Series

__all__ = ["NearestDemos"]


class NearestDemos:
    """Embeds the examples once, then writes each row's nearest ones as demonstrations.

    Parameters:
        path: the embedding model's directory.
        embedder: the class that runs it (``TextEmbedder``; the resolved ``ModelRef.runner``).
        examples: (text, label) pairs to choose from.
        k: examples per label per row.
        counters: the run's counters (the rows embedded here show on the progress line).
    """

    def __init__(self, path: str, *, embedder: type, examples: tuple, k: int, label: str = "nearest examples",
                 counters: RunCounters | None = None) -> None:
        self.embedder: TextEmbedder = embedder(path, normalize=True, label=label, counters=counters)
        self.examples = tuple(examples)
        self.k = k
        self.vectors = self.embedder.vectors([t for t, _ in self.examples])
        self.labels = [label for _, label in self.examples]

    @classmethod
    def for_run(cls, services: Any, *args: Any, **kwargs: Any) -> "NearestDemos":
        """Build for one run: the rows embedded here are counted in the run's counters."""
        return cls(*args, counters=services.counters if services is not None else None, **kwargs)

    def demos(self, texts: Series) -> pa.Array:
        """Per row, its demonstrations text (null for a null row)."""
        values = texts.to_pylist()
        bare = demonstrations(None)[0]  # "Text: ": a row with nothing to compare gets no examples
        out: list[str | None] = [None if v is None else bare for v in values]
        present = [i for i, v in enumerate(values) if v is not None and str(v).strip()]
        if present:
            picks = nearest(self.embedder.vectors([str(values[i]) for i in present]), self.vectors, self.k,
                            example_labels=self.labels)
            for i, row in zip(present, picks):
                # Most similar first from nearest(): reversed, so the closest demonstrations sit next to the row.
                out[i] = demonstrations([self.examples[j] for j in row[::-1]])[0]
            self.embedder.stats.rows_done += len(present)
        return pa.array(out, pa.string())
