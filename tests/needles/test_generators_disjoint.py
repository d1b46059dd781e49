"""The training generator and the eval share no template string and no key vocabulary.

Measured on rendered tasks (templates with their keys and values filled in) and on the bank's raw
templates: no run of 6 words appears in both, no word list overlaps, and the number, date, name and
variable formats differ. The counterpart of the check that found every eval key and half the eval
questions in the old training examples (one generator for both)."""

from __future__ import annotations

import re
import string

from bookft.needles import tasks as eval_tasks
from bookft.needles.eval_vocab import CWE_WORDS, FACTS, PEOPLE, RELATIONS, TOWNS
from bookft.needles.families import CWE_INSTRUCTION, CWE_PREFIX, CWE_QUESTION
from bookft.needles.tasks import NeedleSpec, make_task
from bookft.needles.train import TRAIN_KINDS, bank, make_train_task, vocab

N = 6
EVAL_TASKS = [t for t in eval_tasks.TASKS if t != "cwe"]
_WORD = re.compile(r"[A-Za-z0-9']+(?:[-_][A-Za-z0-9']+)*")


def ngrams(text: str, n: int = N) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _texts(task) -> list[str]:
    return [task.instruction, task.question, task.answer_prefix, *(n.text for n in task.needles)]


def eval_texts(seeds=range(40)) -> list[str]:
    out = [CWE_INSTRUCTION, CWE_QUESTION, CWE_PREFIX]
    for name in EVAL_TASKS:
        for phrasing in ("ruler", "short"):
            for s in seeds:
                out += _texts(make_task(NeedleSpec(task=name, phrasing=phrasing), s, 50.0))
    return out


def train_tasks(seeds=range(200)):
    return [make_train_task(k, s, 50.0) for k in TRAIN_KINDS for s in seeds]


def bank_templates() -> list[str]:
    return [t for name in dir(bank) if name.isupper() and isinstance(getattr(bank, name), tuple)
            for t in getattr(bank, name) if isinstance(t, str)]


def test_no_six_word_run_is_shared():
    ev = set().union(*(ngrams(t) for t in eval_texts()))
    train_rendered = [t for task in train_tasks() for t in _texts(task)]
    assert len(train_rendered) > 3000 and len(ev) > 1000
    shared = [t for t in train_rendered if ngrams(t) & ev]
    assert shared == []
    # the raw templates too: each slot cuts the text, so a run never spans a key or value
    fmt = string.Formatter()
    pieces = [lit for t in bank_templates() for lit, *_ in fmt.parse(t)]
    assert len(bank_templates()) >= 120
    assert [p for p in pieces if ngrams(p) & ev] == []


def test_the_bank_holds_tens_of_each_part():
    assert len(bank.INSTRUCTIONS) >= 15 and len(bank.NEEDLES) >= 20 and len(bank.QUESTIONS) >= 15
    assert len(bank.PREFIXES) >= 12 and len(bank.VT_SET) + len(bank.VT_COPY) >= 18
    # the draws use them: 200 seeds of single-key retrieval see most instructions and questions
    seen = {t.instruction for t in (make_train_task("niah", s, 50.0) for s in range(200))}
    assert len(seen) >= 14


def test_no_key_vocabulary_is_shared():
    train_words = {w.lower() for ws in (vocab.KEY_ADJ, vocab.KEY_NOUN, vocab.FIRST, vocab.LAST, vocab.VALUE_WORDS,
                                        vocab.VAR_LEFT, vocab.VAR_RIGHT) for w in ws}
    fact_words = {w.lower() for f in FACTS for phrase, _ in f["values"] for w in _WORD.findall(phrase)}
    eval_words = {w.lower() for ws in (eval_tasks._ADJ, eval_tasks._NOUN, CWE_WORDS, PEOPLE, TOWNS, RELATIONS)
                  for w in ws} | {w for w in fact_words if len(w) > 3}
    assert len(train_words) > 150 and len(eval_words) > 400
    assert train_words & eval_words == set()


def test_value_formats_differ():
    rendered = [t for task in train_tasks() for t in [*_texts(task), task.answer]]
    blob = "\n".join(rendered)
    assert not re.search(r"(?<![\d-])\d{5}(?![\d-])|(?<![\d-])\d{7}(?![\d-])", blob)  # eval: 7 and 5 digits
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", blob)  # UUIDs: an untrained family
    assert not re.search(r"\b[A-Z]{5}\b", blob)  # RULER's variable names
    ev = [make_task(NeedleSpec(task=t), s, 50.0) for t in ("niah", "multikey", "multivalue", "vartrack")
          for s in range(30)]
    assert all(re.fullmatch(r"\d{7}|\d{5}", r) or re.fullmatch(r"[A-Z]{5}", r) for t in ev for r in t.references)
    kinds = {("date" if re.search(r"[A-Z][a-z]+ \d|\d [A-Z][a-z]+ \d{4}", t.answer) else
              "number" if re.fullmatch(r" [\d-]+", t.answer) else "text") for t in train_tasks(range(60))}
    assert kinds == {"date", "number", "text"}


def test_no_eval_key_or_question_appears_in_training_text():
    ev = [make_task(NeedleSpec(task=t), s, 50.0) for t in EVAL_TASKS for s in range(50)]
    keys = {m for t in ev for m in re.findall(r"for ([a-z]+-[a-z]+)", t.question)}
    questions = {t.question for t in ev}
    assert len(keys) > 40
    blob = "\n".join(t for task in train_tasks() for t in _texts(task)).lower()
    assert [k for k in keys if k in blob] == [] and [q for q in questions if q.lower() in blob] == []


def _key_in(text: str) -> str:
    """The one key in `text`, as "first second" whatever its spelling."""
    first, second = "|".join(vocab.KEY_ADJ + vocab.FIRST), "|".join(vocab.KEY_NOUN + vocab.LAST)
    pairs = re.findall(rf"\b({first})[ _-]?({second})\b", text, flags=re.IGNORECASE)
    assert len(pairs) == 1, text
    return " ".join(w.lower() for w in pairs[0])


def test_distractor_families():
    """multikey: other keys of the same kind with other values of the same kind, near-miss keys (one
    word changed), and the asked key under another label; every distractor value differs from the answer."""
    near = same_key = 0
    for s in range(200):
        t = make_train_task("multikey", s, 50.0, distractors=4)
        assert len(t.needles) == 6 and t.answer.strip() in t.needles[0].text
        if t.answer.strip().split(" ")[0] in vocab.FIRST:
            continue  # name values: a key and a value both read as names
        key = _key_in(t.needles[0].text)
        assert key == _key_in(t.question)
        others = [_key_in(n.text) for n in t.needles[1:]]
        assert all(t.answer.strip() not in n.text for n in t.needles[1:])
        assert others[-1] == key  # the asked key, another label
        same_key += 1
        near += sum(len(set(k.split()) & set(key.split())) == 1 for k in others[:-1])
    assert same_key > 100 and near > same_key  # about half the distractor keys are near misses


def test_keys_and_variable_names_come_in_many_spellings():
    """One spelling per example, every spelling drawn; never RULER's five capitals."""
    spellings = {}
    for s in range(120):
        t = make_train_task("multikey", s, 50.0)
        seps = {_key_sep(n.text) for n in t.needles} - {""}
        assert len(seps) <= 1, [n.text for n in t.needles]
        spellings.setdefault("keys", set()).update(seps)
        v = make_train_task("vartrack", s, 50.0)
        styles = {_var_style(r) for r in v.candidates}
        assert len(styles) == 1, v.candidates
        assert set(v.references) <= set(v.candidates) and all(r in v.answer for r in v.references)
        spellings.setdefault("vars", set()).update(styles)
    assert spellings["vars"] == set(vocab.VAR_STYLES)
    assert {"-", "_", " ", "camel"} <= spellings["keys"]


def test_vartrack_varies_its_chains_and_restates_the_question():
    """Chains of hops-2 to hops+2 copies, 0-2 distractor chains, three separators; about half the
    answer prefixes restate the count and the value (the names, never the numbers, come after them)."""
    lengths, chains, seps, restated = set(), set(), set(), 0
    for s in range(300):
        t = make_train_task("vartrack", s, 50.0, hops=4)
        n, value = len(t.references), re.search(r"[\d-]{4,}", t.question).group()
        assert t.references == [w for w in t.candidates if w in t.references][:n]
        assert t.answer.strip().startswith(t.references[0]) and t.answer.strip().endswith(t.references[-1])
        assert not re.search(r"\d", t.answer) or all(re.fullmatch(r"[a-z]\d{1,2}", r) for r in t.references)
        sets = [x for x in t.needles if re.search(r"\d{4}|\d{3}-\d{3}", x.text)]
        assert value in sets[0].text and len(t.needles) == len(t.candidates)
        lengths.add(n)
        chains.add(len(sets))
        seps.update(sep for sep in (", ", "; ") if sep in t.answer)
        restated += str(n) in t.answer_prefix and value in t.answer_prefix
    assert lengths == {3, 4, 5, 6, 7} and chains == {1, 2, 3} and seps == {", ", "; "}
    assert 60 < restated < 200


def _key_sep(text: str) -> str:
    """The separator of the word-pair key in `text` ("camel" when there is none), or ""."""
    adj, noun = "|".join(vocab.KEY_ADJ), "|".join(vocab.KEY_NOUN)
    m = re.search(rf"\b(?:{adj})([ _-]?)(?:{noun})\b", text, flags=re.IGNORECASE)
    return "" if m is None else (m.group(1) or "camel")


def _var_style(name: str) -> str:
    if re.fullmatch(r"[a-z]+_[a-z]+", name):
        return "snake"
    if re.fullmatch(r"[a-z]+[A-Z][a-z]+", name):
        return "camel"
    if re.fullmatch(r"[A-Z]+_[A-Z]+", name):
        return "upper_snake"
    if re.fullmatch(r"[A-Z]{3}|[A-Z]{4}|[A-Z]{6}", name):
        return "capitals"
    assert re.fullmatch(r"[a-z]\d{1,2}", name), name
    return "letter_digits"
