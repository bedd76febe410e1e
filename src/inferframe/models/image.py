"""Image embeddings computed in this process by a CLIP-style model (transformers), loaded once per worker.

A row whose image cannot be read or decoded gets a null vector and its error (kind "image") in
``<name>_error``; with on_error="raise" it stops the job before the batch runs through the model.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import embed_image
    >>> df = ifr.from_glob_path("photos/*.jpg")  # doctest: +SKIP
    >>> df = df.with_column("v", embed_image(ifr.col("path"), model="openai/clip-vit-base-patch32"))  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from inferframe.ai.columns import ERROR_TYPE, USAGE_TYPE
from inferframe.errors import ErrorKind, PlanError, RowFailed
from inferframe.models.loading import read_json_file, offline, pick_device
from inferframe.ai.vectors import to_vectors
from inferframe.series import Series

INSTALL_HINT = ('embed_image() runs a CLIP-style model in this process. Install the libraries with '
            'pip install "inferframe[embed]", download a model once (e.g. huggingface-cli download '
            'openai/clip-vit-base-patch32) and pass model="openai/clip-vit-base-patch32" or a local directory.')


def image_dimensions(path: Path) -> int:
    """The size of a CLIP-style model's image vectors, from its config (no weights loaded)."""
    cfg = read_json_file(path / "config.json") or {}
    if isinstance(cfg.get("projection_dim"), int) and "vision_config" in cfg:
        return cfg["projection_dim"]
    if "vision_config" in cfg and isinstance(cfg["vision_config"].get("hidden_size"), int):
        return cfg["vision_config"]["hidden_size"]  # SigLIP-style: pooled vision output, no projection
    raise PlanError(f"The model in {str(path)!r} has no image tower (its config has no vision_config); "
                    f"embed_image() needs a CLIP-style model. {INSTALL_HINT}")


class ClipImageEmbedder:
    """A CLIP-style transformers model whose image tower embeds each row's image.

    Parameters:
        path: the model's directory (or a name already in the local Hugging Face cache).
        device: "cpu", "cuda", "mps" or None to pick the best one present.
        normalize: L2-normalise the vectors (so a dot product is the cosine similarity).
        on_error: "null" keeps an unreadable image as its row's error; "raise" stops at the first one.

    Example:
        >>> e = ClipImageEmbedder("/models/clip-vit-base-patch32")  # doctest: +SKIP
    """

    def __init__(self, path: str, *, device: str | None = None, normalize: bool = True, on_error: str = "null") -> None:
        with offline():
            from transformers import AutoImageProcessor, AutoModel

            self.processor = AutoImageProcessor.from_pretrained(path)
            self.device = pick_device(device)
            self.model = AutoModel.from_pretrained(path).to(self.device).eval()
        self.size = image_dimensions(Path(path))
        self.normalize = normalize
        self.on_error = on_error

    def embed(self, images: Series) -> pa.Array:
        import torch

        from inferframe.file import File
        from inferframe.media.image import decode

        values = images.to_pylist()
        pics, rows, errors = [], [], [None] * len(values)
        for i, v in enumerate(values):
            if v is None:
                continue
            try:
                pics.append(decode(File(v).read()).convert("RGB"))
                rows.append(i)
            except Exception as e:  # one unreadable image is data for its row, not the end of the query
                errors[i] = {"kind": ErrorKind.IMAGE.value, "message": f"{type(e).__name__}: {e}", "status": None, "attempts": 0, "raw": None}
                if self.on_error == "raise":
                    raise RowFailed.of(errors[i]) from e
        vectors = np.zeros((0, self.size), dtype=np.float32)
        if pics:
            with torch.inference_mode():
                inputs = self.processor(images=pics, return_tensors="pt").to(self.device)
                feats = self.model.get_image_features(**inputs)
                feats = getattr(feats, "pooler_output", feats)
                if self.normalize:
                    feats = torch.nn.functional.normalize(feats, dim=-1)
                vectors = feats.float().cpu().numpy()
        nulls = np.ones(len(values), dtype=bool)
        nulls[rows] = False
        value = to_vectors(vectors, nulls, self.size)
        error = pa.array(errors, type=ERROR_TYPE)
        usage = pa.nulls(len(values), USAGE_TYPE)
        return pa.StructArray.from_arrays([value, error, usage], names=["value", "error", "usage"])
