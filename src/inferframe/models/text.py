"""Text embeddings computed in this process by sentence-transformers or transformers models.

The model is loaded once per worker instance and fed batches of rows; the vector size is read from
the model's files at plan time, so the column type is exact before anything runs. Each batch comes
back as struct{value, error, usage}: an empty text has no vector and is an error of kind "input"
for its row, as over an API (with on_error="raise", the end of the job).

Example:
    >>> import inferframe as ifr
    >>> from inferframe.models.loading import model_files
    >>> e = SentenceTransformerEmbedder(str(model_files(None)))
    >>> out = e.embed(ifr.Series.from_pylist(["a cat", ""]))
    >>> out.field("value").type, out.field("error").to_pylist()[1]["kind"]
    (FixedSizeListType(fixed_size_list<item: float>[384]), 'input')
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from inferframe.ai.columns import ERROR_TYPE, USAGE_TYPE
from inferframe.ai.embed import EMPTY_TEXT
from inferframe.errors import ErrorKind, PlanError, RowFailed
from inferframe.models.loading import offline, pick_device
from inferframe.observe.stats import RunCounters, RunStats
from inferframe.ai.vectors import combine_chunks, to_vectors, unit_rows
from inferframe.series import Series

_LOADED: dict = {}  # (class, path, device) -> loaded model, reused by later queries in this process
_LOAD_LOCK = threading.Lock()


def shared_model(key: tuple, load):
    """The model for ``key``, loaded once per process: a second query does not read the weights again."""
    with _LOAD_LOCK:
        if key not in _LOADED:
            _LOADED[key] = load()
        return _LOADED[key]


class _Embedder:
    """What both in-process embedders share: null handling, chunking of long texts, shortening."""

    tokenizer: Any
    max_tokens: int

    def __init__(self, *, normalize: bool, dimensions: int, encode_batch_size: int, long_inputs: str,
                 label: str, counters: RunCounters | None = None, on_error: str = "null") -> None:
        self.stats = RunStats(label=label)  # the job's progress line and last_run() count these rows too
        # The run's counters (built by ``for_run``); a worker process sends its own to the driver with every result.
        (counters if counters is not None else RunCounters()).add(self.stats)
        self.normalize = normalize
        self.dimensions = dimensions
        self.encode_batch_size = encode_batch_size
        self.long_inputs = long_inputs
        self.on_error = on_error

    @classmethod
    def for_run(cls, services: Any, *args: Any, **kwargs: Any) -> "_Embedder":
        """Build for one run: count rows in the run's counters."""
        return cls(*args, counters=services.counters if services is not None else None, **kwargs)

    def embed(self, texts: Series) -> pa.StructArray:
        """struct{value, error, usage} per row: the vector, or null and the row's error (no usage: nothing is billed)."""
        values = texts.to_pylist()
        errors: list[dict | None] = [None] * len(values)
        for i in (range(len(values)) if "" in values else ()):  # the scan in C first: most batches have none
            if values[i] == "":
                errors[i] = {"kind": ErrorKind.INPUT.value, "message": EMPTY_TEXT, "status": None, "attempts": 0,
                             "raw": None}
                if self.on_error == "raise":  # before the batch is encoded: the job stops anyway
                    self.stats.errors += 1
                    raise RowFailed.of(errors[i])
                values[i] = None
        self.stats.in_flight += len(values)
        try:
            vectors = self._embed(values)
        finally:
            self.stats.in_flight -= len(values)
        self.stats.rows_done += len(values)
        failed = len(values) - errors.count(None)
        self.stats.errors += failed
        error = pa.array(errors, type=ERROR_TYPE) if failed else pa.nulls(len(values), ERROR_TYPE)
        return pa.StructArray.from_arrays([vectors, error, pa.nulls(len(values), USAGE_TYPE)],
                                          names=["value", "error", "usage"])

    def vectors(self, texts: list[str]) -> np.ndarray:
        """(texts, dim) float32 vectors of non-null texts, long texts chunked and pooled as ``embed`` does (no counting)."""
        arr = self._embed(list(texts))
        return np.asarray(arr.values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(len(texts), -1)

    def _embed(self, values: list) -> pa.Array:
        nulls = np.array([v is None for v in values], dtype=bool)
        present = [str(v) for v in values if v is not None]
        if not present:
            return to_vectors(np.zeros((0, self.dimensions), np.float32), nulls, self.dimensions)
        # A token covers at least one byte, so texts of no more bytes than the window needs no tokenizing here.
        if self.long_inputs == "chunk" and max(len(t.encode()) for t in present) > self.max_tokens - 2:
            chunks, owners, weights = self._chunks(present)
            if len(chunks) > len(present):
                vectors = combine_chunks(self._encode(chunks), owners, weights, len(present), self.normalize)
                return to_vectors(self._shorten(vectors), nulls, self.dimensions)
        return to_vectors(self._shorten(self._encode(present)), nulls, self.dimensions)

    def _chunks(self, texts: list[str]) -> tuple[list[str], list[int], list[int]]:
        """Split texts longer than the model's window at token boundaries (character offsets kept)."""
        enc = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        room = max(8, self.max_tokens - 2)  # the model adds [CLS] and [SEP]
        chunks, owners, weights = [], [], []
        for i, (text, offsets) in enumerate(zip(texts, enc["offset_mapping"])):
            if len(offsets) <= room:
                chunks.append(text), owners.append(i), weights.append(max(1, len(offsets)))
                continue
            for start in range(0, len(offsets), room):
                window = offsets[start:start + room]
                chunks.append(text[window[0][0]:window[-1][1]]), owners.append(i), weights.append(len(window))
        return chunks, owners, weights

    def _shorten(self, vectors: np.ndarray) -> np.ndarray:
        if vectors.shape[1] == self.dimensions:
            return vectors
        short = vectors[:, :self.dimensions]
        return (unit_rows(short) if self.normalize else short).astype(np.float32)

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


class SentenceTransformerEmbedder(_Embedder):
    """A sentence-transformers model, loaded once per instance (offline, on a GPU where there is one).

    Parameters:
        path: the model's directory (or a name already in the local Hugging Face cache).
        device: "cpu", "cuda", "mps" or None to pick the best one present.
        on_error: "null" keeps a failed row (an empty text) as data; "raise" stops at the first one.

    Example:
        >>> from inferframe.models.loading import model_files
        >>> e = SentenceTransformerEmbedder(str(model_files(None)))
        >>> e.dimensions
        384
    """

    def __init__(self, path: str, *, device: str | None = None, normalize: bool = True, dimensions: int | None = None,
                 encode_batch_size: int = 32, long_inputs: str = "chunk", label: str = "embed",
                 counters: RunCounters | None = None, on_error: str = "null") -> None:
        def load():
            with offline():
                from sentence_transformers import SentenceTransformer

                return SentenceTransformer(path, device=pick_device(device)).eval()

        self.model = shared_model(("st", path, device), load)
        self.tokenizer = self.model.tokenizer
        self.max_tokens = int(self.model.max_seq_length)
        size = dimensions or int(self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension")
                                 else self.model.get_sentence_embedding_dimension())
        super().__init__(normalize=normalize, dimensions=size, encode_batch_size=encode_batch_size, long_inputs=long_inputs,
                         label=label, counters=counters, on_error=on_error)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=self.encode_batch_size, convert_to_numpy=True,
                                 normalize_embeddings=self.normalize, show_progress_bar=False)


class TransformersEmbedder(_Embedder):
    """A plain transformers encoder with attention-masked mean pooling, loaded once per instance.

    Parameters:
        path: the model's directory (or a name already in the local Hugging Face cache).
        device: "cpu", "cuda", "mps" or None to pick the best one present.
        on_error: "null" keeps a failed row (an empty text) as data; "raise" stops at the first one.

    Example:
        >>> from inferframe.models.loading import model_files
        >>> e = TransformersEmbedder(str(model_files(None)))
        >>> e.width
        384
    """

    def __init__(self, path: str, *, device: str | None = None, normalize: bool = True, dimensions: int | None = None,
                 encode_batch_size: int = 32, long_inputs: str = "chunk", label: str = "embed",
                 counters: RunCounters | None = None, on_error: str = "null") -> None:
        with offline():  # torch loads here: with its OpenMP threads asleep (``offline``)
            self.device = pick_device(device)

        def load():
            with offline():
                from transformers import AutoModel, AutoTokenizer

                return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).to(self.device).eval()

        self.unit_vectors = normalize  # each pooled vector scaled to length 1 (before any shortening)
        self.tokenizer, self.model = shared_model(("tf", path, self.device), load)
        cfg = self.model.config
        # A CLIP-style model embeds text with its text tower, into the space its images share.
        self.clip = hasattr(self.model, "get_text_features") and hasattr(cfg, "vision_config")
        text_cfg = getattr(cfg, "text_config", cfg) if self.clip else cfg
        limit = getattr(text_cfg, "max_position_embeddings", 512)
        self.max_tokens = int(min(limit, self.tokenizer.model_max_length or limit))
        self.width = int(cfg.projection_dim if self.clip else cfg.hidden_size)
        super().__init__(normalize=normalize, dimensions=dimensions or self.width,
                         encode_batch_size=encode_batch_size, long_inputs=long_inputs,
                         label=label, counters=counters, on_error=on_error)

    def _encode(self, texts: list[str]) -> np.ndarray:
        import torch

        # Sorting by length keeps padding small, as sentence-transformers does.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.width), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self.encode_batch_size):
                idx = order[start:start + self.encode_batch_size]
                enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                     max_length=self.max_tokens, return_tensors="pt").to(self.device)
                if self.clip:
                    pooled = self.model.get_text_features(**enc)
                    pooled = getattr(pooled, "pooler_output", pooled)
                else:
                    hidden = self.model(**enc).last_hidden_state
                    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                if self.unit_vectors:
                    pooled = torch.nn.functional.normalize(pooled, dim=1)
                out[idx] = pooled.float().cpu().numpy()
        return out


class MeanPooled(NamedTuple):
    """What a sentence-transformers model of an encoder, mean pooling and (or not) a unit norm does on top of it."""

    max_seq_length: int
    normalizes: bool


_PLAIN_MODULES = ("Transformer", "Pooling")
_OTHER_POOLING = ("cls_token", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")


def mean_pooled(path: str) -> MeanPooled | None:
    """How a sentence-transformers model directory pools, when it is only an encoder at its root, mean pooling
    and an optional unit norm, with no prompt, lower-casing or loading arguments; None for anything else.

    Example:
        >>> from inferframe.models.loading import model_files
        >>> mean_pooled(str(model_files(None)))
        MeanPooled(max_seq_length=256, normalizes=True)
    """
    root = Path(path)

    def read(name: str) -> dict | list | None:
        try:
            return json.loads((root / name).read_text())
        except (OSError, ValueError):
            return None

    modules, bert, pooling = read("modules.json"), read("sentence_bert_config.json"), read("1_Pooling/config.json")
    if not isinstance(modules, list) or not isinstance(bert, dict) or not isinstance(pooling, dict):
        return None
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds not in (list(_PLAIN_MODULES), [*_PLAIN_MODULES, "Normalize"]) or modules[0].get("path") not in ("", None) \
            or modules[1].get("path") != "1_Pooling":
        return None
    if set(bert) - {"max_seq_length", "do_lower_case"} or bert.get("do_lower_case") \
            or not isinstance(bert.get("max_seq_length"), int):
        return None
    if not pooling.get("pooling_mode_mean_tokens") or any(pooling.get(f"pooling_mode_{m}") for m in _OTHER_POOLING) \
            or pooling.get("include_prompt") is False:
        return None
    st = read("config_sentence_transformers.json") or {}
    if not isinstance(st, dict) or st.get("prompts") or st.get("default_prompt_name"):
        return None
    return MeanPooled(bert["max_seq_length"], kinds[-1] == "Normalize")


class MeanPooledSentenceTransformer(TransformersEmbedder):
    """A sentence-transformers model that is an encoder with mean pooling (``mean_pooled``), run through transformers.

    The vectors are sentence-transformers' own (within 2e-7 on the packaged MiniLM, ``tests/test_embed_inprocess.py``),
    without importing sentence-transformers, which cost 2-3 CPU-s of every process that loaded the model (it
    imports scikit-learn and more of transformers). The registry picks it for such a model under
    ``provider="sentence_transformers"``; any other model there runs on ``SentenceTransformerEmbedder``.

    Parameters: as ``TransformersEmbedder``'s.

    Example:
        >>> from inferframe.models.loading import model_files
        >>> e = MeanPooledSentenceTransformer(str(model_files(None)))
        >>> e.max_tokens, e.width
        (256, 384)
    """

    def __init__(self, path: str, *, normalize: bool = True, **options: Any) -> None:
        plain = mean_pooled(path)
        if plain is None:
            raise PlanError(f"{path} is not a sentence-transformers encoder with mean pooling only: "
                            "run it on SentenceTransformerEmbedder (embed_text chooses by itself)")
        super().__init__(path, normalize=normalize, **options)
        self.max_tokens = min(self.max_tokens, plain.max_seq_length)  # where sentence-transformers truncates
        self.unit_vectors = normalize or plain.normalizes  # its Normalize module runs whatever encode() was asked
