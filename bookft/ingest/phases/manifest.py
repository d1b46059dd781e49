"""The manifest of one corpus version (manifest.json): counts, tokenizer, secrets, work done, timings,
the config, every source's entry and hash, duplicates, the mix record (ingest/mix.py) and which source
each document came from (`bookft inspect --html` draws per-source lengths from it)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict
from datetime import UTC, datetime


def build_manifest(b) -> dict:
    """The manifest of the build `b` (state.py `Build`, after the write phase)."""
    cfg, tc, plan, info = b.cfg, b.cfg.tokenizer, b.plan, b.info
    status = defaultdict(int)
    for e in b.entries:
        status[e["status"]] += 1
    seq_len = cfg.packing.seq_len
    capacity = len(plan.sequences) * seq_len
    n_tok_total = b.n_tok_total
    packed = plan.n_tokens  # the documents' tokens, unless a mix drew, cut or held some out
    unmixed = set(b.unmixed)
    return {
        "format": "bookft-corpus/1",
        "name": cfg.name,
        "version": None,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "seq_len": seq_len,
        "segments": cfg.packing.segments,
        "tokenizer": {"fingerprint": b.fp, "vocab_size": b.tok.get_vocab_size(with_added_tokens=True),
                      "eos_id": b.eos_id, "pad_id": b.pad_id, "origin": b.origin,
                      "trained_vocab_size": tc.vocab_size if b.origin == "trained" else None,
                      "eos_appended": b.eos is not None},
        "counts": {"sources": len(b.specs), "jobs": len(b.jobs), "entries": dict(status),
                   "documents": b.n_docs, "duplicates": len(b.duplicates) - b.n_near, "near_duplicates": b.n_near,
                   "tokens": n_tok_total,
                   "sequences": len(plan.sequences), "split_documents": plan.n_split_docs,
                   "packed_tokens": packed, "padding_tokens": capacity - packed,
                   "fill": round(packed / capacity, 6) if capacity else 0.0,
                   "chars": info["chars"], "pdf_pages": b.stats_total.get("pages", 0),
                   "pdf_empty_pages": b.stats_total.get("empty_pages", 0),
                   "secrets_redacted": sum(b.secrets_per_source.values())},
        "secrets": {"per_source": b.secrets_per_source, "findings": b.secrets,
                    "findings_not_listed": sum(b.secrets_per_source.values()) - len(b.secrets),
                    "scanned": {"code": cfg.extract.secrets.code, "legal": cfg.extract.secrets.legal}},
        "per_kind": info["per_kind"],
        "data_hash": info["data_hash"],
        "loss_weights": b.loss_weights is not None,
        "work": {**b.cache.counters(), "documents_extracted": sum(len(b.heads[i]["documents"]) for i in b.todo),
                 "sources_unchanged": len(b.jobs) - len(b.todo),
                 "pdf_page_ranges": b.page_ranges},  # page-range jobs of split PDFs (extract.py)
        "timings": {k: round(v, 3) for k, v in b.timings.items()},
        "cpu_seconds": {k: round(v, 3) for k, v in b.cpu.items()},
        "config": json.loads(json.dumps(asdict(cfg), default=str)),
        "sources": b.entries,
        # per job, for refresh diffs: the definition's sources, not the files the synthesis phase wrote
        "source_hashes": {job.path: b.hashes[i] for i, job in enumerate(b.jobs) if b.job_label[i] not in unmixed},
        # per job: what a later build needs to keep its documents when its source cannot be read (stale.py)
        "source_jobs": {job.path: {"kind": job.kind, "collection": job.collection, "source": b.job_label[i],
                                   "key": b.keys[i]} for i, job in enumerate(b.jobs) if b.job_label[i] not in unmixed},
        "stale": b.stale_sources,  # sources that could not be read, built from their last good documents
        "duplicates": b.duplicates,
        "mix": b.mix,
        "document_sources": _runs(b.doc_label),  # [[source name, documents], ...] in document order
    }


def _runs(labels: list[str]) -> list[list]:
    """Run-length form of each document's source name (documents are in source order, so it stays short)."""
    out: list[list] = []
    for x in labels:
        if out and out[-1][0] == x:
            out[-1][1] += 1
        else:
            out.append([x, 1])
    return out
