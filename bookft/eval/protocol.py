"""One grid cell's prompt under the eval protocol: split haystacks, own-context tasks, few-shot, budget.

Design choices:
- Haystacks: without a split, one per seed as bookft/eval/haystack.py builds them; with
  `eval.split` on a corpus haystack, the split's own books in non-overlapping blocks
  (bookft/eval/split.py). Generated haystacks (essay, noise) are seeded by the split's seeds.
- A task with its own context (cwe's word list) draws it for the cell's length less what its
  instruction, question and answer take, so the builder cuts only a few items off its end.
- Few-shot (`eval.fewshot`): solved examples before the prompt (bookft/needles/fewshot.py).
- One generation budget for every model under strict/ruler scoring: max(64, answer tokens + 8).
"""

from __future__ import annotations

from bookft.eval.haystack import build_haystack
from bookft.eval.split import corpus_split_haystacks
from bookft.needles import make_task
from bookft.needles.eval_config import STRICT_BUDGET, EvalConfig
from bookft.needles.families import bind_haystack
from bookft.needles.fewshot import with_fewshot
from bookft.needles.haystack import Haystack
from bookft.needles.placement import Sample, build_sample
from bookft.needles.tasks import TaskInstance
from bookft.needles.tokenizer import ModelTokenizer


def score_keys(scoring: tuple[str, ...]) -> list[str]:
    """The per-seed score keys a grid with these scorers records."""
    keys = [k for k in ("teacher_forced", "generate") if k in scoring]
    if "strict" in scoring or "ruler" in scoring:
        keys += ["strict", "ruler"]
    return keys


def grid_haystacks(cfg: EvalConfig, tok: ModelTokenizer, seeds: list[int], tokens: int) -> dict[int, Haystack]:
    if cfg.split is not None and cfg.haystack == "corpus":
        return corpus_split_haystacks(cfg.corpus, cfg.split, seeds, tok, tokens)
    return {s: build_haystack(cfg.haystack, tok, s, tokens, cfg.corpus) for s in seeds}


def cell_sample(cfg: EvalConfig, tok: ModelTokenizer, hay: Haystack, seed: int, depth: float,
                length: int) -> tuple[Sample, TaskInstance]:
    """The sample of (seed, depth) at `length` tokens and the task it asks."""
    task = make_task(cfg, seed, depth)
    if task.haystack_fn is not None:
        frame = tok.count([task.instruction + task.question + task.answer_prefix + task.answer])[0]
        task, hay = bind_haystack(task, tok, max(16, length - frame), length)
    if cfg.fewshot:
        task = with_fewshot(task, cfg, seed, tok, cfg.fewshot, cfg.fewshot_tokens)
    return build_sample(task, hay, tok, length, depth, chat=cfg.chat_template, add_bos=cfg.add_bos), task


def generation_budget(cfg: EvalConfig, batch: list[Sample]) -> int:
    """New tokens to generate for `batch`: eval.max_new_tokens, else the protocol's budget."""
    answer = max(s.answer_span[1] - s.answer_span[0] for s in batch) + 8
    if cfg.max_new_tokens:
        return cfg.max_new_tokens
    if "strict" in cfg.scoring or "ruler" in cfg.scoring:
        return max(STRICT_BUDGET, answer)
    return answer
