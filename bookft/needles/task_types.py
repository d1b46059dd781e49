"""What a needle task is made of: its settings (NeedleSpec), needles, and the task instance.

Shared by the eval's tasks (bookft/needles/tasks.py), the evaluation-only families
(bookft/needles/families.py) and the training generator (bookft/needles/train/), so none of them
imports another to get these.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, kw_only=True)
class NeedleSpec:
    """What a task instance depends on (EvalConfig's task knobs, same names and defaults)."""

    task: str = "niah"
    num_distractors: int = 3  # multikey: other keys in the haystack
    num_values: int = 4  # multivalue: values under the same key
    num_queries: int = 2  # multiquery: keys asked at once
    num_hops: int = 4  # vartrack: assignments after the first
    value_digits: int = 7
    phrasing: str = "ruler"  # niah/multikey wording: ruler | short


@dataclass
class Needle:
    text: str
    depth: float  # fraction of the haystack, 0..1


@dataclass
class TaskInstance:
    task: str
    instruction: str
    needles: list[Needle]
    question: str
    answer_prefix: str
    answer: str  # the teacher-forced target; starts with a space
    references: list[str] = field(default_factory=list)  # string_match_all references
    target: int = 0  # index in needles of the needle placed at the nominal depth
    # strict scoring (bookft/eval/strict.py): a regex matching any item of the answer's kind (other
    # numbers for number values, other variable names for vartrack) and explicit candidates of that
    # kind (whole words, case-insensitive); an answer holding one that is not a reference is wrong
    kind_pattern: str = r"\d+"
    candidates: tuple[str, ...] = ()
    # a task whose context is its own (cwe's word list): (tokenizer, tokens, cell length) ->
    # (Haystack, references, instruction), used in place of the grid's haystack
    # (bookft.needles.families.bind_haystack)
    haystack_fn: Callable | None = None


def task_rng(seed: int, *salt) -> np.random.Generator:
    return np.random.default_rng([seed, *(zlib.crc32(str(s).encode()) for s in salt)])


def other_depths(rng: np.random.Generator, n: int, lo: float = 0.0, hi: float = 1.0) -> list[float]:
    return [float(x) for x in rng.uniform(lo, hi, n)]


