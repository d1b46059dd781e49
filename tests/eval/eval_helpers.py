"""Shared helpers for tests/eval: tokenizers trained on the fly (no downloads)."""

from __future__ import annotations

import functools
import random
import re
import string
from itertools import islice

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from bookft.needles.haystack import NOISE, essay_sentences


def training_text() -> list[str]:
    text = list(islice(essay_sentences(123), 400)) + [NOISE] * 5
    rng = random.Random(0)  # digits and capitals in every word position, so WordPiece has ##x for all
    text += [" ".join("".join(rng.choice(string.digits + string.ascii_letters) for _ in range(6))
                      for _ in range(20)) for _ in range(50)]
    text += ["VAR ABCDE = VAR FGHIJ. VAR KLMNO = 12345."] * 5
    text += ["One of the special magic numbers for silver-otter is: 1234567. What is the pass key?"] * 5
    return text


@functools.cache
def byte_bpe(vocab_size: int = 400) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


@functools.cache
def wordpiece(vocab_size: int = 400) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(training_text(), trainer)
    return tok


# --- stub models -------------------------------------------------------------------------------

_NEEDLE = re.compile(r"(?:specialmagicnumbersfor|Thespecialmagicnumberfor)([a-z\-]+)is:(\d+)\.")
_ASK_ONE = re.compile(r"(?:specialmagicnumberfor([a-z\-]+)mentionedintheprovidedtextis"
                      r"|Thespecialmagicnumberfor([a-z\-]+)is:)$")
_ASK_ALL = re.compile(r"specialmagicnumbersfor([a-z\-,]+)mentionedintheprovidedtextare$")
_PASS = re.compile(r"Thepasskeyis(\d+)\.")
_VAR_ASK = re.compile(r"areassignedthevalue(\d+),theyare:$")
_VAR = re.compile(r"VAR([A-Z]{5})=(\d+|VAR[A-Z]{5})\.")


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def oracle_value(text: str) -> str | None:
    """The answer a perfect reader gives after reading `text` (a prompt ending in the answer prefix),
    for every task: niah/multikey (either phrasing), multivalue, multiquery, passkey, vartrack."""
    flat = _squash(text)
    needles = _NEEDLE.findall(flat)  # (key, value) in order of appearance
    ask = _ASK_ONE.search(flat)
    if ask:
        key = ask.group(1) or ask.group(2)
        return next((v for k, v in needles if k == key), None)  # the first needle of a key wins
    ask = _ASK_ALL.search(flat)
    if ask:
        keys = [k.removeprefix("and") for k in ask.group(1).split(",")]  # RULER's "k1, k2, and k3"
        if len(keys) == 1:  # multivalue: every value of the key, in order of appearance
            return ", ".join(v for k, v in needles if k == keys[0]) or None
        first = dict(reversed(needles))  # multiquery: each key's value, in the asked order
        return ", ".join(first.get(k, "?") for k in keys)
    ask = _VAR_ASK.search(flat)
    if ask:  # vartrack: follow the chain of assignments from the value, in order of appearance
        names: list[str] = []
        for name, rhs in _VAR.findall(flat):
            if rhs == ask.group(1) or rhs.removeprefix("VAR") in names:
                names.append(name)
        return " ".join(names) or None
    if flat.endswith("Whatisthepasskey?Thepasskeyis"):
        m = _PASS.search(flat)
        return m.group(1) if m else None
    return None


class OracleModel:
    """A causal stub that copies the needle value: it reads only the prompt (tokens before the answer)."""

    def __init__(self, tokenizer, vocab_size: int, tail: int = 48):
        self.tok, self.vocab, self.tail = tokenizer, vocab_size, tail
        self.shapes: list[tuple[int, int]] = []
        self.prompt_lengths: list[list[int]] = []

    def logits_fn(self, ids, pos, seg):
        b, s = ids.shape
        self.shapes.append((b, s))
        t = min(self.tail, s)
        start = max(0, int(seg.sum(1).max()) - t)  # a window ending at the real tokens, like the model's
        out = np.zeros((b, t, self.vocab), dtype=np.float32)
        for i in range(b):
            n = int(seg[i].sum())
            row = [int(x) for x in ids[i, :n]]
            for k in range(max(1, n - t), n):
                value = oracle_value(self.tok.decode(row[:k]))
                if value is not None:  # row[:k] is the prompt; predict the answer from position k-1
                    cont = self.tok.encode(" " + value).ids
                    for j, tid in enumerate(cont):
                        p = k - 1 + j - start
                        if 0 <= p < t:
                            out[i, p, tid] = 10.0
                    break
        return out, start

    def generate_fn(self, prompts, max_new):
        self.prompt_lengths.append([len(p) for p in prompts])
        out = np.zeros((len(prompts), max_new), dtype=np.int32)
        for i, row in enumerate(prompts):
            value = oracle_value(self.tok.decode([int(t) for t in row])) or ""
            cont = self.tok.encode(" " + value).ids[:max_new]
            out[i, :len(cont)] = cont
            if self.tok.eos_id is not None and len(cont) < max_new:
                out[i, len(cont):] = self.tok.eos_id
        return out


def random_logits_fn(vocab_size: int, seed: int = 0):
    rng = np.random.default_rng(seed)

    def fn(ids, pos, seg):  # a 64-position window ending at the real tokens
        t = min(64, ids.shape[1])
        return rng.normal(size=(ids.shape[0], t, vocab_size)), max(0, int(seg.sum(1).max()) - t)

    return fn
