"""Evaluation-only task families: asked by the eval, never by a training example.

Registered in bookft.needles.tasks.TASKS under the names the results JSON carries:
- `cwe`: common-word extraction in RULER's form (scripts/data/synthetic/common_words_extraction.py):
  a numbered list of words, ten of them repeated far more often (30 vs 3 times from 4,096 tokens
  on, 6 vs 1 below, as RULER), one solved example before it; the answer lists the ten.
- `niah_fact`: Kamradt's needle: a sentence of fact in natural language, asked with a question
  that paraphrases it (the question does not repeat the needle's words).
- `multikey_uuid`: RULER's niah_multikey_3: UUID keys and values, other UUID pairs as distractors.
- `hops`: a chain of relations in natural language ("Imogen is Jasper's cousin. Imogen lives in
  Ledbury.") asked as one composed question, with distractor chains of the same relations beside it.

Design choices:
- Every family names what strict scoring treats as a wrong extra (TaskInstance.kind_pattern or
  candidates): UUIDs, the list's words, the fact family's other values, every town in the context.
- cwe's context is its own word list (TaskInstance.haystack_fn), sized to the cell's length (the
  shortest list that fills it, so the builder cuts at most a few items off its end); the depth axis
  has no meaning there, so its content is seeded by (seed, depth): each cell is one more independent
  draw.
- Vocabulary: bookft/needles/eval_vocab.py (disjoint from the training generator's).
"""

from __future__ import annotations

import uuid

import numpy as np

from bookft.needles.eval_vocab import CWE_WORDS, FACTS, PEOPLE, RELATIONS, TOWNS, pseudo_words
from bookft.needles.haystack import Haystack
from bookft.needles.task_types import Needle, NeedleSpec, TaskInstance, other_depths, task_rng

UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
CWE_INSTRUCTION = ("Below is a numbered list of words. In these words, some appear more often than others. "
                   "Memorize the ones that appear most often.\n")
CWE_QUESTION = "Question: What are the 10 most common words in the above list?"
CWE_PREFIX = "Answer: The top 10 words that appear most often in the list are:"
NUM_COMMON = 10


def _uuids(rng: np.random.Generator, n: int) -> list[str]:
    return [str(uuid.UUID(int=int.from_bytes(rng.bytes(16), "big"), version=4)) for _ in range(n)]


def _multikey_uuid(cfg: NeedleSpec, seed: int, depth: float) -> TaskInstance:
    rng = task_rng(seed, "multikey_uuid")
    n = 1 + cfg.num_distractors
    keys, values = _uuids(rng, n), _uuids(rng, n)
    depths = [depth] + other_depths(task_rng(seed, "mku-depths"), n - 1)
    needles = [Needle(f"One of the special magic uuids for {k} is: {v}.", d)
               for k, v, d in zip(keys, values, depths, strict=True)]
    return TaskInstance(
        task="multikey_uuid", needles=needles,
        instruction=("A special magic uuid is hidden within the following text. Make sure to memorize it. "
                     "I will quiz you about the uuid afterwards.\n"),
        question=f"What is the special magic uuid for {keys[0]} mentioned in the provided text?",
        answer_prefix=f"The special magic uuid for {keys[0]} mentioned in the provided text is",
        answer=f" {values[0]}", references=[values[0]], kind_pattern=UUID_PATTERN)


def _niah_fact(cfg: NeedleSpec, seed: int, depth: float) -> TaskInstance:
    rng = task_rng(seed, "niah_fact")
    fact = FACTS[int(rng.integers(len(FACTS)))]
    slot = {"place": str(rng.choice(TOWNS)), "who": str(rng.choice(PEOPLE))}
    phrase, word = fact["values"][int(rng.integers(len(fact["values"])))]
    question = fact["questions"][int(rng.integers(len(fact["questions"])))]
    return TaskInstance(
        task="niah_fact", instruction="Read the following text carefully; a question about it follows.\n",
        needles=[Needle(fact["needle"].format(value=phrase, **slot), depth)],
        question=question.format(**slot), answer_prefix=fact["prefix"].format(**slot), answer=f" {phrase}",
        references=[word], kind_pattern="", candidates=tuple(w for _, w in fact["values"]))


def _hops(cfg: NeedleSpec, seed: int, depth: float) -> TaskInstance:
    """Chains person -rel1-> person -rel2-> person -> town; the first asked, the others distractors
    (the same relations from other people, so only the chain's start tells them apart)."""
    rng = task_rng(seed, "hops")
    chains = 1 + max(1, cfg.num_distractors)
    people = [str(p) for p in rng.choice(PEOPLE, size=3 * chains, replace=False)]
    towns = [str(t) for t in rng.choice(TOWNS, size=chains, replace=False)]
    r1, r2 = (str(r) for r in rng.choice(RELATIONS, size=2, replace=False))
    drng = task_rng(seed, "hops-depths")
    needles = []
    for c in range(chains):
        a, b, x = people[3 * c:3 * c + 3]
        facts = [f"{b} is {a}'s {r1}.", f"{x} is {b}'s {r2}.", f"{x} lives in {towns[c]}."]
        ds = [depth] + other_depths(drng, 2) if c == 0 else other_depths(drng, 3)
        needles += [Needle(t, d) for t, d in zip(facts, ds, strict=True)]
    a = people[0]
    return TaskInstance(
        task="hops", instruction="Read the following text carefully; a question about the people in it follows.\n",
        needles=needles, question=f"In which town does {a}'s {r1}'s {r2} live?",
        answer_prefix=f"{a}'s {r1}'s {r2} lives in", answer=f" {towns[0]}", references=[towns[0]],
        kind_pattern="", candidates=tuple(towns))


def _cwe_list(rng: np.random.Generator, n_words: int, rep_common: int, rep_rare: int) -> tuple[list[str], list[str]]:
    """(shuffled list, the common words): NUM_COMMON words x rep_common + the others x rep_rare."""
    pool = list(CWE_WORDS)
    if n_words > len(pool):
        pool += pseudo_words(n_words - len(pool), int(rng.integers(1 << 30)), set(pool))
    words = [pool[i] for i in rng.permutation(len(pool))[:n_words]]
    common, rare = words[:NUM_COMMON], words[NUM_COMMON:]
    seq = common * rep_common + rare * rep_rare
    return [seq[i] for i in rng.permutation(len(seq))], common


def _numbered(seq: list[str]) -> list[str]:
    return [f"{i + 1}. {w} " for i, w in enumerate(seq)]


def _shot(common_words: list[str], seq: list[str]) -> str:
    """RULER's solved cwe example: the template on a small list, answered."""
    return (CWE_INSTRUCTION + "".join(_numbered(seq)).rstrip() + "\n" + CWE_QUESTION + " " + CWE_PREFIX + " "
            + " ".join(f"{i + 1}. {w}" for i, w in enumerate(common_words)))


def _sized_list(tokenizer, r: np.random.Generator, tokens: int, reps: tuple[int, int]):
    """The shortest list (common, rare repeats `reps`) of at least `tokens` tokens, within a few items:
    (numbered chunks, their counts, the common words)."""
    per = max(1.0, sum(tokenizer.count(_numbered(CWE_WORDS[:50]))) / 50)  # tokens per item, first guess
    n_rare = max(1, int((tokens / per - NUM_COMMON * reps[0]) / reps[1]) + 1)
    best = None
    state = r.bit_generator.state
    for _ in range(8):
        r.bit_generator.state = state  # each size draws from the same stream: only the size changes
        seq, common = _cwe_list(r, NUM_COMMON + n_rare, *reps)
        chunks = _numbered(seq)
        counts = tokenizer.count(chunks)
        total = sum(counts)
        if total >= tokens and (best is None or total < best[3]):
            best = (chunks, counts, common, total)
        if tokens <= total <= tokens * 1.01 + 16:
            break
        per = total / len(seq)
        step = max(1, n_rare + int((tokens - total) / (per * reps[1])) + (1 if total < tokens else 0))
        if step == n_rare:
            break
        n_rare = step
    if best is None:  # the sizes grow until one fills `tokens`; the last step may be the first that does
        best = (chunks, counts, common, total)
    return best[:3]


def _cwe(cfg: NeedleSpec, seed: int, depth: float) -> TaskInstance:
    seed_list = int(task_rng(seed, "cwe", round(depth, 6)).integers(1 << 30))

    def haystack_fn(tokenizer, tokens: int, length: int) -> tuple[Haystack, list[str], str]:
        # RULER by the cell's length: from 4,096 tokens on, repeats 30 / 3 and a 40-word solved example
        # (10 x 10 + 30 x 3 items); below, 6 / 1 and a 20-word one (10 x 3 + 10 x 1)
        r = np.random.default_rng([seed_list, length])
        reps, shot_form = ((30, 3), (40, 10, 3)) if length >= 4096 else ((6, 1), (20, 3, 1))
        ex, ex_common = _cwe_list(r, *shot_form)
        instruction = _shot(ex_common, ex) + "\n" + CWE_INSTRUCTION
        answer = " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(CWE_WORDS[:NUM_COMMON]))  # about its size
        n_instruction, n_answer, n_frame = tokenizer.count([instruction, answer, CWE_INSTRUCTION])
        room = tokens - (n_instruction - n_frame) - n_answer  # `tokens` counted the frame without the shot
        chunks, counts, common = _sized_list(tokenizer, r, max(16, room), reps)
        return Haystack(kind="cwe", chunks=chunks, counts=counts, source="cwe word list"), common, instruction

    return TaskInstance(task="cwe", instruction=CWE_INSTRUCTION, needles=[], question=CWE_QUESTION,
                        answer_prefix=CWE_PREFIX, answer="", references=[], kind_pattern="", haystack_fn=haystack_fn)


def bind_haystack(task: TaskInstance, tokenizer, tokens: int, length: int) -> tuple[TaskInstance, Haystack]:
    """A task with its own context (cwe) for a cell of `length` tokens, of which `tokens` are left
    beside its frame: the context drawn, and the task's instruction, answer, references and
    candidates set from it."""
    hay, common, instruction = task.haystack_fn(tokenizer, tokens, length)
    task.instruction = instruction
    task.answer = " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(common))
    task.references = list(common)
    task.candidates = tuple(sorted({c.split(". ", 1)[1].strip() for c in hay.chunks}))
    return task, hay


FAMILIES = {"cwe": _cwe, "niah_fact": _niah_fact, "multikey_uuid": _multikey_uuid, "hops": _hops}
