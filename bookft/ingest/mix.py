"""The mix phase of a build: per-source budgets, overflow policies, held-out documents, then packing;
and the manifest's `mix` record (asked vs realised tokens per source and per length bucket).

Design choices (the settings: ingest/mix_config.py; the pure drawing and packing: corpus/mixing.py):
- Budgets: a long source's share of the long tokens is weight / sum(weights) (natural token counts
  without weights), times 1 - short_share; the short source gets short_share. The total is
  `mix.tokens`, else the largest one that repeats no source (the scarcest source sets it).
- Policies act before the draw: `truncate` keeps the first seq_len tokens of an over-long document,
  `drop` leaves it out; both are counted per source. A source left with no tokens is named in the
  record (`missing`) and the other shares are renormalised.
- Unmixed sources (synthesized retrieval examples: retrieval.rate is their share) are packed once each,
  whole, outside the shares; the record lists their tokens (`unmixed`).
- Held-out documents (short ones, drawn from the short source when there is one) never reach a
  sequence; the manifest lists them for `bookft eval short`.
- The realised mix is counted from the packing plan itself (piece lengths), not from the budgets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bookft.corpus.mixing import bucket_name, draw, pack_spans, spans
from bookft.corpus.packing import PackPlan, WordCut
from bookft.errors import IngestError
from bookft.ingest.config import IngestConfig, SourceConfig


def mixing(cfg: IngestConfig) -> bool:
    """Whether the build has a mix phase (otherwise every document is packed once, as before)."""
    return cfg.mix.active or any(s.weight is not None or s.policy != "split" or s.upsample_long is not None
                                 for s in cfg.sources)


def _holdout(cfg: IngestConfig, lengths: np.ndarray, doc_label: list[str | None]) -> list[int]:
    """Held-out document indices: short ones (of the short source when there is one; None: not eligible)."""
    m = cfg.mix
    if not m.holdout_docs:
        return []
    cand = [d for d in range(len(lengths)) if 0 < lengths[d] <= m.holdout_max_tokens and doc_label[d] is not None
            and (m.short_source is None or doc_label[d] == m.short_source)]
    rng = np.random.default_rng([m.seed, 1])
    return sorted(int(x) for x in rng.choice(cand, size=min(m.holdout_docs, len(cand)), replace=False))


def plan_mix(cfg: IngestConfig, labels: list[str], doc_label: list[str], lengths: np.ndarray,
             collections: list[int], *, boundaries: Callable[[int], np.ndarray], slack: int,
             word_cut: WordCut, unmixed: set[str] = frozenset()) -> tuple[PackPlan, dict]:
    """The packing plan of a mixed build and its manifest record.

    labels: every source's name, in source order; doc_label[d]: the source of document d; unmixed: the
    names of sources packed once each, whole, outside the shares (synthesized retrieval examples).
    """
    seq_len, m = cfg.packing.seq_len, cfg.mix
    conf = {s.label: s for s in cfg.sources}
    setting = lambda label: conf.get(label) or SourceConfig(path=label)
    held = set(_holdout(cfg, lengths, [x if x not in unmixed else None for x in doc_label]))
    eff, policy_counts = _apply_policies(seq_len, labels, doc_label, lengths, held, unmixed, setting)
    docs_of: dict[str, list[int]] = defaultdict(list)
    for d, label in enumerate(doc_label):
        if eff[d] > 0:
            docs_of[label].append(d)
    natural = {label: int(eff[docs_of[label]].sum()) for label in labels}
    passed = [x for x in labels if x in unmixed]
    labels = [x for x in labels if x not in unmixed]
    sh = _shares(m, labels, natural, setting)
    copies, asked_buckets = _draw_copies(m.seed, labels, docs_of, eff, lengths, sh, setting)
    for x in passed:  # once each, whole
        copies[x] = [(d, int(eff[d])) for d in docs_of[x]]

    def packed(group: list[str], seed: int) -> PackPlan:
        cs = [c for x in group for c in copies[x]]
        items = spans(cs, eff, collections, np.random.default_rng([m.seed, seed]), word_cut)
        return pack_spans(items, seq_len, boundaries=boundaries, slack=slack, word_cut=word_cut)

    plan = packed(sh.long_labels + passed, 3)
    if sh.short is not None:
        s_plan = packed([sh.short], 4)
        plan.sequences.extend(s_plan.sequences)
        plan.n_split_docs += s_plan.n_split_docs
    record = _record(plan, labels, doc_label, lengths, sh.share, sh.budget, natural, asked_buckets, policy_counts)
    record.update(total_asked=sh.total, short_source=sh.short, unmixed={x: natural[x] for x in passed}, missing=[
        {"source": x, "reason": "no tokens to draw: its files failed or were skipped, or every document was "
                                f"dropped by policy '{setting(x).policy}' or held out"} for x in sh.missing],
                  short_sequences=0 if sh.short is None else len(s_plan.sequences), held_out=sorted(held))
    return plan, record


def _apply_policies(seq_len: int, labels: list[str], doc_label: list[str], lengths: np.ndarray, held: set[int],
                    unmixed: set[str], setting) -> tuple[np.ndarray, dict[str, dict]]:
    """Each document's length after its source's policy (0 = not drawn: held out or dropped) and the
    policy's counts per source; unmixed sources' documents keep their lengths."""
    eff = np.array(lengths, np.int64)  # lengths after the policy; 0 = not drawn
    policy_counts = {label: {"policy": setting(label).policy, "truncated": 0, "dropped": 0, "tokens_cut": 0}
                     for label in labels}
    for d in range(len(eff)):
        pol = setting(doc_label[d]).policy
        if doc_label[d] in unmixed:
            continue
        if d in held:
            eff[d] = 0
        elif eff[d] > seq_len and pol != "split":
            pc = policy_counts[doc_label[d]]
            pc["truncated" if pol == "truncate" else "dropped"] += 1
            pc["tokens_cut"] += int(eff[d] - (seq_len if pol == "truncate" else 0))
            eff[d] = seq_len if pol == "truncate" else 0
    return eff, policy_counts


@dataclass
class _Shares:
    """The mix's shares: sources with nothing to draw, the short source (None when it has none), the long
    sources, each source's share of the tokens and its budget, and the total asked."""

    missing: list[str]
    short: str | None
    long_labels: list[str]
    share: dict[str, float]
    budget: dict[str, int]
    total: int


def _shares(m, labels: list[str], natural: dict[str, int], setting) -> _Shares:
    """Shares and budgets of the mixed sources (`labels`, unmixed ones left out)."""
    # a source with nothing to draw (its files failed, its documents were dropped or held out) is left out,
    # named in the record, and the others' shares are renormalised: the run goes on with the rest
    missing = [x for x in labels if natural[x] == 0]
    short = m.short_source if m.short_source not in missing else None
    long_labels = [x for x in labels if x != m.short_source and x not in missing]
    if not long_labels:
        raise IngestError("mix: the long sources hold no tokens to draw from (every document failed, was "
                          "dropped by its policy or held out)")
    weighted = any(setting(x).weight is not None for x in long_labels)
    raw = {x: (setting(x).weight if weighted else natural[x]) for x in long_labels}
    short_share = m.short_share if short is not None else 0.0
    share = {x: (1.0 - short_share) * raw[x] / sum(raw.values()) for x in long_labels}
    if short is not None:
        share[short] = short_share
    total = m.tokens if m.tokens is not None else int(min(natural[x] / s for x, s in share.items() if s > 0))
    budget = {x: int(round(share[x] * total)) for x in share}
    return _Shares(missing, short, long_labels, share, budget, total)


def _draw_copies(seed: int, labels: list[str], docs_of: dict[str, list[int]], eff: np.ndarray, lengths: np.ndarray,
                 sh: _Shares, setting) -> tuple[dict[str, list[tuple[int, int]]], dict[str, dict[str, float]]]:
    """Per mixed source, the (document, tokens) copies drawn to fill its budget (long documents upsampled
    when asked) and the tokens it asked for per length bucket."""
    copies: dict[str, list[tuple[int, int]]] = {}
    asked_buckets: dict[str, dict[str, float]] = {}
    for i, x in enumerate(labels):
        if x not in sh.share:  # missing: nothing to draw
            asked_buckets[x] = {}
            continue
        ds = docs_of[x]
        up = setting(x).upsample_long
        w = np.array([up.factor if up is not None and lengths[d] >= up.min_tokens else 1.0 for d in ds])
        got = draw(eff[ds], w, sh.budget[x], np.random.default_rng([seed, 2, i])) if ds else []
        copies[x] = [(ds[k], n) for k, n in got]
        wl = w * eff[ds] if ds else np.zeros(0)
        per = defaultdict(float)
        for k, d in enumerate(ds):
            per[bucket_name(int(lengths[d]))] += sh.budget[x] * wl[k] / wl.sum()
        asked_buckets[x] = {b: round(v) for b, v in sorted(per.items())}
    return copies, asked_buckets


def _record(plan: PackPlan, labels, doc_label, lengths, share, budget, natural, asked_buckets, policy) -> dict:
    tokens = dict.fromkeys(labels, 0)
    buckets: dict[str, dict[str, int]] = {x: defaultdict(int) for x in labels}
    for seq in plan.sequences:
        for p in seq:
            x = doc_label[p.doc]
            if x not in tokens:  # an unmixed source
                continue
            tokens[x] += p.length
            buckets[x][bucket_name(int(lengths[p.doc]))] += p.length
    n = sum(tokens.values())
    per = {}
    worst = 0.0
    for x in labels:
        real = tokens[x] / n if n else 0.0
        rel = abs(tokens[x] - budget.get(x, 0)) / budget[x] if budget.get(x) else 0.0
        worst = max(worst, rel)
        per[x] = {"asked_share": round(share.get(x, 0.0), 6), "realised_share": round(real, 6),
                  "asked_tokens": budget.get(x, 0), "realised_tokens": tokens[x], "natural_tokens": natural[x],
                  "relative_deviation": round(rel, 6), "asked_by_bucket": asked_buckets[x],
                  "realised_by_bucket": dict(sorted(buckets[x].items())), **policy[x]}
    return {"sources": per, "max_relative_deviation": round(worst, 6), "realised_tokens": n}
