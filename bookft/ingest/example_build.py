"""`bookft ingest` with synthesized training examples (retrieval.rate > 0): the plain corpus, then the
examples written from its documents (bookft.ingest.example_writer), then the published version with
both, the examples' loss weights applied through build_corpus's loss_weights hook.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bookft.errors import IngestError
from bookft.ingest.example_writer import BuildCache, synthesize
from bookft.ingest.examples import MARK
from bookft.ingest.retrieval_config import RetrievalConfig


def loss_weights_fn(tok, cfg: RetrievalConfig):
    """build_corpus's hook: weights for synthesized examples, corpus_weight for other documents."""

    def weights(document, ids: np.ndarray):
        mark = (document.meta or {}).get(MARK)
        if mark is None:
            return None if cfg.corpus_weight == 1.0 else np.full(len(ids), cfg.corpus_weight, np.float32)
        n, answers = json.loads(mark)  # n tokens (EOS not counted), answers [[a0, a1), ...]
        if len(ids) not in (n, n + 1):
            raise IngestError(f"{document.source}: {len(ids)} tokens, but the synthesized example was "
                              f"measured at {n}; was it ingested with another tokenizer?")
        w = np.full(len(ids), cfg.context_weight, np.float32)
        for a0, a1 in answers:
            w[a0:a1] = cfg.answer_weight
        return w

    return weights


def build_with_retrieval(cfg, progress=None, *, sources=None) -> dict:
    """`bookft ingest` with cfg.retrieval.rate > 0: the plain corpus first (its documents and
    tokenizer are the material), then the published version with the synthesized examples added
    (same tokenizer, so every cached source keeps its tokens). Returns the final manifest with a
    `retrieval` summary (also written to the version's retrieval.json)."""
    from dataclasses import replace

    import datasets

    from bookft.ingest.build import build_corpus
    from bookft.ingest.tokenize import load_tokenizer

    r = cfg.retrieval
    sources = list(sources or [])
    plain = build_corpus(cfg, progress, sources=sources)
    vdir = Path(plain["path"])
    tok = load_tokenizer(vdir / "tokenizer" / "tokenizer.json")
    docs = datasets.load_from_disk(str(vdir / "documents")).select_columns(["text", "kind"]).to_list()
    held = set((plain.get("mix") or {}).get("held_out", []))  # held out for `eval short`: not material either
    docs = [d for i, d in enumerate(docs) if i not in held]
    n_plain = int(plain["counts"]["sequences"])
    n_synth = max(1, round(n_plain * r.rate / (1.0 - r.rate)))
    synth_dir = Path(cfg.out) / "retrieval-sources"
    if progress is not None:
        progress.start("synthesize", n_synth, "sequences")
    # a few files per worker, each holding many sequences (one collection each, named in its rows):
    # the build's work per source (extract job, caches, encoder call) is paid per file, not per sequence
    per_file = max(1, -(-n_synth // (16 * max(1, cfg.workers))))
    t = plain["tokenizer"]
    bc = BuildCache(root=str(cfg.out), extract=cfg.extract, limits=cfg.limits, fingerprint=t["fingerprint"],
                    eos_id=t["eos_id"] if t["eos_appended"] else None)
    counts = synthesize(docs, tok, r, cfg.packing.seq_len, n_synth, synth_dir, progress, cfg.workers, per_file, bc)
    if progress is not None:
        progress.end()
    cfg2 = replace(cfg, tokenizer=replace(cfg.tokenizer, retrain=False))  # reuses the plain version's BPE
    files = sorted(synth_dir.glob("retrieval-*.jsonl"))  # one collection per sequence: one whole sequence
    final = build_corpus(cfg2, progress, sources=sources, unmixed=[(str(f), "jsonl", f.stem) for f in files],
                         loss_weights=loss_weights_fn(tok, r))  # unmixed: retrieval.rate is their share
    summary = {"plain_version": plain["version"], "plain_sequences": n_plain, "synthesized_sequences": n_synth,
               **counts, "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(r).items()}}
    tmp = Path(final["path"]) / ".retrieval.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(Path(final["path"]) / "retrieval.json")
    final["retrieval"] = summary
    return final
