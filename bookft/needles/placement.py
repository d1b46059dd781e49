"""Build one eval sequence: haystack sentences, needles at sentence boundaries, question, answer.

Design choices:
- Needles go in text space, between two haystack sentences (the boundary whose cumulative token
  count is nearest to depth x haystack tokens), never in token space, so the tokenizer sees the
  same text a reader would and cannot fuse a needle with its neighbours.
- The whole text is encoded once with add_special_tokens=False; the tokenizer's own special
  prefix (BOS) is prepended explicitly, and a check makes sure no special token sits inside the
  context. Token spans come from the encoding's character offsets.
- Length fitting: whole sentences up to the budget, re-encode, shrink while too long, then top up
  with the words of the next sentence (counted alone first, so usually one more full encode), at
  the end of the haystack before any needle placed at 100 %. Any gap left (usually 0) is padding
  with segment id 0 after the answer.
- The recorded actual depth is the share of haystack tokens (needles excluded) before the target
  needle, so a needle at nominal 100 % reads 100 % (a task without needles records its nominal one).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from bookft.errors import EvalError
from bookft.needles import TaskInstance
from bookft.needles.haystack import Haystack
from bookft.needles.tokenizer import ModelTokenizer

_PLACEHOLDER = "\u2063BOOKFT-HAYSTACK\u2063"


@dataclass
class Sample:
    input_ids: np.ndarray  # [n] int32, n = actual_length <= length: prefix + prompt + answer
    length: int  # the cell's nominal length
    answer_span: tuple[int, int]  # token indices [a0, a1) of the answer
    needle_spans: list[tuple[int, int]]  # token spans, in TaskInstance.needles order
    context_span: tuple[int, int]  # token span of the haystack with needles
    nominal_depth: float  # percent
    actual_depth: float  # percent of haystack tokens before the target needle
    answer: str
    references: list[str]
    text: str = ""  # the whole text the ids encode (prefix ids excluded): prompt, then the answer

    @property
    def actual_length(self) -> int:
        return int(self.input_ids.shape[0])


def skeleton(task: TaskInstance, tokenizer: ModelTokenizer, chat: bool) -> tuple[str, str]:
    """(text before the context, text after it up to and including the answer prefix)."""
    if chat:
        user = f"{task.instruction}{_PLACEHOLDER}\n\n{task.question}"
        rendered = tokenizer.render_chat(user)
        if rendered.count(_PLACEHOLDER) != 1:
            raise EvalError(f"{tokenizer.name}: chat_template does not keep the user message verbatim")
        pre, post = rendered.split(_PLACEHOLDER)
        return pre, post + task.answer_prefix
    return task.instruction, f"\n\n{task.question}\n{task.answer_prefix}"


def _token_span(offsets: np.ndarray, c0: int, c1: int, shift: int) -> tuple[int, int]:
    """Tokens whose character offsets ([n, 2] start/end) overlap [c0, c1), shifted by the prefix."""
    idx = np.flatnonzero((offsets[:, 0] < c1) & (offsets[:, 1] > c0))
    if idx.size == 0:
        raise EvalError(f"no tokens cover characters {c0}..{c1}; the tokenizer dropped the text")
    return int(idx[0]) + shift, int(idx[-1]) + 1 + shift


class _Builder:
    def __init__(self, task, hay: Haystack, tokenizer: ModelTokenizer, pre: str, post: str,
                 prefix_ids: list[int]):
        self.task, self.hay, self.tok = task, hay, tokenizer
        self.pre, self.post, self.prefix = pre, post, prefix_ids
        self.cum = np.concatenate([[0], np.cumsum(hay.counts)]).astype(np.int64)

    def text(self, n: int, partial: str = ""):
        """Full text with the first n chunks (+ a partial one) and needles; char spans of the parts."""
        cum = self.cum[: n + 1]
        total = int(cum[-1])
        chunks = list(self.hay.chunks[:n]) + ([partial] if partial else [])
        inserts: dict[int, list[int]] = {}
        # needles sharing a boundary go in depth order (ties: task order), so the text order is
        # the depth order the task's answer assumes (multivalue lists values as they appear)
        for j in sorted(range(len(self.task.needles)), key=lambda j: (self.task.needles[j].depth, j)):
            b = int(np.argmin(np.abs(cum - self.task.needles[j].depth * total)))
            inserts.setdefault(len(chunks) if b == n else b, []).append(j)
        parts, spans, pos = [self.pre], [None] * len(self.task.needles), len(self.pre)
        for i in range(len(chunks) + 1):
            for j in inserts.get(i, []):
                if parts and parts[-1] and not parts[-1][-1].isspace():
                    parts.append(" ")
                    pos += 1
                text = self.task.needles[j].text
                spans[j] = (pos, pos + len(text))
                parts.append(text + " ")
                pos += len(text) + 1
            if i < len(chunks):
                parts.append(chunks[i])
                pos += len(chunks[i])
        context = "".join(parts)[len(self.pre):].rstrip()
        prompt = self.pre + context + self.post
        ctx = (len(self.pre), len(self.pre) + len(context))
        return prompt, prompt + self.task.answer, spans, ctx

    def encode(self, n: int, partial: str = ""):
        prompt, full, spans, ctx = self.text(n, partial)
        enc = self.tok.encode(full)
        return len(self.prefix) + len(enc.ids), (prompt, full, spans, ctx, enc)


def build_sample(task: TaskInstance, hay: Haystack, tokenizer: ModelTokenizer, length: int,
                 nominal_depth: float, *, chat: bool = False, add_bos: bool | None = None) -> Sample:
    pre, post = skeleton(task, tokenizer, chat)
    if add_bos is False or chat:  # a chat template renders its own BOS text
        prefix = []
    elif add_bos and not tokenizer.prefix_ids:
        bos = tokenizer.tok.token_to_id(tokenizer.bos_token or "<s>")
        if bos is None:
            raise EvalError(f"{tokenizer.name}: eval.add_bos is true but the tokenizer has no BOS token")
        prefix = [int(bos)]
    else:
        prefix = list(tokenizer.prefix_ids)
    b = _Builder(task, hay, tokenizer, pre, post, prefix)
    overhead, _ = b.encode(0)
    if overhead >= length:
        raise EvalError(
            f"length {length} is too short for task {task.task}: template, needles, question and answer "
            f"alone take {overhead} tokens; use lengths above {overhead}")
    budget = length - overhead
    n = bisect.bisect_right(b.cum, budget) - 1
    if n >= len(hay.chunks) and hay.total_tokens < budget:
        raise EvalError(
            f"haystack ({hay.source}) has {hay.total_tokens} tokens but length {length} needs about "
            f"{budget}; give a longer haystack (more corpus documents) or shorter lengths")
    total, built = b.encode(n)
    for _ in range(16):  # chunk counts are per sentence; the joined text may count differently
        if total <= length or n == 0:
            break
        n = max(0, bisect.bisect_right(b.cum, int(b.cum[n]) - (total - length)) - 1)
        total, built = b.encode(n)
    if total > length:
        raise EvalError(f"cannot fit task {task.task} into {length} tokens (got {total})")
    if total < length and n < len(hay.chunks):  # top up with words of the next sentence
        words = hay.chunks[n].split(" ")
        partials = [" ".join(words[:w]).rstrip() + " " for w in range(1, len(words) + 1)]
        estimate = tokenizer.count(partials)  # each alone: cheap, and nearly what it adds in context
        w = max((i + 1 for i, c in enumerate(estimate) if c <= length - total), default=0)
        while w > 0:  # usually one full encode; step back a word when the joined text counts more
            t, bt = b.encode(n, partials[w - 1])
            if t <= length:
                total, built = t, bt
                break
            w -= 1
    prompt, full, spans, ctx, enc = built
    shift = len(prefix)
    offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)  # [n, 2] char start/end
    ids = np.asarray(prefix + list(enc.ids), dtype=np.int32)
    a0 = int(np.flatnonzero(offsets[:, 1] > len(prompt))[0]) + shift
    needle_spans = [_token_span(offsets, c0, c1, shift) for c0, c1 in spans]
    context_span = _token_span(offsets, *ctx, shift)
    leaked = sorted(set(ids[context_span[0]:context_span[1]].tolist()) & tokenizer.special_ids)
    if leaked:
        raise EvalError(f"special token ids {leaked} ended up inside the haystack; check the tokenizer")
    needle_tokens = sum(e - s for s, e in needle_spans)
    hay_tokens = max(1, context_span[1] - context_span[0] - needle_tokens)
    if needle_spans:
        t0 = needle_spans[task.target][0]
        before = t0 - context_span[0] - sum(e - s for s, e in needle_spans if e <= t0)
    else:  # a task without needles (cwe): the whole context is the material
        before = round(hay_tokens * nominal_depth / 100.0)
    return Sample(
        input_ids=ids, length=length, answer_span=(a0, len(ids)), needle_spans=needle_spans,
        context_span=context_span, nominal_depth=float(nominal_depth),
        actual_depth=round(100.0 * before / hay_tokens, 3), answer=task.answer,
        references=list(task.references), text=full)
