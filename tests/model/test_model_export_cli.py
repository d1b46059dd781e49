"""`bookft export` on an HF folder: a round trip through the CLI (no torch needed)."""

import json

import numpy as np
import typer
from typer.testing import CliRunner

from bookft.commands.model import register
from bookft.model import ModelConfig, forward_logits, init_model, load_hf, save_hf

CONFIG = ModelConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_layers=2, num_heads=2,
                     num_kv_heads=2, compute_dtype="float32", remat="none", tie_embeddings=True)


def _app():
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # two commands, so `export` stays a sub-command
    return app


def test_export_hf_folder_round_trip(tmp_path):
    src = save_hf(init_model(CONFIG, seed=4), CONFIG, tmp_path / "src")
    (src / "tokenizer.json").write_text("{}")
    result = CliRunner().invoke(_app(), ["export", str(src), "--out", str(tmp_path / "out"), "--dtype", "bfloat16"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert (out / "tokenizer.json").is_file()
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    a, _ = load_hf(src)
    b, _ = load_hf(out)
    ids = np.arange(12, dtype=np.int32)[None] % 64
    np.testing.assert_allclose(forward_logits(b, ids), forward_logits(a, ids), atol=0.05)
    # a second export into the same folder is refused without --overwrite
    again = CliRunner().invoke(_app(), ["export", str(src), "--out", str(out)])
    assert again.exit_code != 0 and "already holds a model" in str(again.exception)
