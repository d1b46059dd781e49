"""Tokenizers: a local tokenizer.json / HF folder, or a byte-level BPE trained on the corpus itself.

Design choices:
- Nothing comes from a hub: `--tokenizer PATH` is a tokenizer.json or a folder holding one; without
  it a byte-level BPE is trained on the corpus (offline) and stored in the corpus.
- The trained BPE's pre-tokenizer splits every digit on its own (Digits(individual_digits=True)
  before ByteLevel), so a number always tokenizes to the same digit tokens wherever it appears;
  256 byte symbols are always in the alphabet, so any text encodes without unknown tokens.
- Documents are encoded paragraph by paragraph (units split after "\\n\\n": bookft/needles/text.py)
  with the Rust batch encoder (parallel); unit starts are the paragraph/file boundaries the packer
  may split at.
- A long document is already cut into paragraph batches (a batch holds whole units, at most about
  BATCH_CHARS), and one call of the batch encoder spreads its units over every core itself (its Rust
  thread pool, the GIL released), so no pool is needed. benchmarks/pdf_book.py measures the
  alternatives on a 1,000-page book (`tokenize_strategies_seconds`): Python threads over paragraph
  batches compete for the same cores as the encoder's own threads and gain nothing measurable; a
  process pool is several times slower (each worker loads the tokenizer, the units and ids are
  pickled across, the pool starts). The ids cannot depend on the cut: a unit is always encoded
  whole (tests/ingest/test_ingest_streaming.py). The cut must stay at unit ends: the same text in one
  piece gives other ids (SmolLM2's tokenizer, 300K characters of the book: 41,501 ids in one piece,
  40,951 unit by unit; the blank line before a paragraph pre-tokenizes differently).
- The fingerprint is the sha256 of the tokenizer's canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from bookft.errors import IngestError
from bookft.needles.text import units

__all__ = ["BATCH_CHARS", "EOS", "EOS_CANDIDATES", "PAD", "encode_documents", "encode_source", "fingerprint",
           "load_tokenizer", "special_ids", "train_bpe", "units", "word_starts"]

EOS = "<|endoftext|>"
PAD = "<|pad|>"
BATCH_CHARS = 4 << 20  # characters per call of the batch encoder (bounds its memory)
EOS_CANDIDATES = (EOS, "<|end_of_text|>", "</s>", "<eos>", "<|im_end|>", "<|eot_id|>")


def load_tokenizer(path: str | Path) -> Tokenizer:
    p = Path(path)
    f = p / "tokenizer.json" if p.is_dir() else p
    if not f.is_file():
        raise IngestError(f"--tokenizer {path}: no tokenizer.json there (give a tokenizer.json file or a "
                          "Hugging Face model folder that holds one; sentencepiece-only folders are not supported)")
    try:
        return Tokenizer.from_file(str(f))
    except Exception as e:
        raise IngestError(f"--tokenizer {f}: not a valid tokenizers JSON file ({e})") from None


def special_ids(tok: Tokenizer, folder: str | Path | None = None) -> tuple[int | None, int]:
    """(eos_id or None, pad_id). Reads tokenizer_config.json next to the tokenizer when there is one."""
    eos = pad = None
    if folder is not None:
        cfg = Path(folder) / "tokenizer_config.json" if Path(folder).is_dir() else None
        if cfg is not None and cfg.is_file():
            try:
                c = json.loads(cfg.read_text())

                def name(v):
                    return v.get("content") if isinstance(v, dict) else v

                if name(c.get("eos_token")):
                    eos = tok.token_to_id(name(c["eos_token"]))
                if name(c.get("pad_token")):
                    pad = tok.token_to_id(name(c["pad_token"]))
            except (OSError, ValueError):
                pass
    if eos is None:
        eos = next((tok.token_to_id(t) for t in EOS_CANDIDATES if tok.token_to_id(t) is not None), None)
    if pad is None:
        pad = tok.token_to_id(PAD)
    if pad is None:
        pad = eos if eos is not None else 0
    return eos, pad


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Byte-level BPE with single-digit pre-tokenization, trained on `texts` (deterministic)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                  special_tokens=[EOS, PAD], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def fingerprint(tok: Tokenizer) -> str:
    return hashlib.sha256(tok.to_str().encode()).hexdigest()


def word_starts(tok: Tokenizer) -> np.ndarray:
    """bool [vocab]: the token begins a word (starts with a space/newline marker or whitespace)."""
    n = tok.get_vocab_size(with_added_tokens=True)
    out = np.zeros(n, dtype=bool)
    for t, i in tok.get_vocab(with_added_tokens=True).items():
        if i < n and t[:1] in ("\u0120", "\u010a", "\u0109", "\u2581", " ", "\n"):
            out[i] = True
    return out


def encode_batch(tok: Tokenizer, batch: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Units -> (all their ids, int32, concatenated; tokens per unit, int64)."""
    enc = tok.encode_batch_fast(batch, add_special_tokens=False) if hasattr(tok, "encode_batch_fast") \
        else tok.encode_batch(batch, add_special_tokens=False)
    ids = [e.ids for e in enc]
    del enc
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    return np.fromiter(chain.from_iterable(ids), dtype=np.int32, count=int(lens.sum())), lens


def encode_documents(tok: Tokenizer, texts: Iterable[str], eos_id: int | None, batch_chars: int = BATCH_CHARS
                     ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per document, in order: token ids int32 [n] and unit boundaries int64 [k] (token offsets in (0, n)).

    Streaming: `texts` is consumed lazily and units go to the batch encoder in batches of about
    `batch_chars` characters (a document may span batches), so memory is bounded by the batch and the
    largest document, not by the number of texts. The ids do not depend on the batching.
    """
    counts: deque[int] = deque()  # units per document, for the documents read so far

    def unit_stream() -> Iterator[str]:
        for t in texts:
            u = units(t)
            counts.append(len(u))
            yield from u

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        batch: list[str] = []
        size = 0
        for u in unit_stream():
            batch.append(u)
            size += len(u)
            if size >= batch_chars:
                yield encode_batch(tok, batch)
                batch, size = [], 0
        if batch:
            yield encode_batch(tok, batch)

    def finish(ids_parts: list[np.ndarray], lens_parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        flat = np.concatenate(ids_parts) if ids_parts else np.zeros(0, np.int32)
        lens = np.concatenate(lens_parts) if lens_parts else np.zeros(0, np.int64)
        if eos_id is not None:
            flat = np.append(flat, np.int32(eos_id))
        bounds = np.cumsum(lens)[:-1]
        return flat, bounds[(bounds > 0) & (bounds < len(flat))]

    ids_parts: list[np.ndarray] = []
    lens_parts: list[np.ndarray] = []
    need: int | None = None  # units the current (first unfinished) document still waits for
    for flat, lens in batches():
        u = t = 0
        while True:
            if need is None:
                if not counts:
                    break
                need = counts.popleft()
            take = min(need, len(lens) - u)
            n_tok = int(lens[u:u + take].sum())
            if take:
                ids_parts.append(flat[t:t + n_tok])
                lens_parts.append(lens[u:u + take])
            u, t, need = u + take, t + n_tok, need - take
            if need:
                break  # this batch is used up; the document continues in the next one
            yield finish(ids_parts, lens_parts)
            ids_parts, lens_parts, need = [], [], None
    assert need is None, "encode_documents: units missing at the end"
    for c in counts:  # documents without units after the last batch (empty texts)
        assert c == 0
        yield finish([], [])


def encode_source(tok, texts: Iterable[str], eos_id: int | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One source's documents, as its token cache entry: ids int32 [n] of all documents one after the
    other, document offsets int64 [d + 1] into them, unit boundaries int64 (per document, offsets in
    the document) and boundary offsets int64 [d + 1] into those."""
    ids_l, off_l, b_l, bo_l = [], [0], [], [0]
    for ids, bnd in encode_documents(tok, texts, eos_id):
        ids_l.append(ids)
        off_l.append(off_l[-1] + len(ids))
        b_l.append(bnd)
        bo_l.append(bo_l[-1] + len(bnd))
    return (np.concatenate(ids_l).astype(np.int32, copy=False) if ids_l else np.zeros(0, np.int32),
            np.array(off_l, np.int64),
            np.concatenate(b_l).astype(np.int64, copy=False) if b_l else np.zeros(0, np.int64),
            np.array(bo_l, np.int64))
