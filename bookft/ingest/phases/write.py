"""The pack and write phases: the packing plan (a pure function of the documents' lengths; the mix's
when the build mixes), then the sequences (streamed Arrow shards) and the tokenizer into the
staging folder of the new version."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bookft.corpus.packing import pack as pack_plan
from bookft.corpus.store import FlatFile
from bookft.corpus.writer import write_version
from bookft.ingest.documents import Document
from bookft.ingest.mix import mixing, plan_mix
from bookft.ingest.phases.state import Build
from bookft.ingest.tokenize import word_starts
from bookft.needles.examples import MARK, SYNTHESIZED


def pack(b: Build, tokens: FlatFile, doc_off_a: np.ndarray) -> None:
    """The packing plan (corpus/packing.py, pure), cutting split documents at word starts."""
    b.progress.start("pack", None, "")
    bounds_flat = np.concatenate(b.bounds_parts) if b.bounds_parts else np.zeros(0, np.int64)
    bound_off_a = np.array(b.bound_off, dtype=np.int64)
    ws = word_starts(b.tok)

    def word_cut(d: int, lo: int, hi: int) -> int | None:
        a = max(lo + 1, hi - 4096)
        seg = tokens[doc_off_a[d] + a: doc_off_a[d] + hi + 1]
        seg = seg[seg < len(ws)]
        hit = np.nonzero(ws[seg])[0] if len(seg) else []
        return a + int(hit[-1]) if len(hit) else None

    seq_len = b.cfg.packing.seq_len
    bounds = lambda d: bounds_flat[bound_off_a[d]:bound_off_a[d + 1]]
    slack = int(b.cfg.packing.split_slack * seq_len)
    if mixing(b.cfg):
        b.plan, b.mix = plan_mix(b.cfg, b.labels, b.doc_label, np.diff(doc_off_a), b.doc_coll,
                                 boundaries=bounds, slack=slack, word_cut=word_cut, unmixed=set(b.unmixed))
    else:
        b.plan = pack_plan(np.diff(doc_off_a), b.doc_coll, seq_len, boundaries=bounds, slack=slack, word_cut=word_cut)
    b.progress.end()


def manifest_kind(doc: Document) -> str:
    """The kind a document is counted under in the manifest: a synthesized training example is a kind
    of its own (SYNTHESIZED), whatever file format carried it."""
    return SYNTHESIZED if MARK in (doc.meta or {}) else doc.kind


def write(b: Build, tokens: FlatFile, doc_off_a: np.ndarray) -> None:
    """The sequences (streamed Arrow shards) and the tokenizer into the staging folder."""
    staged, tc = b.staged, b.cfg.tokenizer
    b.progress.start("write", len(b.plan.sequences), "sequences")
    weights = None
    if b.loss_weights is not None:
        wmm = FlatFile(b.w_file, np.float32)
        weights = lambda d, s, e: wmm[doc_off_a[d] + s: doc_off_a[d] + e]
    b.info = write_version(staged, b.plan, tokens, doc_off_a, b.doc_coll, b.kept_docs(), b.cfg.packing.segments,
                           b.pad_id, b.progress, weights=weights, kind_of=manifest_kind)
    if b.loss_weights is not None:
        wmm.close()
        b.w_file.unlink()
    b.progress.end()
    tokens.close()
    b.tok_file.unlink()
    (staged / "tokenizer").mkdir()
    b.tok.save(str(staged / "tokenizer" / "tokenizer.json"))
    if tc.path and Path(tc.path).is_dir():
        for extra in ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
            if (Path(tc.path) / extra).is_file():
                (staged / "tokenizer" / extra).write_bytes((Path(tc.path) / extra).read_bytes())
