"""The few-shot baseline's prompt: solved examples of the same task before the real one.

A base model that fails a task may fail on the answer's format, not on reaching across the
context. With a few short solved examples in its prompt it sees the format; what then separates it
from a tuned model is the reach. (RULER's cwe and vartrack carry one such example of their own.)

Design choices:
- `with_fewshot(task, spec, seed, tokenizer, shots)` returns the task with `shots` solved examples
  before its instruction (inside the user turn when a chat template wraps the prompt), each the
  same family drawn with other seeds, on a short essay haystack (bookft.needles.haystack), at most
  `max_tokens` tokens (256, else 512 when the task does not fit), its answer written out.
- "Other keys and values": an example whose text contains any of the real task's references, or
  the words before a reference in one of its needles (its key), is drawn again (gives_away), so no
  shot gives the answer away or asks the real question with another answer. A task without
  needles (cwe) draws its context from a shared word list, so every shot's list holds some of the
  real answers as plain items; for it only the shot's answer counts: it must name none of them.
- Seeded by (seed, shot index) alone: the base and the few-shot grids of one seed ask the same task.
"""

from __future__ import annotations

import dataclasses
import re

from bookft.errors import EvalError
from bookft.needles.haystack import generated_haystack
from bookft.needles.placement import build_sample
from bookft.needles.tasks import TaskInstance, make_task
from bookft.needles.tokenizer import ModelTokenizer

SHOT_SEED = 7_000_000  # shots' seeds: far from every eval and split seed
SHOT_LENGTHS = (256, 512)


def solved_example(spec, seed: int, tokenizer: ModelTokenizer, max_tokens: int = 512) -> tuple[str, str] | None:
    """One solved example of spec.task: (prompt and answer as text, the answer), or None when none
    fits max_tokens."""
    task = make_task(spec, seed, 50.0)
    for length in [n for n in SHOT_LENGTHS if n <= max_tokens]:
        hay_task = task
        try:
            if task.haystack_fn is not None:
                from bookft.needles.families import bind_haystack

                t = dataclasses.replace(task)
                frame = tokenizer.count([t.instruction + t.question + t.answer_prefix])[0]
                hay_task, hay = bind_haystack(t, tokenizer, length - frame - 32, length)
            else:
                hay = generated_haystack("essay", tokenizer, seed, length)
            sample = build_sample(hay_task, hay, tokenizer, length, 50.0, chat=False, add_bos=False)
            return sample.text, hay_task.answer
        except EvalError:
            continue
    return None


def gives_away(task: TaskInstance, text: str, answer: str | None = None) -> bool:
    """Whether a solved example's `text` holds one of `task`'s answers, or one of its keys: the words
    before an answer in one of its needles ("The spare key is kept inside", "for tidy-lantern is:"),
    so a shot never asks the real question with another answer, which a model could copy. For a
    task without needles (cwe) only the shot's `answer` is searched, word by word."""
    if not task.needles and answer is not None:
        words = set(re.findall(r"[\w'-]+", answer.lower()))
        return any(r.lower() in words for r in task.references)
    low = text.lower()
    if any(r.lower() in low for r in task.references):
        return True
    for needle in task.needles:
        for r in task.references:
            if r in needle.text:
                key = needle.text.split(r)[0].strip()
                if len(key) >= 8 and key.lower() in low:
                    return True
    return False


def with_fewshot(task: TaskInstance, spec, seed: int, tokenizer: ModelTokenizer, shots: int = 3,
                 max_tokens: int = 512) -> TaskInstance:
    """`task` with `shots` solved examples of its family before its instruction."""
    if shots <= 0:
        return task
    texts: list[str] = []
    for j in range(16 * shots):
        if len(texts) == shots:
            break
        solved = solved_example(spec, SHOT_SEED + seed * 64 + j, tokenizer, max_tokens)
        if solved is None:
            raise EvalError(f"few-shot: no solved {spec.task} example fits {max_tokens} tokens")
        text, answer = solved
        if not gives_away(task, text, answer):
            texts.append(text.strip())
    if len(texts) < shots:
        raise EvalError(f"few-shot: could not draw {shots} {spec.task} examples with other keys and values")
    return dataclasses.replace(task, instruction="\n\n".join(texts) + "\n\n" + task.instruction)
