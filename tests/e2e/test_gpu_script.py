"""benchmarks/gpu.sh at a tiny size on the CPU, so the GPU script is known to run the day a GPU is there.

The script is run whole (bash, every phase a `bookft` process): a tiny Llama HF folder with a BPE
tokenizer stands in for SmolLM2 (native 256 positions, the preset's YaRN x4 over it), books of two
pages are packed at 512 tokens, 2 LoRA steps, export, NIAH at 256 and 512 (past the native length)
for base and tuned, then benchmarks/gpu_summary.py. Asserted: the JSON has both grids at every
length and depth, the train figures, and the target's verdict; the export carries the YaRN.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tiny_model(folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from bookft.ingest.sample import NAMES, WORDS
    from bookft.model import ModelConfig, init_model, save_hf

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    text = [" ".join(WORDS + NAMES)] * 20 + ["The special magic number for river-stone is: 1234567."] * 5
    tok.train_from_iterator(text, trainer)
    config = ModelConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2,
                         num_kv_heads=1, max_position_embeddings=256, compute_dtype="float32", remat="none")
    save_hf(init_model(config, seed=0), config, folder)
    tok.save(str(folder / "tokenizer.json"))


def test_gpu_script_runs_tiny_on_cpu(tmp_path):
    model = tmp_path / "model"
    _tiny_model(model)
    env = {**os.environ, "PYTHON": sys.executable, "MODEL": str(model), "WORK": str(tmp_path / "work"),
           "OUT": str(tmp_path / "out"), "SEQ_LEN": "512", "STEPS": "2", "PAGES": "2", "BOOKS": "2",
           "LENGTHS": "256,512", "DEPTHS": "0,100", "SEEDS": "0", "DTYPE": "float32", "LR": "1e-3",
           "TPU_ACCELERATOR_TYPE": "v5p-8", "TPU_WORKER_HOSTNAMES": "localhost"}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks/gpu.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    written = sorted((tmp_path / "out").glob("gpu_smollm2-135m-512_*.json"))  # <bench>_<preset>_<hw>_<date>
    assert len(written) == 1, written
    out = json.loads(written[0].read_text())
    assert out["machine"]["hardware"] and "commit" in out and "load_avg_end" in out
    for who in ("base", "tuned"):
        assert set(out["niah"][who]) == {"256", "512"}
        assert all(set(row) == {"0", "100"} for row in out["niah"][who].values())
        assert all(0.0 <= s <= 1.0 for row in out["niah"][who].values() for s in row.values())
    assert out["niah"]["score"] == "generate"  # RULER phrasing, scored on generated text
    assert out["train"]["steps"] == 2 and out["train"]["seq_len"] == 512 and out["train"]["tokens_per_s"] > 0
    assert out["train"]["mfu"] is None  # no chip table entry on a CPU
    assert out["target"]["length"] == 512 and isinstance(out["target"]["met"], bool)
    exported = json.loads((tmp_path / "work" / "export" / "config.json").read_text())
    assert exported["rope_parameters"]["rope_type"] == "yarn" and exported["max_position_embeddings"] == 1024
    assert "[gpu.sh" in proc.stdout and "summary" in proc.stdout


def test_gpu_compare_runs_tiny_on_cpu(tmp_path):
    """benchmarks/gpu_compare.py --size tiny: the kernel check, then both sides (bookft, transformers)
    train the tiny shape at 256 and 512 tokens in their own processes and probe the longest row; one
    JSON is written."""
    import pytest

    pytest.importorskip("torch")
    env = {**os.environ, "TPU_ACCELERATOR_TYPE": "v5p-8", "TPU_WORKER_HOSTNAMES": "localhost"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/gpu_compare.py"), "--size", "tiny",
                           "--results", str(tmp_path), "--budget", "1500"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = tmp_path.glob("gpu_compare_tiny_*.json")
    out = json.loads(path.read_text())
    assert out["errors"] == [], out["errors"]
    assert {(c["model"], c["seq"]) for c in out["cells"]} == {("tiny", 256), ("tiny", 512)}
    for c in out["cells"]:
        assert c["bookft"]["tokens_per_s"] > 0 and c["torch"]["tokens_per_s"] > 0 and c["bookft_over_torch"] > 0
        assert c["bookft"]["kernel"] == "xla" and c["bookft"]["mfu"] is None  # CPU: no bf16 peak, no MFU
    assert out["longest"] == {"bookft": 2048, "torch": 2048}  # 512, 1024, 2048: three probes fit
    xla = [r for r in out["kernels"] if r["kernel"] == "bookft-xla"]
    assert xla and xla[0]["max_abs_err_2k"] < 0.05 and xla[0]["fwd_bwd_s"] > 0  # ran; bf16 outputs of size ~1
    assert "versions" in out and "command" in out  # the benchrecord header
