"""Round trips: HF -> load_hf -> save_hf -> transformers gives the same logits; LoRA merged on export."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402
from hf_tiny import make_hf_model, torch_logits  # noqa: E402

from bookft.model import LoraConfig, forward_logits, load_hf, merge_lora, save_hf  # noqa: E402


def _ids(s=20):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 300, (2, s)).astype(np.int32)
    return ids, np.tile(np.arange(s, dtype=np.int32), (2, 1))


@pytest.fixture(scope="module")
def qwen2_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen2")
    make_hf_model("qwen2", {"rope_type": "linear", "factor": 2.0}).save_pretrained(path)
    (path / "tokenizer.json").write_text('{"fake": "tokenizer"}')
    return path


def test_save_hf_loads_in_transformers(qwen2_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    model, config = load_hf(qwen2_dir)
    ids, pos = _ids()
    ours = forward_logits(model, ids, pos)
    out = save_hf(model, config, tmp_path / "out", tokenizer_dir=qwen2_dir, max_shard_bytes=60_000)
    files = sorted(p.name for p in out.iterdir())
    assert "tokenizer.json" in files and "model.safetensors.index.json" in files
    shards = [f for f in files if f.startswith("model-") and f.endswith(".safetensors")]
    assert len(shards) > 1  # sharded above max_shard_bytes
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(shards)
    hf_cfg = json.loads((out / "config.json").read_text())
    assert hf_cfg["rope_parameters"] == {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    np.testing.assert_allclose(torch_logits(hf, ids, pos), ours, atol=1e-4, rtol=0)
    again, _ = load_hf(out)  # and back into ours
    np.testing.assert_allclose(forward_logits(again, ids, pos), ours, atol=1e-5, rtol=0)


def test_lora_merged_export_matches_unmerged_forward(qwen2_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    base, cfg = load_hf(qwen2_dir)
    lora = LoraConfig(rank=4, alpha=8.0, targets=("q", "k", "v", "o", "gate", "up", "down"))
    model, config = load_hf(qwen2_dir, like=__import__("dataclasses").replace(cfg, lora=lora))
    ids, pos = _ids()
    # B starts at zero: LoRA must not change the function until trained
    np.testing.assert_allclose(forward_logits(model, ids, pos), forward_logits(base, ids, pos), atol=1e-6)
    rng = np.random.default_rng(3)  # host random: eager jax.random would compile once per shape
    for target in lora.targets:
        var = getattr(model.layers, f"lora_{target}_b")
        var.set_value(jnp.asarray(0.05 * rng.standard_normal(var.shape, dtype=np.float32)))
    unmerged = forward_logits(model, ids, pos)
    assert np.abs(unmerged - forward_logits(base, ids, pos)).max() > 1e-2
    np.testing.assert_allclose(forward_logits(merge_lora(model), ids, pos), unmerged, atol=1e-4, rtol=0)
    out = save_hf(model, config, tmp_path / "merged")
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen2"
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    np.testing.assert_allclose(torch_logits(hf, ids, pos), unmerged, atol=1e-4, rtol=0)


def test_bf16_export_and_theta_override(qwen2_dir, tmp_path):
    import dataclasses

    model, config = load_hf(qwen2_dir, dtype="bfloat16")
    assert model.embed[...].dtype == jnp.bfloat16
    config = dataclasses.replace(config, rope_theta_override=5e5)
    out = save_hf(model, config, tmp_path / "bf16")
    hf_cfg = json.loads((out / "config.json").read_text())
    assert hf_cfg["dtype"] == "bfloat16" and hf_cfg["rope_parameters"]["rope_theta"] == 5e5
    from safetensors import safe_open

    with safe_open(out / "model.safetensors", framework="numpy") as f:
        assert str(f.get_tensor("model.embed_tokens.weight").dtype) == "bfloat16"
