"""The evaluation-only families at a small length with a tiny tokenizer: the answer is recoverable from
the prompt by a reader that knows the family, its distractors are there, and strict scoring accepts the
answer and rejects it with another candidate of its kind."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from eval_helpers import byte_bpe, training_text

from bookft.eval import EvalConfig
from bookft.eval.haystack import build_haystack
from bookft.eval.protocol import cell_sample
from bookft.eval.strict import strict_match
from bookft.needles.families import CWE_PREFIX, CWE_QUESTION, UUID_PATTERN
from bookft.needles.tokenizer import ModelTokenizer

LENGTH = 900


@pytest.fixture(scope="module")
def bpe():
    return ModelTokenizer.load(byte_bpe())


def _prompt(bpe, task_name: str, seed: int, depth: float = 40.0, length: int = LENGTH, **kw):
    cfg = EvalConfig(task=task_name, lengths=(length,), seeds=(seed,), **kw)
    hay = build_haystack("essay", bpe, seed, length)
    sample, task = cell_sample(cfg, bpe, hay, seed, depth, length)
    assert sample.actual_length <= length and sample.actual_length > length - 40
    return sample, task, sample.text[:len(sample.text) - len(task.answer)]


def solve_uuid(prompt: str) -> str:
    facts = dict(re.findall(rf"uuids for ({UUID_PATTERN}) is: ({UUID_PATTERN})\.", prompt))
    key = re.search(rf"uuid for ({UUID_PATTERN}) mentioned in the provided text is$", prompt).group(1)
    return facts[key]


def solve_hops(prompt: str) -> str:
    rel = {(a, r): b for b, a, r in re.findall(r"(\w+) is (\w+)'s (\w+)\.", prompt)}
    home = dict(re.findall(r"(\w+) lives in (\w+)\.", prompt))
    a, r1, r2 = re.search(r"(\w+)'s (\w+)'s (\w+) lives in$", prompt).groups()
    return home[rel[(rel[(a, r1)], r2)]]


def solve_cwe(prompt: str) -> list[str]:
    main = prompt.rsplit("Memorize the ones that appear most often.\n", 1)[1]
    counts = Counter(re.findall(r"\d+\. (\w+)", main))
    return [w for w, _ in counts.most_common(10)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multikey_uuid(bpe, seed):
    sample, task, prompt = _prompt(bpe, "multikey_uuid", seed)
    assert solve_uuid(prompt) == task.answer.strip() == task.references[0]
    assert len(re.findall(rf"One of the special magic uuids for {UUID_PATTERN}", prompt)) == 4  # 3 distractors
    other = re.findall(UUID_PATTERN, task.needles[1].text)[1]
    assert strict_match(task.answer, task.references, task.kind_pattern, task.candidates) == 1.0
    assert strict_match(f"{task.answer} or {other}", task.references, task.kind_pattern) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hops(bpe, seed):
    sample, task, prompt = _prompt(bpe, "hops", seed)
    assert solve_hops(prompt) == task.answer.strip()
    towns = [t for t in task.candidates if f"lives in {t}." in prompt]
    assert len(towns) == 4  # the asked chain and three distractor chains, each to its own town
    people = re.findall(r"(\w+) is \w+'s \w+\.", prompt)
    assert len(people) == 8 and len(set(people)) == 8
    other = next(t for t in towns if t != task.answer.strip())
    assert strict_match(task.answer, task.references, task.kind_pattern, task.candidates) == 1.0
    assert strict_match(f"{task.answer} or {other}", task.references, task.kind_pattern, task.candidates) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_niah_fact(bpe, seed):
    sample, task, prompt = _prompt(bpe, "niah_fact", seed)
    needle = task.needles[0].text
    assert needle in prompt and task.answer.strip() in needle
    q = set(re.findall(r"\w+", task.question.lower())) - {"the", "to", "a", "of", "in", "what", "s"}
    v = set(re.findall(r"\w+", task.answer.lower()))
    assert not (v & q)  # the question does not give the value away
    assert strict_match(task.answer, task.references, task.kind_pattern, task.candidates) == 1.0
    other = next(c for c in task.candidates if c not in task.references)
    assert strict_match(f"{task.answer} and {other}", task.references, task.kind_pattern, task.candidates) == 0.0


@pytest.mark.parametrize("seed", [0, 1])
def test_cwe(bpe, seed):
    # the tiny tokenizer spends about 5 tokens per item: RULER's solved example alone takes 500
    sample, task, prompt = _prompt(bpe, "cwe", seed, length=2400)
    common = solve_cwe(prompt)
    assert sorted(common) == sorted(task.references) and len(common) == 10
    main = prompt.rsplit("Memorize the ones that appear most often.\n", 1)[1]
    counts = Counter(re.findall(r"\d+\. (\w+)", main))
    assert min(counts[w] for w in common) > max(c for w, c in counts.items() if w not in common)
    numbers = [int(n) for n in re.findall(r"(\d+)\. \w+", main.split("\nQuestion")[0])]
    assert numbers == list(range(1, len(numbers) + 1))  # numbered in order, the cut only at the end
    assert "Question: What are the 10 most common words in the above list? Answer:" in prompt  # RULER's shot
    assert strict_match(task.answer, task.references, task.kind_pattern, task.candidates) == 1.0
    rare = next(w for w in counts if w not in common)
    assert strict_match(task.answer + " 11. " + rare, task.references, "", task.candidates) == 0.0
    # cells of one seed at other depths are other draws
    _, other, _ = _prompt(bpe, "cwe", seed, depth=80.0, length=2400)
    assert other.references != task.references


def test_cwe_from_4096_tokens_is_rulers_long_form(bpe):
    """From 4,096 tokens: a 40-word solved example (190 items), common words 30 times, rare ones 3; the
    list fills the cell, cut by at most a few items. (The tiny tokenizer spends about 9 tokens per item,
    so the ten common words alone take 2,700: 6,000 tokens leave room for rare ones.)"""
    sample, task, prompt = _prompt(bpe, "cwe", 7, length=6000)
    shot, main = prompt.rsplit("Memorize the ones that appear most often.\n", 1)
    shot_items = re.findall(r"\d+\. (\w+)", shot.split("Answer:")[0])
    assert len(shot_items) == 190
    counts = Counter(re.findall(r"\d+\. (\w+)", main.split("\nQuestion")[0]))
    common = task.references
    assert min(counts[w] for w in common) >= 28 and max(counts[w] for w in common) == 30
    assert max(c for w, c in counts.items() if w not in common) == 3
    assert sample.actual_length > 6000 - 40


def test_fewshot_prompt(bpe):
    """fewshot=3: three solved examples of the same family (its instruction and question form, each
    at most 512 tokens, none holding the task's answer) before the instruction; the cell keeps its length."""
    for name in ("multikey", "vartrack", "hops"):
        _, task0, _ = _prompt(bpe, name, 5, length=2400)
        sample, task, prompt = _prompt(bpe, name, 5, length=2400, fewshot=3)
        assert task.references == task0.references and task.question == task0.question
        head = task.instruction[:-len(task0.instruction)]
        assert head.count(task0.instruction.strip()) == 3
        assert head.count(task0.question.split(" ")[0] + " ") >= 3
        assert all(r not in head for r in task.references)
        instr = task0.instruction.strip()
        shots = [instr + piece for piece in head.split(instr)[1:]]
        assert len(shots) == 3 and all(len(bpe.encode(x.strip()).ids) <= 512 for x in shots)
        assert sample.actual_length > 2400 - 40


def test_fewshot_shots_never_ask_the_real_key():
    """A shot that asks the real question with another answer (the same key, another value) is drawn
    again: a small model copies a shot's answer, which would score the copying, not the reach."""
    from bookft.needles.fewshot import gives_away
    from bookft.needles.task_types import Needle, TaskInstance

    task = TaskInstance(task="niah_fact", instruction="", question="Where is the spare key?", answer_prefix="",
                        answer=" a hollow garden gnome", references=["a hollow garden gnome"],
                        needles=[Needle("The spare key is kept inside a hollow garden gnome.", 0.5)])
    assert gives_away(task, "... The spare key is kept inside an old biscuit tin. ...")  # same key
    assert gives_away(task, "... under A Hollow Garden Gnome ...")  # the answer itself
    assert not gives_away(task, "... The best thing to do in Ledbury is to swim. ...")  # another key


def test_fewshot_cwe_shots_name_other_common_words():
    """cwe draws every list from one word list, so a shot's list holds some of the real answers as rare
    items; what it must not hold is one of them among its answers. Each shot is RULER's template (its
    own solved example, then its list), so the instruction holds two answer lists per shot, then the
    real task's example."""
    from bookft.needles.fewshot import gives_away
    from bookft.needles.task_types import TaskInstance

    task = TaskInstance(task="cwe", instruction="", question="", answer_prefix="", answer=" 1. apple",
                        references=["apple", "arrow"], needles=[])
    assert not gives_away(task, "1. apple 2. cabin 3. camera", " 1. cabin 2. camera")
    assert gives_away(task, "1. apple 2. cabin 3. camera", " 1. apple 2. cabin")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from bookft.needles.eval_vocab import CWE_WORDS

    # a word per token, as a real model's vocabulary holds these words: a byte BPE of 400 spells each
    # out, and no solved list fits a shot's 512 tokens
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator([*training_text(), *(f"{i}. {w} " for i, w in enumerate(CWE_WORDS * 2))],
                            trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    words = ModelTokenizer.load(tok)
    for seed in range(4):
        cfg = EvalConfig(task="cwe", lengths=(4096,), seeds=(seed,), fewshot=3)
        sample, task = cell_sample(cfg, words, build_haystack("essay", words, seed, 4096), seed, 50.0, 4096)
        answers = re.findall(re.escape(CWE_PREFIX) + r"((?: \d+\. \S+)+)", task.instruction)
        # the shots take room from the list, which is cut to the cell: its common words still lead
        assert len(answers) == 7 and 0.95 * 4096 < sample.actual_length <= 4096
        start = sample.text.index(task.instruction) + len(task.instruction)
        counts = Counter(re.findall(r"\d+\. (\S+)", sample.text[start:sample.text.rindex(CWE_QUESTION)]))
        assert min(counts[w] for w in task.references) > 2 * max(c for w, c in counts.items()
                                                              if w not in task.references)
        for answer in answers[1:6:2]:
            assert not set(re.findall(r"\d+\. (\S+)", answer)) & set(task.references)
