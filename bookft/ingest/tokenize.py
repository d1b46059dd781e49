"""Tokenizers: a local tokenizer.json / HF folder, or a byte-level BPE trained on the corpus itself.

Design choices:
- Nothing comes from a hub: `--tokenizer PATH` is a tokenizer.json or a folder holding one; without
  it a byte-level BPE is trained on the corpus (offline) and stored in the corpus.
- The trained BPE's pre-tokenizer splits every digit on its own (Digits(individual_digits=True)
  before ByteLevel), so a number always tokenizes to the same digit tokens wherever it appears;
  256 byte symbols are always in the alphabet, so any text encodes without unknown tokens.
- Documents are encoded paragraph by paragraph (units split after "\\n\\n") with the Rust batch
  encoder (parallel); unit starts are the paragraph/file boundaries the packer may split at.
- The fingerprint is the sha256 of the tokenizer's canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from bookft.errors import IngestError

EOS = "<|endoftext|>"
PAD = "<|pad|>"
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


def units(text: str) -> list[str]:
    """Split after each blank line; the concatenation of the units is the text."""
    parts = text.split("\n\n")
    out = [p + "\n\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return [u for u in out if u]


def encode_documents(tok: Tokenizer, texts: list[str], eos_id: int | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per document: token ids int32 [n] and unit boundaries int64 [k] (token offsets in (0, n))."""
    all_units: list[str] = []
    counts: list[int] = []
    for t in texts:
        u = units(t)
        all_units.extend(u)
        counts.append(len(u))
    enc = tok.encode_batch_fast(all_units, add_special_tokens=False) if hasattr(tok, "encode_batch_fast") \
        else tok.encode_batch(all_units, add_special_tokens=False)
    k = 0
    for c in counts:
        ids = [e.ids for e in enc[k:k + c]]
        k += c
        lens = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((i for x in ids for i in x), dtype=np.int32, count=int(lens.sum()))
        if eos_id is not None:
            flat = np.append(flat, np.int32(eos_id))
        bounds = np.cumsum(lens)[:-1]
        yield flat, bounds[(bounds > 0) & (bounds < len(flat))]
