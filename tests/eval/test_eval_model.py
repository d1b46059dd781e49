"""Eval driven by the real bookft Decoder: ring attention (cp=4, zig-zag) gives the reference tail
logits, both scorers agree on the first answer token, and `bookft eval niah --model` runs end to end."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from eval_helpers import byte_bpe
from typer.testing import CliRunner

model_mod = pytest.importorskip("bookft.model")

from bookft.attention.config import AttentionConfig  # noqa: E402
from bookft.cli import app  # noqa: E402
from bookft.eval import EvalConfig  # noqa: E402
from bookft.eval.drivers import (  # noqa: E402
    length_rule,
    make_attend,
    model_generate_fn,
    model_logits_fn,
    pad_attend,
)
from bookft.eval.haystack import build_haystack  # noqa: E402
from bookft.eval.placement import build_sample  # noqa: E402
from bookft.eval.scoring import teacher_forced  # noqa: E402
from bookft.eval.tasks import make_task  # noqa: E402
from bookft.eval.tokenizer import EvalTokenizer  # noqa: E402
from bookft.parallel.config import ParallelConfig  # noqa: E402
from bookft.parallel.mesh import make_mesh  # noqa: E402

TINY = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
            max_position_embeddings=1024, compute_dtype="float32", remat="none")


@pytest.fixture(scope="module")
def setup():
    tok = EvalTokenizer.load(byte_bpe())
    return tok, model_mod.init_model(model_mod.ModelConfig(**TINY), seed=0)


def test_ring_tail_logits_match_reference_and_scorers_agree(setup):
    tok, model = setup
    hay = build_haystack("essay", tok, 0, 600)
    samples = [build_sample(make_task(EvalConfig(), 0, d), hay, tok, 250, d) for d in (0.0, 100.0)]
    mesh = make_mesh(ParallelConfig(mesh={"data": 1, "fsdp": 1, "context": 4}), jax.devices()[:4])
    att = AttentionConfig(strategy="ring", kernel="xla", block_q=32, block_kv=32)
    rule = length_rule(att, mesh)
    assert (rule(250), rule(256), rule(257), rule(7)) == (256, 256, 512, 8)  # 8 chunks; blocks of 32 past 256
    ring = model_logits_fn(model, attend=make_attend(att, mesh), tail=32, mesh=mesh, load_balanced=True)
    ids = np.stack([np.pad(s.input_ids, (0, 256 - s.actual_length)) for s in samples])
    want = model_mod.forward_logits(model, ids)[:, -32:]
    seen = []

    def recording(i, p, sg):
        seen.append(sg)
        return ring(i, p, sg)

    tf = teacher_forced(recording, samples, 256)
    got, start = ring(ids, np.broadcast_to(np.arange(256, dtype=np.int32), ids.shape), np.ones_like(ids))
    assert start == 256 - 32
    np.testing.assert_allclose(got, want, atol=2e-4, rtol=2e-4)
    # the first answer token: teacher-forced argmax == first greedy token (KV cache, padded local xla)
    local = AttentionConfig(strategy="local", kernel="xla", block_q=32, block_kv=32)
    gen = model_generate_fn(model, attend=pad_attend(make_attend(local), length_rule(local)))
    s = samples[1]
    first = gen(s.input_ids[None, : s.answer_span[0]], 1)[0, 0]
    assert tf[1]["predicted_ids"][0] == int(first)
    assert seen[0].shape == (2, 256) and seen[0][0].sum() == samples[0].actual_length


def test_cli_niah_on_hf_folder_with_ring_config(setup, tmp_path):
    tok, model = setup
    hf = tmp_path / "hf"
    model_mod.save_hf(model, model.config, hf)
    tok.tok.save(str(hf / "tokenizer.json"))
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text(
        "model: {vocab_size: 512}\n"
        "attention: {strategy: ring, kernel: xla, block_q: 32, block_kv: 32}\n"
        "parallel: {mesh: {data: 1, fsdp: 1, context: 4}, cpu_devices: 4}\n"
        "eval: {threshold: 0.5}\n")
    out = tmp_path / "out"
    args = ["eval", "niah", "--model", str(hf), "--config", str(run_yaml), "--lengths", "250",
            "--depths", "0,100", "--seeds", "0", "--scoring", "teacher_forced", "--out", str(out),
            "--no-progress"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, (r.output, r.exception)
    res = json.loads((out / "results.json").read_text())
    assert res["model"]["attention"] == {"strategy": "ring", "kernel": "xla", "context_degree": 4,
                                         "length_rule": {"chunks": 8, "block": 32}}
    assert len(res["cells"]) == 2 and res["summary"]["mean"] <= 0.05  # untrained: retrieves nothing
    assert res["settings"]["threshold"] == 0.5 and res["cells"][0]["actual_lengths"][0] <= 250
    assert (out / "report.html").is_file()
    r = CliRunner().invoke(app, [*args[:7], "2048", "--out", str(tmp_path / "o2")])
    assert "max_position_embeddings (1024)" in str(r.exception)
