"""model.rope_scaling: a context extension put over a loaded HF model's RoPE (how a preset extends
SmolLM2 from its native 8K, configs/smollm2-135m-cpu.yaml). The extended model equals transformers
built with the same scaling, the export carries it, and loading the export with the same preset
gives the same RoPE again."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_tiny import make_hf_model, torch_logits  # noqa: E402

from bookft.config import from_dict  # noqa: E402
from bookft.errors import ConfigError  # noqa: E402
from bookft.model import ModelConfig, forward_logits, load_hf, save_hf  # noqa: E402
from bookft.model.config import RopeScaling  # noqa: E402

NATIVE = 16  # the tiny model's max_position_embeddings: positions past it are the extension


def _inputs(s: int = 48):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 300, (2, s)).astype(np.int32)
    return ids, np.tile(np.arange(s, dtype=np.int32), (2, 1))


@pytest.mark.parametrize("scaling", [
    {"type": "yarn", "factor": 4.0},
    {"type": "linear", "factor": 2.0},
    {"type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 2.0},
])
def test_scaling_over_a_folder_equals_transformers(tmp_path, scaling):
    from transformers import AutoModelForCausalLM

    make_hf_model("llama", max_position_embeddings=NATIVE, seed=5).save_pretrained(tmp_path / "base")
    like = from_dict(ModelConfig, {"rope_scaling": scaling, "compute_dtype": "float32"}, "model")
    model, config = load_hf(tmp_path / "base", like=like)
    assert config.rope.type == scaling["type"] and config.rope.factor == scaling["factor"]
    assert config.max_position_embeddings == int(NATIVE * scaling["factor"])
    if scaling["type"] in ("yarn", "llama3"):
        assert config.rope.original_max_position_embeddings == NATIVE
    assert config.rope.theta == 10000.0  # the folder's theta stays

    # transformers with the same scaling written into the folder's config
    ref_dir = tmp_path / "ref"
    make_hf_model("llama", max_position_embeddings=NATIVE, seed=5).save_pretrained(ref_dir)
    cfg = json.loads((ref_dir / "config.json").read_text())
    params = {"rope_type": scaling["type"], "rope_theta": 10000.0, "factor": scaling["factor"]}
    if scaling["type"] in ("yarn", "llama3"):
        params["original_max_position_embeddings"] = NATIVE
    if scaling["type"] == "llama3":
        params.update(low_freq_factor=1.0, high_freq_factor=2.0)
    cfg.update(rope_parameters=params, max_position_embeddings=int(NATIVE * scaling["factor"]))
    (ref_dir / "config.json").write_text(json.dumps(cfg))
    hf = AutoModelForCausalLM.from_pretrained(ref_dir).eval()
    ids, pos = _inputs()
    ours = forward_logits(model, ids, pos)
    np.testing.assert_allclose(ours, torch_logits(hf, ids, pos), atol=1e-4, rtol=0)
    plain, _ = load_hf(tmp_path / "base")
    assert np.abs(forward_logits(plain, ids, pos) - ours).max() > 1e-3  # the scaling acts

    # the export carries the scaling; the same preset over the export gives the same RoPE again
    out = save_hf(model, config, tmp_path / "out")
    written = json.loads((out / "config.json").read_text())
    assert written["rope_parameters"]["rope_type"] == scaling["type"]
    assert written["max_position_embeddings"] == int(NATIVE * scaling["factor"])
    reloaded = AutoModelForCausalLM.from_pretrained(out).eval()  # transformers reads the scaling back
    np.testing.assert_allclose(torch_logits(reloaded, ids, pos), ours, atol=1e-4, rtol=0)
    again, again_cfg = load_hf(out, like=like)
    assert again_cfg.rope == config.rope and again_cfg.max_position_embeddings == config.max_position_embeddings
    np.testing.assert_allclose(forward_logits(again, ids, pos), ours, atol=1e-5, rtol=0)


def test_scaling_must_extend():
    with pytest.raises(ConfigError, match="rope_scaling.factor must be > 1"):
        from_dict(RopeScaling, {"factor": 1.0}, "model.rope_scaling")


def test_scaling_without_a_loaded_model_is_refused():
    from bookft.train.config import RunConfig
    from bookft.train.program import resolve_model_config

    cfg = from_dict(RunConfig, {"model": {"rope_scaling": {"type": "yarn", "factor": 4.0}}})
    with pytest.raises(ConfigError, match="model.rope_scaling extends a loaded model's RoPE"):
        resolve_model_config(cfg, None)
