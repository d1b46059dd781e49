"""The tokenizer and tokenize phases: the tokenizer (given, reused from the previous version, or
trained on the kept text), then every kept document's tokens into one flat int32 file.

Design choices:
- Tokens are cached per source and tokenizer fingerprint (engine/cache.py), so a refresh encodes only
  what changed. They go to a flat int32 file read back by slices (pread, not a memory map, so it
  never becomes resident); the encoder reads one document's text at a time, in bounded batches.
- The tokenizer trained for the current version is reused when its settings match, so the token
  cache stays valid from one version to the next.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bookft.corpus.integrity import REUSE_TOKENIZER
from bookft.corpus.store import staging_dir
from bookft.errors import IngestError
from bookft.ingest.config import IngestConfig
from bookft.ingest.phases.state import Build
from bookft.ingest.tokenize import encode_source, fingerprint, load_tokenizer, special_ids, train_bpe


def _previous_tokenizer(root: Path, cfg: IngestConfig):
    """Reuse the tokenizer trained for the current version when its settings match (stable token cache);
    the one of a broken current version that was removed first (corpus/integrity.py keeps it)."""
    kept = root / "cache" / REUSE_TOKENIZER
    cur = kept if (kept / "manifest.json").is_file() else root / "current"
    try:
        man = json.loads((cur / "manifest.json").read_text())
        t = man["tokenizer"]
        if t.get("origin") == "trained" and t.get("trained_vocab_size") == cfg.tokenizer.vocab_size:
            return load_tokenizer(cur / "tokenizer" / "tokenizer.json")
    except (OSError, ValueError, KeyError, IngestError):
        pass
    return None


def tokenizer(b: Build) -> None:
    """The tokenizer: given (tokenizer.path), reused from the current version, or trained on the kept text."""
    tc = b.cfg.tokenizer
    tok = None
    if b.fixed_tokenizer is not None:
        tok, b.origin = b.fixed_tokenizer
    elif tc.path:
        tok = b.given_tokenizer.result() if b.given_tokenizer is not None else load_tokenizer(tc.path)
        b.origin = str(tc.path)
    elif not tc.retrain:
        tok = _previous_tokenizer(b.root, b.cfg)
    if tok is None:
        b.progress.start("train tokenizer", None, "")

        def sample_texts():
            budget = tc.train_chars
            for _, d in b.kept_docs():
                if budget <= 0:
                    return
                yield d.text[:budget]
                budget -= len(d.text)

        tok = train_bpe(sample_texts(), tc.vocab_size, tc.min_frequency)
        b.progress.end()
    b.tok, b.fp = tok, fingerprint(tok)
    b.eos_id, b.pad_id = special_ids(tok, tc.path)


def tokenize(b: Build) -> None:
    """Kept documents' tokens (cached per source and tokenizer) into one flat int32 file, with their
    offsets, collections and split boundaries (and loss weights when the hook is given)."""
    cache, heads, keep, loss_weights = b.cache, b.heads, b.keep, b.loss_weights
    b.staged = staging_dir(b.root)
    b.tok_file = b.staged / ".tokens.bin"
    b.w_file = b.staged / ".weights.bin"
    w_out = open(b.w_file, "wb") if loss_weights is not None else None
    coll_ids: dict[str, int] = {}
    prev_coll = prev_key = None
    b.eos = eos = b.eos_id if b.cfg.packing.append_eos else None
    b.progress.start("tokenize", len(keep), "sources")
    with open(b.tok_file, "wb") as out:
        for i in sorted(keep):
            if not keep[i]:  # every document of this source was a duplicate
                continue
            cached = cache.load_tokens(b.fp, b.keys[i] + ("" if eos is not None else "-noeos"))
            if cached is None:
                cached = encode_source(b.tok, (d.text for d in cache.documents(b.keys[i])), eos)
                cache.save_tokens(b.fp, b.keys[i] + ("" if eos is not None else "-noeos"), *cached)
            ids, offs, bnds, boffs = cached
            docs_i = heads[i]["documents"]
            full = cache.documents(b.keys[i], keep[i]) if w_out is not None else None
            for k in keep[i]:
                coll = docs_i[k]["collection"]
                name = f"{i}:{coll}" if coll != prev_coll else prev_key
                prev_coll, prev_key = coll, name
                coll_ids.setdefault(name, len(coll_ids))
                seg = ids[offs[k]:offs[k + 1]]
                out.write(seg.tobytes())
                if full is not None:
                    doc = next(full)
                    wk = loss_weights(doc, seg)
                    wk = np.ones(len(seg), np.float32) if wk is None else np.asarray(wk, np.float32)
                    if wk.shape != seg.shape:
                        raise IngestError(f"loss_weights for {doc.source}: expected shape "
                                          f"{seg.shape}, got {wk.shape}")
                    w_out.write(wk.tobytes())
                b.doc_off.append(b.doc_off[-1] + len(seg))
                b.doc_coll.append(coll_ids[name])
                b.doc_label.append(b.job_label[i])
                b.bounds_parts.append(bnds[boffs[k]:boffs[k + 1]])
                b.bound_off.append(b.bound_off[-1] + len(b.bounds_parts[-1]))
                b.n_tok_total += len(seg)
            b.progress.advance(1, tokens=int(offs[-1]))
    b.progress.end()
    if w_out is not None:
        w_out.close()
