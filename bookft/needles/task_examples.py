"""Training examples of the RULER tasks (multikey, multivalue, multiquery, vartrack, niah), built
from a window of the user's own corpus exactly as the eval builds its prompts.

Design choices:
- The task comes from retrieval.generator: `eval` is the eval's `make_task` (other seeds than the
  eval's), `train` the training generator (bookft.needles.train, wording and keys the eval never
  uses). Either way its needles
  go between the window's sentences and the prompt is rendered by `build_sample`, the chat template
  included when the model has one (an instruction-tuned model is taught in the format it is asked
  in). The answer follows the answer prefix and ends the example.
- The window is cleaned as the ingest cleans documents (and stripped of digits with
  retrieval.scrub_digits, as the magic-number examples are), so the text is a fixed point of the
  build's cleaning and its tokens are the ones the build gives it; counts and the answer's token
  span come from the ingest's own encoder (bookft.needles.examples.count_tokens).
- Length: the eval's count (one encoding of the whole text) and the build's (paragraph units)
  differ by a token or two; the example is built for the room less one token (the EOS), then
  rebuilt shorter by the excess when the build's count is over.
"""

from __future__ import annotations

import re

import numpy as np

from bookft.errors import EvalError
from bookft.needles.examples import DocumentPool, answer_tokens, count_tokens
from bookft.needles.haystack import fill_haystack, split_sentences
from bookft.needles.placement import build_sample
from bookft.needles.retrieval_config import RetrievalConfig
from bookft.needles.tasks import NeedleSpec, make_task
from bookft.needles.text import clean_text
from bookft.needles.tokenizer import ModelTokenizer
from bookft.needles.train import GENERATOR, make_train_task

TASK_KINDS = ("niah", "multikey", "multivalue", "multiquery", "vartrack")


def generator_of(cfg: RetrievalConfig, kind: str) -> str:
    """The generator an example of `kind` comes from (recorded per example and in retrieval.json)."""
    if kind in TASK_KINDS:
        return GENERATOR if cfg.generator == "train" else "eval"
    return "eval" if kind == "magic_number" else kind
_NO_DIGITS = re.compile(r"[ \t]*\d[\d.,:/-]*")


def task_example(tok, model_tok: ModelTokenizer, rng: np.random.Generator, pool: DocumentPool,
                 cfg: RetrievalConfig, kind: str, room: int, seed: int, chat: bool):
    """(text, answers [(start, end) tokens], tokens) of one `kind` example with tokens <= room - 1
    (the EOS the build appends), or None when the window cannot hold it. `tok`: the build's
    tokenizer or TokenCounter (its encoder gives the counts)."""
    spec = NeedleSpec(task=kind, phrasing=cfg.phrasing, value_digits=cfg.value_digits,
                      num_distractors=cfg.task_distractors, num_values=cfg.task_values,
                      num_queries=cfg.task_queries, num_hops=cfg.task_hops)
    depth = float(rng.uniform(0.0, 100.0))
    if cfg.generator == "train":
        task = make_train_task(kind, seed, depth, distractors=cfg.task_distractors, values=cfg.task_values,
                               hops=cfg.task_hops)
    else:
        task = make_task(spec, seed, depth)
    window = clean_text(pool.window(rng, room * 8))
    if cfg.scrub_digits:
        window = clean_text(_NO_DIGITS.sub("", window))
    hay = fill_haystack("corpus", iter(split_sentences(window)), model_tok, room, "corpus window")
    target = room - 1
    for _ in range(4):
        try:
            sample = build_sample(task, hay, model_tok, target, depth, chat=chat, add_bos=False)
        except EvalError:  # the window holds too little text, or the task does not fit the room
            return None
        text = sample.text
        if clean_text(text) != text or not text.endswith(task.answer):
            return None  # the build's cleaning would change it: its counts would not hold
        n = count_tokens(tok, text)
        if n <= room - 1:
            answers = answer_tokens(tok, text, [(len(text) - len(task.answer), len(text))])
            return text, answers, n
        target -= n - (room - 1) + 1
    return None
