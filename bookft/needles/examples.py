"""Training examples for long-range retrieval, synthesized from a corpus's own documents.

Long-context fine-tuning teaches a model to use the middle of its context when the data asks for
it: a fact placed somewhere in a long text and asked about at the end, with the loss on the answer
("information-intensive" training, An et al. 2024, which fixed lost-in-the-middle). This module
writes such examples, using windows of the corpus's own documents as the text around the fact.

Design choices:
- Kinds: `magic_number` is the eval's NIAH needle and question verbatim (bookft.needles.tasks
  make_task, other seeds than the eval's), so `bookft eval niah` measures what training taught;
  `passage` asks to complete a sentence from earlier in a book; `signature` asks for the signature
  of a function after the code that defines it.
- Every example is its own document of exactly `length` tokens (EOS included; a token or two short
  when the tokenizer will not land exactly), and the examples of one length are grouped into
  sequences of seq_len tokens. Each sequence is one collection (named in its JSON rows, several
  sequences to a file) that fits one sequence, so the packer places it alone at offset 0 and a
  curriculum row of `length` tokens holds whole examples only.
- Token counts use the ingest's own encoding (paragraph units, bookft.needles.text), on text that
  is already a fixed point of clean_text, so the built corpus has exactly these tokens. They are
  measured incrementally (bookft.needles.tokencount: paragraph encodings memoized, a window's
  words counted from one encoding), with the same numbers as encoding each candidate afresh.
- `questions` > 1 also asks (and answers) the question at random places after the fact, as long as
  the context keeps `min_context` of the example: more answer tokens per example, at shorter
  distances (what lets a tiny model find the copy at all in its first stage); `ask_from` keeps
  them in the last part of the span after the fact, so the first one still asks from far away.
- The answers' token spans travel in the JSON line (`bookft_retrieval`: length, spans), and
  `loss_weights_fn` (bookft.ingest.corpus_build) turns it into per-token weights (answer_weight on
  the answer, context_weight on the rest) through build_pass's loss_weights hook.
- This module makes one example; bookft.ingest.example_writer writes sequences of them to files in
  a worker pool, and bookft.ingest.corpus_build runs them as a phase of the corpus build.
- Deterministic: everything is drawn from numpy generators seeded by (seed, sequence index).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from bookft.errors import IngestError
from bookft.needles.retrieval_config import RetrievalConfig
from bookft.needles.tasks import NeedleSpec, make_task
from bookft.needles.text import clean_text
from bookft.needles.tokencount import Words, counter

MARK = "bookft_retrieval"  # JSON field (document meta) holding the answer's [start, end) characters
SYNTHESIZED = "synthesized"  # the kind synthesized examples are counted under (manifest per_kind)
PASSAGE_INSTRUCTION = ("Read the following text carefully. I will ask you to complete one of its "
                       "sentences afterwards.\n")
CODE_INSTRUCTION = "Read the following code. I will ask you for the signature of one of its functions.\n"
_NO_DIGITS = re.compile(r"[ \t]*\d[\d.,:/-]*")  # a number and the blanks before it
_BLANK_RUNS = re.compile(r"\n{3,}")
_SENT_END = re.compile(r"[.!?][\"')\]]*\s")
_DEF = re.compile(r"^[ \t]*((?:async\s+)?def\s+([A-Za-z_]\w*)\s*\([^\n]*\)[^\n]*:)[ \t]*$", re.M)


def count_tokens(tok, text: str) -> int:
    """Tokens the ingest gives `text` (paragraph units), without EOS. `tok`: a Tokenizer or a
    TokenCounter (bookft.needles.tokencount; memoized, the same numbers)."""
    return counter(tok).count(text)


def token_char_spans(tok, text: str) -> tuple[list[int], np.ndarray]:
    """Ids as the ingest encodes `text` (no EOS) and their character spans [n, 2] in `text`."""
    return counter(tok).spans(text)


class DocumentPool:
    """Corpus documents to cut windows from, drawn with probability proportional to their length."""

    def __init__(self, docs: list[dict]):
        self.docs = [d for d in docs if len(d["text"]) > 400]
        if not self.docs:
            raise IngestError("retrieval synthesis: the corpus has no document longer than 400 characters")
        w = np.array([len(d["text"]) for d in self.docs], dtype=np.float64)
        self.p = w / w.sum()
        self.code = [d for d in self.docs if d["kind"] == "code" and _DEF.search(d["text"])]
        self.prose = [d for d in self.docs if d["kind"] != "code"] or self.docs

    def window(self, rng, chars: int, docs: list[dict] | None = None) -> str:
        if docs is None:
            d = self.docs[int(rng.choice(len(self.docs), p=self.p))]
        else:
            d = docs[int(rng.integers(len(docs)))]
        text = d["text"]
        start = int(rng.integers(0, max(1, len(text) - chars)))
        sp = text.find(" ", start)
        start = sp + 1 if 0 <= sp < start + 200 else start
        out = text[start:start + chars]
        while len(out) < chars:  # short document: continue with another one
            out += "\n\n" + self.docs[int(rng.integers(len(self.docs)))]["text"][: chars - len(out)]
        return out


def _snap(text: str, pos: int) -> int:
    """A place near `pos` between two sentences (else between two words) of `text`."""
    lo, hi = max(0, pos - 300), min(len(text), pos + 300)
    ends = [m.end() for m in _SENT_END.finditer(text, lo, hi)]
    if ends:
        return min(ends, key=lambda e: abs(e - pos))
    sp = text.rfind(" ", 0, pos)
    return sp + 1 if sp >= 0 else 0


def _cut_words(text: str, n_chars: int) -> str:
    cut = text[:n_chars]
    sp = max(cut.rfind(" "), cut.rfind("\n"))
    return cut[:sp] if sp > 0 else cut


_TASK: dict = {}  # the last (value_digits, phrasing, seed) -> its eval task (retries ask the same)


def _magic(rng, pool: DocumentPool, cfg: RetrievalConfig, seed: int):
    depth_percent = float(rng.uniform(0, 100))
    if cfg.edge_depth and rng.random() < cfg.edge_depth:  # retrieval.edge_depth (no draw when 0)
        depth_percent = 0.0 if rng.random() < 0.5 else 100.0
    key = (cfg.value_digits, cfg.phrasing, seed)
    task = _TASK.get(key)
    if task is None:  # the task depends on the seed only; the depth is just passed through
        settings = NeedleSpec(task="niah", value_digits=cfg.value_digits, phrasing=cfg.phrasing)
        task = make_task(settings, seed, depth_percent)
        _TASK.clear()
        _TASK[key] = task
    post = f"\n\n{task.question}\n{task.answer_prefix}"
    window = pool.window
    if cfg.scrub_digits:
        def window(r, chars):
            return _NO_DIGITS.sub("", pool.window(r, chars))
    return task.instruction, task.needles[0].text, depth_percent / 100.0, post, task.answer, window


def _passage(rng, pool: DocumentPool, cfg: RetrievalConfig, seed: int):
    probe = pool.window(rng, 20000, pool.prose)
    sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", probe) if 8 <= len(s.split()) <= 30
             and "\n" not in s.strip()]
    if not sents:
        return None
    s = sents[int(rng.integers(len(sents)))]
    words = s.split()
    k = len(words) // 2
    post = f"\n\nComplete the sentence from the text above: \"{' '.join(words[:k])} ...\"\nThe sentence continues:"
    return (PASSAGE_INSTRUCTION, s, float(rng.uniform(0, 1)), post, " " + " ".join(words[k:]),
            lambda r, chars: pool.window(r, chars, pool.prose))


def _signature(rng, pool: DocumentPool, cfg: RetrievalConfig, seed: int):
    if not pool.code:
        return None
    probe = pool.window(rng, 200000, pool.code)
    defs = [m for m in _DEF.finditer(probe) if len(m.group(1)) <= 160]
    if not defs:
        return None
    m = defs[int(rng.integers(len(defs)))]
    name = m.group(2)
    post = f"\n\nWhat is the signature of the function {name} in the code above?\nThe signature of {name} is:"
    # the defining line is the needle; the filler around it is other code
    return (CODE_INSTRUCTION, m.group(1), float(rng.uniform(0, 1)), post, " " + m.group(1),
            lambda r, chars: pool.window(r, chars, pool.code))


KINDS = {"magic_number": _magic, "passage": _passage, "signature": _signature}


def _more_magic(rng, cfg: RetrievalConfig, seed: int, first_question: str, n: int):
    """n more magic-number facts for one example (retrieval.needles): (needle, depth, post, answer)
    each, keys distinct from the first one's and from each other (seeds far from every example's)."""
    settings = NeedleSpec(task="niah", value_digits=cfg.value_digits, phrasing=cfg.phrasing)
    out, seen, t = [], {first_question}, 0
    while len(out) < n and t < 16 * n:
        t += 1
        task = make_task(settings, seed + t * 100_000_000_000, 0.0)
        if task.question in seen:
            continue
        seen.add(task.question)
        out.append((task.needles[0].text, float(rng.uniform(0, 1)), f"\n\n{task.question}\n{task.answer_prefix}",
                    task.answer))
    return out


@dataclasses.dataclass(frozen=True)
class _Frame:
    """An example but its window of corpus text: the instruction, the facts in order of depth
    ([(depth, needle)]), the questions asked at the end in their order ([(post, answer)]; the last
    one ends the example) and how many earlier askings of the last question go into the context."""

    instruction: str
    placed: list
    asks: list
    n_ask: int = 0

    @property
    def post(self) -> str:
        return self.asks[-1][0]

    @property
    def answer(self) -> str:
        return self.asks[-1][1]

    @property
    def block(self) -> str:
        """The questions after the context, answered."""
        return "".join(p + a + "." for p, a in self.asks[:-1]) + self.post + self.answer

    @property
    def asked(self) -> str:
        """An earlier asking of the last question, answered (when questions > 1)."""
        return self.post + self.answer + ".\n\n"


def build_example(tok, rng, pool: DocumentPool, cfg: RetrievalConfig, kind: str, length: int, seed: int,
                  needles: int = 1):
    """(text, answers [(start, end) tokens], tokens) with tokens == length - 1 (room for the EOS),
    or a little less; the last answer ends the example. `needles` > 1 (magic_number): that many
    facts with distinct keys, each asked once at the end (retrieval.needles). None when the
    example would not survive the ingest's cleaning as it is."""
    if cfg.edge_depth and length < cfg.edge_from:  # retrieval.edge_from: edge needles in long examples only
        cfg = dataclasses.replace(cfg, edge_depth=0.0)
    frame, window = _frame(rng, pool, cfg, kind, seed, needles)
    tok = counter(tok)
    budget = length - 1  # the EOS the ingest appends
    frame, fixed = _room(tok, cfg, frame, kind, length, budget)
    # Words of a window ("w0", " w1", " w2", ...): cut before a space, each is its own pre-token run,
    # so their token counts add up (Words cuts and encodes the window once, only as far as needed).
    # (runs of blank lines, as between the functions of code, shrunk to one: the cleaned text has no
    # longer ones, and an example that cleaning would change is discarded)
    w = Words(tok.tok, _BLANK_RUNS.sub("\n\n", window(rng, (budget - fixed) * 16)).strip())
    best = _fit(tok, rng, cfg, frame, w, budget, budget - fixed)
    if best is None:
        return None
    text, n, spans, k = best
    if n < budget:  # top up with the window's next words, so the next example starts on its row
        text, n, spans = _top_up(tok, text, n, spans, budget, len(frame.block), w.words(k, k + 64))
    return text, answer_tokens(tok, text, spans), n


def _frame(rng, pool: DocumentPool, cfg: RetrievalConfig, kind: str, seed: int, needles: int):
    """The example's kind drawn (up to 20 tries for material), its facts and questions: (_Frame,
    window(rng, chars) -> text around the facts)."""
    spec = None
    for _ in range(20):
        spec = KINDS[kind](rng, pool, cfg, seed)
        if spec is not None:
            break
    if spec is None:
        raise IngestError(f"retrieval synthesis: no material for kind {kind!r} in this corpus "
                          "(signature needs Python code, passage needs prose)")
    instruction, needle, depth, post, answer, window = spec
    facts = [(needle, depth, post, answer)]
    if needles > 1 and kind == "magic_number":
        facts += _more_magic(rng, cfg, seed, post, needles - 1)
    # the facts in order of depth; the questions at the end in a random order (one: as it is)
    placed = sorted(((d, t) for t, d, _, _ in facts), key=lambda x: x[0])
    asks = [(p, a) for _, _, p, a in facts]
    if len(asks) > 1:
        asks = [asks[int(i)] for i in rng.permutation(len(asks))]
    return _Frame(instruction, placed, asks), window


def _room(tok, cfg: RetrievalConfig, frame: _Frame, kind: str, length: int, budget: int) -> tuple[_Frame, int]:
    """The earlier askings that fit (keeping min_context of the example as context) and the tokens
    the example holds besides its window: (frame with n_ask set, fixed tokens)."""
    fixed0 = count_tokens(tok, frame.instruction + " " + " ".join(t for _, t in frame.placed) + frame.block)
    if fixed0 + 16 > budget:
        raise IngestError(f"retrieval.lengths: {length} tokens is too short for a {kind} example "
                          f"({fixed0} tokens without any context); use lengths of at least {fixed0 + 64}")
    n_ask = cfg.questions - 1 if len(frame.placed) == 1 else 0  # as many as fit, keeping min_context as context
    while n_ask > 0 and fixed0 + n_ask * count_tokens(tok, frame.asked) > budget * (1.0 - cfg.min_context):
        n_ask -= 1
    return dataclasses.replace(frame, n_ask=n_ask), fixed0 + n_ask * count_tokens(tok, frame.asked)


def _fit(tok, rng, cfg: RetrievalConfig, frame: _Frame, w: Words, budget: int, target: int):
    """Up to five attempts at the number of window words that lands the example on `budget` tokens:
    the best (text, tokens, answer character spans, words used) within budget, or None (none fits,
    or cleaning would change an attempt: the example is discarded)."""
    best = None
    for _ in range(5):
        counts = w.counts_upto(target)  # running totals, at least through the words that fit
        k = int(np.searchsorted(counts, target, side="right"))  # words that fit
        if k < 2:
            break
        text, spans = _compose(rng, cfg, frame, w, counts, k)
        if clean_text(text) != text:
            return None  # cleaning would change the text (odd characters): skip this one
        n = count_tokens(tok, text)
        if n <= budget and (best is None or n > best[1]):
            best = (text, n, spans, k)
        if n == budget:
            break
        target += budget - n  # the joins count a little differently from the parts
    return best


def _needle_words(placed: list, w: Words, counts: np.ndarray, k: int) -> list[tuple[int, str]]:
    """[(word index, needle)] in order: a needle goes before word m (a sentence start when one is
    near its nominal depth) of the first k words."""
    at = []
    for d, text_ in placed:
        m = int(np.searchsorted(counts[:k], d * counts[k - 1]))
        near = [j for j in range(max(1, m - 12), min(k, m + 12))
                if w.word(j - 1).rstrip().endswith((".", "!", "?"))]
        at.append((min(near, key=lambda j: abs(j - m)) if near and 0 < m < k else m, text_))
    at.sort(key=lambda x: x[0])
    return at


def _compose(rng, cfg: RetrievalConfig, frame: _Frame, w: Words, counts: np.ndarray, k: int
             ) -> tuple[str, list[tuple[int, int]]]:
    """The example on the first k words of the window: (text, answers' character spans)."""
    post, answer, asked = frame.post, frame.answer, frame.asked
    at = _needle_words(frame.placed, w, counts, k)
    m = at[-1][0]
    # earlier askings go at random word boundaries after the needle
    lo = m + 1 + int(cfg.ask_from * (k - m - 1))  # retrieval.ask_from: keep the first asking far
    # never before word k (the end): that asking would run into the final question ("\n\n\n\n",
    # which cleaning changes), and the whole attempt would be discarded
    later = sorted(int(x) for x in rng.integers(lo, k, frame.n_ask)) if lo < k else []
    parts, pos = [frame.instruction], 0
    for m_, text_ in at:
        if m_ == 0:
            parts += [text_, "" if w.word(0).startswith(" ") else " "]
        else:
            parts += [w.text(pos, m_), " ", text_]
        pos = m_
    spans = []
    for q in later:
        parts.append(w.text(pos, q))
        start = sum(map(len, parts)) + len(post)
        spans.append((start, start + len(answer)))
        parts.append(asked)
        pos = q
        if q < k:
            parts.append(w.word(q).lstrip())
            pos = q + 1
    parts.append(w.text(pos, k))
    for p, a in frame.asks[:-1]:
        start = sum(map(len, parts)) + len(p)
        spans.append((start, start + len(a)))
        parts += [p, a, "."]
    start = sum(map(len, parts)) + len(post)
    spans.append((start, start + len(answer)))
    parts += [post, answer]
    return "".join(parts), spans


def answer_tokens(tok, text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The answers' character spans in `text` -> their [start, end) token spans."""
    _, tspans = token_char_spans(tok, text)
    answers = []
    for a0, a1 in spans:
        hit = np.flatnonzero((tspans[:, 0] < a1) & (tspans[:, 1] > a0))
        answers.append((int(hit[0]), int(hit[-1]) + 1))
    return answers


def _top_up(tok, text: str, n: int, spans: list, budget: int, tail: int, words: list[str]):
    """Insert words before the final question (the last `tail` characters) while the example stays
    within `budget` tokens; examples of exactly `length` tokens keep every one on its curriculum
    row (a short one would make the next start before the row boundary)."""
    at = len(text) - tail
    for w in words[:64]:
        if n == budget:
            break
        w = w if w.startswith(" ") else " " + w
        cand = text[:at] + w + text[at:]
        if clean_text(cand) != cand:
            continue
        m = count_tokens(tok, cand)
        if m <= budget:
            text, n, at = cand, m, at + len(w)
            spans = [(a + len(w), b + len(w)) if a >= at - len(w) else (a, b) for a, b in spans]
    return text, n, spans
