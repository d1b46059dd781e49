"""The whole loop, shortened: ingest with synthesized retrieval examples -> eval base -> train with
a length curriculum (ring over 4 simulated devices) -> eval tuned -> compare; the loss on the
answer tokens must fall. Tiny sizes: about a minute or two on 2 cores."""

import json

import numpy as np
import pytest

from bookft.corpus import open_corpus
from bookft.flows.default import run_quickstart
from bookft.model import forward_logits, init_model
from bookft.needles import NIAH_INSTRUCTION
from bookft.needles.examples import MARK, token_char_spans
from bookft.needles.haystack import essay_sentences
from bookft.train.checkpoint import load_params

CORPUS = """
name: e2e
out: {out}
sources: [{{path: {src}, kind: text}}]
workers: 0
tokenizer: {{vocab_size: 700}}
packing: {{seq_len: 512}}
retrieval: {{rate: 0.8, lengths: [256, 512], seed: 3}}
"""

RUN = """
name: e2e
model: {vocab_size: 704, hidden_size: 64, intermediate_size: 128, num_layers: 2, num_heads: 2,
        num_kv_heads: 2, compute_dtype: float32, remat: none, max_position_embeddings: 1024}
attention: {strategy: ring, kernel: xla, block_q: 64, block_kv: 64}
parallel: {mesh: {data: 1, fsdp: 1, context: 4}, cpu_devices: 4}
data: {corpus: unused, batch_size: 2}
train:
  steps: 40
  loss_chunk: 256
  optimizer: {lr: 3.0e-3, warmup_steps: 5, b2: 0.98, weight_decay: 0.01}
  curriculum: [{seq_len: 256, steps: 25}, {seq_len: 512, steps: 15, lr_scale: 0.6}]
checkpoint: {every: 100, keep: 1, async_save: false}
eval: {lengths: [512], depths: [0, 50, 100], seeds: [0], batch_size: 4}
"""


def _answer_loss(model, corpus, n: int = 12) -> float:
    """Mean cross-entropy of the answer tokens of the first n synthesized examples (whole documents)."""
    import datasets

    docs = datasets.load_from_disk(str(corpus.path / "documents"))
    tok = corpus.tokenizer()
    losses = []
    for row in docs:
        meta = row.get("meta") or {}
        meta = json.loads(meta) if isinstance(meta, str) else meta
        if MARK not in meta:
            continue
        _, answers = json.loads(meta[MARK])  # answer token spans
        ids, _ = token_char_spans(tok, row["text"])
        ans = [t for a0, a1 in answers for t in range(a0, a1)]
        logits = forward_logits(model, np.asarray([ids], np.int32))[0]
        lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
        losses += [float(lse[t - 1] - logits[t - 1, ids[t]]) for t in ans]
        if len(losses) >= 8 * n:
            break
    assert losses, "no synthesized examples found in the corpus documents"
    return float(np.mean(losses))


@pytest.mark.slow
def test_e2e_loop_learns_answers(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    gen = essay_sentences(5)
    for i in range(8):
        (src / f"essay{i}.txt").write_text("".join(next(gen) for _ in range(120)))
    # the eval's phrasing once in the corpus, so the small BPE does not spell the frame out byte by byte
    (src / "frame.txt").write_text((NIAH_INSTRUCTION + "What is the special magic number for silver-otter "
                                    "mentioned in the provided text?\n") * 30)
    (tmp_path / "corpus.yaml").write_text(CORPUS.format(out=tmp_path / "corpus", src=src))
    (tmp_path / "run.yaml").write_text(RUN)
    got = run_quickstart(corpus_yaml=tmp_path / "corpus.yaml", config=tmp_path / "run.yaml",
                         run_dir=tmp_path / "run", out=tmp_path / "out", progress=False)

    corpus = open_corpus(tmp_path / "corpus")
    r = got["corpus"]["retrieval"]
    assert r["examples"] > 0 and r["synthesized_sequences"] >= 4 * r["plain_sequences"]
    # every synthesized sequence holds whole examples at multiples of their length
    seen = 0
    for i in range(len(corpus)):
        s = corpus.sequence(i)
        lw = s["loss_weights"]
        if not np.any(np.isclose(lw, 0.05)):
            continue
        starts = np.flatnonzero(s["positions"] == 0)  # examples end a few tokens short at most
        assert starts[0] == 0 and all(-st % 256 <= 8 for st in starts), starts
        assert np.all(np.isin(lw[s["segment_ids"] > 0], [np.float32(0.05), np.float32(1.0)]))
        seen += 1
    assert seen == r["synthesized_sequences"]

    assert got["train"]["steps"] == 40
    assert (tmp_path / "out" / "compare" / "compare.html").is_file()
    assert set(got["base"]["per_depth"]["512"]) == set(got["tuned"]["per_depth"]["512"]) == {"0.0", "50.0", "100.0"}

    trained, run_cfg = load_params(tmp_path / "run")
    base = init_model(run_cfg.model, seed=run_cfg.train.seed)
    before, after = _answer_loss(base, corpus), _answer_loss(trained, corpus)
    assert before > 5.0  # about ln(vocab) for a fresh model
    assert after < before - 2.0, (before, after)
