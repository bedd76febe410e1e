"""embed_image() with a CLIP-style transformers model run in this process.

No CLIP model ships on PyPI, so the tests build a small one with random weights, save it to a
directory, and load it from there exactly as a downloaded model would be loaded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import PlanError
from inferframe.functions import embed_image, embed_text

IMAGES = sorted((Path(__file__).parent.parent / "examples" / "data" / "mcq").glob("*.png"))


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    from inferframe.models.loading import packaged_minilm

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config={"vocab_size": 30522, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 64, "eos_token_id": 102},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "image_size": 32, "patch_size": 8},
        projection_dim=24,
    )
    path = tmp_path_factory.mktemp("tiny-clip")
    CLIPModel(config).save_pretrained(path)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(packaged_minilm() / name, path / name)  # a real tokenizer for the text tower
    return path


def _direct(clip_dir: Path, paths: list[Path]) -> np.ndarray:
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModel

    model = AutoModel.from_pretrained(clip_dir).eval()
    proc = AutoImageProcessor.from_pretrained(clip_dir)
    with torch.inference_mode():
        out = model.get_image_features(**proc(images=[Image.open(p).convert("RGB") for p in paths], return_tensors="pt"))
        out = getattr(out, "pooler_output", out)
    return torch.nn.functional.normalize(out, dim=-1).numpy()


def test_image_paths_bytes_and_image_columns_give_the_models_vectors(clip_dir):
    paths = [str(p) for p in IMAGES]
    data = [p.read_bytes() for p in IMAGES]
    df = ifr.from_pydict({"path": paths, "data": data}).with_columns({
        "from_path": embed_image(col("path"), model=str(clip_dir)),
        "from_bytes": embed_image(col("data"), model=str(clip_dir), batch_size=5),
        "from_image": embed_image(ifr.functions.image(col("data")), model=str(clip_dir)),
    })
    assert df.schema()["from_path"].to_arrow() == pa.list_(pa.float32(), 24)
    out = df.to_pydict()
    expected = _direct(clip_dir, IMAGES)
    for name in ("from_path", "from_bytes", "from_image"):
        np.testing.assert_allclose(np.array(out[name]), expected, atol=1e-5)
    assert out["from_path_error"] == [None] * len(IMAGES)


def test_a_bad_image_is_an_error_for_its_row_only(clip_dir, tmp_path):
    bad = tmp_path / "not-an-image.png"
    bad.write_text("hello")
    paths = [str(IMAGES[0]), str(bad), None, str(tmp_path / "missing.png")]
    out = ifr.from_pydict({"p": paths}).with_column("v", embed_image(col("p"), model=str(clip_dir))).to_pydict()
    assert len(out["v"][0]) == 24 and out["v"][1] is None and out["v"][2] is None and out["v"][3] is None
    assert out["v_error"][0] is None and out["v_error"][2] is None
    assert out["v_error"][1]["kind"] == "image" and "decode" in out["v_error"][1]["message"]
    assert out["v_error"][3]["kind"] == "image" and "missing.png" in out["v_error"][3]["message"]


def test_text_tower_shares_the_image_space(clip_dir):
    df = ifr.from_pydict({"t": ["a red square", None]}).with_column(
        "v", embed_text(col("t"), provider="transformers", model=str(clip_dir)))
    assert df.schema()["v"].to_arrow() == pa.list_(pa.float32(), 24)
    v = df.to_pydict()["v"]
    assert len(v[0]) == 24 and v[1] is None
    assert abs(np.linalg.norm(v[0]) - 1) < 1e-5


def test_clear_errors_name_what_to_do(clip_dir):
    from inferframe.models.loading import packaged_minilm

    with pytest.raises(PlanError, match=r"needs model=.*huggingface-cli download"):
        embed_image(col("p"))
    with pytest.raises(PlanError, match="no image tower"):
        embed_image(col("p"), model=str(packaged_minilm()))
    with pytest.raises(PlanError, match="provider='transformers'"):
        embed_image(col("p"), provider="openai", model="clip")
    with pytest.raises(PlanError, match="24-dimensional"):
        embed_image(col("p"), model=str(clip_dir), dimensions=512)


def test_a_numeric_column_is_a_plan_error(clip_dir):
    with pytest.raises(PlanError, match=r"input 'n' must be images .*got double"):
        ifr.from_pydict({"n": [1.0]}).with_column("v", embed_image(col("n"), model=str(clip_dir)))
