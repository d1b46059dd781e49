"""Bad model folders fail with a ModelError that names the file or tensor (no torch needed)."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from bookft.errors import ModelError
from bookft.model import ModelConfig, init_model, load_hf, save_hf

CONFIG = ModelConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_layers=2, num_heads=2,
                     num_kv_heads=1, compute_dtype="float32", remat="none")


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return save_hf(init_model(CONFIG), CONFIG, tmp_path_factory.mktemp("good"))


def _copy(good, tmp_path, edit_config=None, edit_tensors=None):
    cfg = json.loads((good / "config.json").read_text())
    if edit_config:
        edit_config(cfg)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    tensors = load_file(good / "model.safetensors")
    if edit_tensors:
        edit_tensors(tensors)
    save_file(tensors, tmp_path / "model.safetensors")
    return tmp_path


def test_good_folder_loads(good):
    model, config = load_hf(good)
    assert config.num_layers == 2 and config.num_kv_heads == 1


def test_no_config_json(tmp_path):
    with pytest.raises(ModelError, match=r"config\.json: missing"):
        load_hf(tmp_path)


def test_not_a_directory(tmp_path):
    with pytest.raises(ModelError, match="not a directory"):
        load_hf(tmp_path / "nope")


def test_unsupported_model_type(good, tmp_path):
    path = _copy(good, tmp_path, edit_config=lambda c: c.update(model_type="gpt2"))
    with pytest.raises(ModelError, match=r"config\.json: model_type 'gpt2' is not supported"):
        load_hf(path)


def test_remote_code_refused(good, tmp_path):
    path = _copy(good, tmp_path, edit_config=lambda c: c.update(auto_map={"AutoModel": "x.Y"}))
    with pytest.raises(ModelError, match="custom code"):
        load_hf(path)


def test_missing_tensor_named(good, tmp_path):
    path = _copy(good, tmp_path, edit_tensors=lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(ModelError, match=r"'model\.layers\.1\.mlp\.up_proj\.weight' is missing"):
        load_hf(path)


def test_misshaped_tensor_named(good, tmp_path):
    def edit(t):
        t["model.layers.0.self_attn.k_proj.weight"] = np.zeros((16, 16), np.float32)

    path = _copy(good, tmp_path, edit_tensors=edit)
    with pytest.raises(ModelError, match=r"model\.safetensors: tensor 'model\.layers\.0\.self_attn\.k_proj"
                                         r"\.weight' has shape \[16, 16\], expected \[8, 16\]"):
        load_hf(path)


def test_unexpected_tensor_named(good, tmp_path):
    def edit(t):
        t["model.layers.0.self_attn.o_proj.bias"] = np.zeros((16,), np.float32)

    path = _copy(good, tmp_path, edit_tensors=edit)
    with pytest.raises(ModelError, match=r"unexpected tensor 'model\.layers\.0\.self_attn\.o_proj\.bias'"):
        load_hf(path)


def test_pickle_checkpoint_refused(good, tmp_path):
    (tmp_path / "config.json").write_text((good / "config.json").read_text())
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(ModelError, match=r"pytorch_model\.bin: pickle checkpoints are refused"):
        load_hf(tmp_path)


def test_index_pointing_at_missing_shard(good, tmp_path):
    (tmp_path / "config.json").write_text((good / "config.json").read_text())
    index = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelError, match="model-00001-of-00002.safetensors, which is missing"):
        load_hf(tmp_path)


def test_bad_json_and_unsupported_rope(good, tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_hf(tmp_path)
    path = _copy(good, tmp_path, edit_config=lambda c: c.update(
        rope_parameters={"rope_type": "longrope", "rope_theta": 1e4}))
    with pytest.raises(ModelError, match="rope type 'longrope' is not supported"):
        load_hf(path)
