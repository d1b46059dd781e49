"""Training tasks: single-key retrieval, multi-key with distractors, multi-value, variable tracking.

`make_train_task(kind, seed, depth_percent, ...)` returns a bookft.needles.tasks.TaskInstance, so a
training example is placed and rendered by the eval's own code (bookft/needles/placement.py) while
its words come from this package's bank and vocabulary.

Design choices:
- Every draw picks an instruction, a needle sentence, a question and an answer prefix from the bank,
  a key kind (word pair or person) and its spelling, and a value kind (number, word, name, date),
  all seeded by (seed, kind): one generator call, one example.
- Distractor families (multikey): keys of the same kind with values of the same kind, near-miss
  keys (one word changed: "velvet thimble" beside "velvet quill"), and the asked key with another
  label's value, so the model must match the key and the label, not the first value it sees.
- Variable tracking: a chain of copies from a set value, the chain kept in text order, and zero to
  two distractor chains from other values beside it. Chains run hops-2 to hops+2 copies (at least
  one), so the number of names asked for varies; the answer lists them with a comma, a space or a
  semicolon. The names in one spelling per example
  (vocab.VAR_STYLES: "buf_heron", "bufHeron", "BUF_HERON", "QXT", "k12").
"""

from __future__ import annotations

import zlib

import numpy as np

from bookft.errors import IngestError
from bookft.needles.task_types import Needle, TaskInstance
from bookft.needles.train import bank, vocab

TRAIN_KINDS = ("niah", "multikey", "multivalue", "vartrack")  # niah: single-key retrieval
GENERATOR = "train-v5"
VT_SEPARATORS = (", ", " ", "; ")  # how a vartrack answer lists its names


def _rng(seed: int, kind: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(f"train/{kind}".encode())])


def _pick(rng: np.random.Generator, xs):
    return xs[int(rng.integers(len(xs)))]


def _depths(rng: np.random.Generator, n: int) -> list[float]:
    return [float(x) for x in rng.uniform(0.0, 1.0, n)]


def _frame(rng: np.random.Generator):
    """(key pair draw, key spelling, value kind, value draw, (label, labels))."""
    key_kind = _pick(rng, tuple(vocab.KEYS))
    spell = vocab.key_speller(key_kind, rng)
    value_kind = _pick(rng, tuple(vocab.VALUES))
    return vocab.KEYS[key_kind], spell, value_kind, vocab.VALUES[value_kind], _pick(rng, bank.LABELS[value_kind])


def _retrieval(seed: int, depth: float, distractors: int, kind: str) -> TaskInstance:
    rng = _rng(seed, kind)
    draw_key, spell, value_kind, draw_value, (label, _) = _frame(rng)
    pair = draw_key(rng)
    key = spell(*pair)
    values = vocab.distinct(draw_value, rng, 1 + distractors + 1)
    needle = _pick(rng, bank.NEEDLES)
    facts = [(key, label, values[0])]
    if distractors:
        n_near = int(rng.integers(0, distractors + 1))
        pairs = [vocab.near_miss(pair, rng) for _ in range(n_near)]
        pairs += vocab.distinct(draw_key, rng, distractors - n_near, avoid={pair, *pairs})
        facts += [(spell(*k), label, v) for k, v in zip(pairs, values[1:], strict=False)]
        other = [lab for lab, _ in bank.LABELS[value_kind] if lab != label]
        facts.append((key, _pick(rng, other), values[-1]))  # the asked key under another label
    depths = [depth] + _depths(rng, len(facts) - 1)
    # each fact in its own sentence form (drawn) or all in one: both occur in real documents
    same = rng.random() < 0.5
    needles = [Needle((needle if same else _pick(rng, bank.NEEDLES)).format(key=k, label=lab, value=v), d)
               for (k, lab, v), d in zip(facts, depths, strict=True)]
    slots = {"key": key, "label": label}
    return TaskInstance(
        task=kind, instruction=_pick(rng, bank.INSTRUCTIONS), needles=needles,
        question=_pick(rng, bank.QUESTIONS).format(**slots), answer_prefix=_pick(rng, bank.PREFIXES).format(**slots),
        answer=f" {values[0]}", references=[values[0]], target=0)


def _multivalue(seed: int, depth: float, n_values: int) -> TaskInstance:
    rng = _rng(seed, "multivalue")
    draw_key, spell, _, draw_value, (label, labels) = _frame(rng)
    key = spell(*draw_key(rng))
    values = vocab.distinct(draw_value, rng, n_values)
    depths = [depth] + _depths(rng, n_values - 1)
    order = sorted(range(n_values), key=lambda i: (depths[i], i))  # answered in order of appearance
    needles = [Needle(_pick(rng, bank.NEEDLES).format(key=key, label=label, value=v), d)
               for v, d in zip(values, depths, strict=True)]
    slots = {"key": key, "label": label, "labels": labels, "n": n_values}
    return TaskInstance(
        task="multivalue", instruction=_pick(rng, bank.INSTRUCTIONS), needles=needles,
        question=_pick(rng, bank.MULTI_QUESTIONS).format(**slots),
        answer_prefix=_pick(rng, bank.MULTI_PREFIXES).format(**slots),
        answer=" " + "; ".join(values[i] for i in order), references=list(values), target=0)


def _vartrack(seed: int, depth: float, hops: int) -> TaskInstance:
    rng = _rng(seed, "vartrack")
    lengths = [int(rng.integers(max(1, hops - 2), hops + 3)) + 1
               for _ in range(1 + int(rng.integers(0, 3)))]  # the asked chain and 0-2 distractor chains
    names = vocab.distinct(vocab.var_namer(rng), rng, sum(lengths))
    values = vocab.distinct(vocab.number, rng, len(lengths))
    cuts = np.cumsum([0, *lengths])
    chains = [(names[a:b], v) for a, b, v in zip(cuts[:-1], cuts[1:], values, strict=True)]
    needles = []
    for c, (chain, v) in enumerate(chains):
        start = depth if c == 0 else float(rng.uniform(0.0, 1.0))
        ds = [start] + sorted(float(x) for x in rng.uniform(start, 1.0, len(chain) - 1))
        needles.append(Needle(_pick(rng, bank.VT_SET).format(var=chain[0], value=v), ds[0]))
        needles += [Needle(_pick(rng, bank.VT_COPY).format(var=chain[i + 1], src=chain[i]), d)
                    for i, d in enumerate(ds[1:])]
    asked, value = chains[0]
    slots = {"value": value, "n": len(asked)}
    return TaskInstance(
        task="vartrack", instruction=_pick(rng, bank.VT_INSTRUCTIONS), needles=needles,
        question=_pick(rng, bank.VT_QUESTIONS).format(**slots),
        answer_prefix=_pick(rng, bank.VT_PREFIXES).format(**slots),
        answer=" " + _pick(rng, VT_SEPARATORS).join(asked), references=list(asked), target=0,
        kind_pattern="", candidates=tuple(names))


def make_train_task(kind: str, seed: int, depth_percent: float, *, distractors: int = 3, values: int = 4,
                    hops: int = 4) -> TaskInstance:
    """One training task of `kind` (TRAIN_KINDS) with its target needle at depth_percent."""
    depth = depth_percent / 100.0
    if kind == "niah":
        return _retrieval(seed, depth, 0, "niah")
    if kind == "multikey":
        return _retrieval(seed, depth, distractors, "multikey")
    if kind == "multivalue":
        return _multivalue(seed, depth, values)
    if kind == "vartrack":
        return _vartrack(seed, depth, hops)
    raise IngestError(f"retrieval.generator train has no task {kind!r}; choose from {', '.join(TRAIN_KINDS)}")
