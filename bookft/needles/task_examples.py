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

import dataclasses
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


# a follow-up's glue without a chat template: placement.skeleton's plain form (a blank line before the
# question, a line break before the answer prefix); kept here so the eval's prompt source, which the
# base grids' cache key hashes, stays as it is
PLAIN_TURN = ("\n\n", "\n")
_NO_DIGITS = re.compile(r"[ \t]*\d[\d.,:/-]*")


def _task(cfg: RetrievalConfig, kind: str, seed: int, depth: float):
    if cfg.generator == "train":
        return make_train_task(kind, seed, depth, distractors=cfg.task_distractors, values=cfg.task_values,
                               hops=cfg.task_hops)
    spec = NeedleSpec(task=kind, phrasing=cfg.phrasing, value_digits=cfg.value_digits,
                      num_distractors=cfg.task_distractors, num_values=cfg.task_values,
                      num_queries=cfg.task_queries, num_hops=cfg.task_hops)
    return make_task(spec, seed, depth)


def _asked_in_turns(tasks: list, glue: tuple[str, str]):
    """One task holding every task's needles, asked in turns: the first as the eval asks it, then each
    next question as a follow-up turn (glue: ModelTokenizer.turn_glue, or PLAIN_TURN) after the
    previous answer. Returns it and the answers' character spans from the end of its answer text (each
    earlier answer's span runs through its end of turn, so the model learns to stop)."""
    first = tasks[0]
    answer, spans = first.answer, [(0, len(first.answer))]
    stop = glue[0].split("\n")[0] or "\n"
    for t in tasks[1:]:
        spans[-1] = (spans[-1][0], spans[-1][1] + len(stop))
        answer += f"{glue[0]}{t.question}{glue[1]}{t.answer_prefix}"
        spans.append((len(answer), len(answer) + len(t.answer)))
        answer += t.answer
    task = dataclasses.replace(first, needles=[n for t in tasks for n in t.needles], answer=answer,
                               references=[r for t in tasks for r in t.references])
    return task, [(a0 - len(answer), a1 - len(answer)) for a0, a1 in spans]


def task_example(tok, model_tok: ModelTokenizer, rng: np.random.Generator, pool: DocumentPool,
                 cfg: RetrievalConfig, kind: str, room: int, seed: int, chat: bool, more: tuple[str, ...] = ()):
    """(text, answers [(start, end) tokens], tokens) of one `kind` example with tokens <= room - 1
    (the EOS the build appends), or None when the window cannot hold it. `tok`: the build's
    tokenizer or TokenCounter (its encoder gives the counts). `more`: the kinds of follow-up
    questions asked of the same context after the first is answered (retrieval.asks), each task
    with its own needles at its own depth."""
    depth = float(rng.uniform(0.0, 100.0))
    tasks = [_task(cfg, kind, seed, depth)]
    tasks += [_task(cfg, k, (1 << 40) + seed * 8 + j, float(rng.uniform(0.0, 100.0)))
              for j, k in enumerate(more, start=1)]
    task, spans = tasks[0], [(-len(tasks[0].answer), 0)]
    if more:
        task, spans = _asked_in_turns(tasks, model_tok.turn_glue() if chat else PLAIN_TURN)
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
            return text, answer_tokens(tok, text, [(len(text) + a0, len(text) + a1) for a0, a1 in spans]), n
        target -= n - (room - 1) + 1
    return None
