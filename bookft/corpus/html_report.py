"""`bookft inspect CORPUS --html OUT`: one self-contained page about a corpus version.

What it shows: document lengths per source and per kind (histograms over log-spaced bins,
log length axis), the fill of every sequence, the realised mix against the asked one (the manifest's
`mix` record; without a mix the shares the packing gave), failed and skipped sources with their
reasons, and redacted secrets per source and by file, line and kind (never a value).

Design choices:
- Read from the corpus only: the manifest, the documents' `n_tokens`/`kind` columns and the
  sequences' piece columns (Corpus.piece_arrays, column-wise), so a large corpus costs a few arrays.
- Matplotlib Agg PNGs embedded as data URIs (bookft/htmlpage.py) and also written next to the page.
- Which source a document came from is the manifest's `document_sources`; corpora built before it
  existed show lengths per kind only, and the page says so.
"""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from bookft.corpus.reader import Corpus  # noqa: E402
from bookft.htmlpage import img, page, table  # noqa: E402

MAX_FINDINGS = 500  # redaction findings listed on the page (all are counted)


def _doc_sources(m: dict, n_docs: int) -> list[str] | None:
    runs = m.get("document_sources")
    if runs is None:
        return None
    out = [name for name, n in runs for _ in range(n)]
    return out if len(out) == n_docs else None


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3):]


def _length_histogram(groups: dict[str, np.ndarray], title: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.8))
    top = max((int(v.max()) for v in groups.values() if len(v)), default=1)
    bins = np.logspace(0, np.log10(max(top, 2)) + 0.05, 40)
    for name, v in sorted(groups.items()):
        if len(v):
            ax.hist(np.maximum(v, 1), bins=bins, histtype="step", linewidth=1.6, label=f"{_short(name)} ({len(v)})")
    ax.set_xscale("log")
    ax.set_xlabel("document length (tokens, log scale)")
    ax.set_ylabel("documents")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _fill_histogram(fill: np.ndarray, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.hist(fill, bins=np.linspace(0, 1, 41), color="#1f77b4")
    ax.set_xlabel("fill (tokens / seq_len)")
    ax.set_ylabel("sequences")
    ax.set_yscale("log")
    ax.set_title(f"fill per sequence: mean {fill.mean():.4f}, min {fill.min():.4f}", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _mix_chart(rows: list[tuple[str, float, float]], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(rows) + 2), 3.4))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r[1] for r in rows], 0.4, label="asked", color="#8c8c8c")
    ax.bar(x + 0.2, [r[2] for r in rows], 0.4, label="realised", color="#1f77b4")
    ax.set_xticks(x, [_short(r[0], 18) for r in rows], rotation=20 if len(rows) > 4 else 0, fontsize=8)
    ax.set_ylabel("token share")
    ax.set_title("mix: asked vs realised", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _mix_section(m: dict, sources: list[str] | None, pieces: dict, stem: Path) -> str:
    mix = m.get("mix")
    if mix:
        per = mix["sources"]
        rows = [[name, f"{v['asked_share']:.4f}", f"{v['realised_share']:.4f}", f"{v['asked_tokens']:,}",
                 f"{v['realised_tokens']:,}", f"{v['relative_deviation']:.2%}", v["policy"], v["truncated"],
                 v["dropped"], ", ".join(f"{b} {n:,}" for b, n in v["realised_by_bucket"].items())]
                for name, v in per.items()]
        chart = _mix_chart([(n, v["asked_share"], v["realised_share"]) for n, v in per.items()],
                           Path(f"{stem}-mix.png"))
        head = ["source", "asked share", "realised share", "asked tokens", "realised tokens", "deviation",
                "policy", "truncated", "dropped", "realised tokens by document length"]
        note = (f"<p>Largest relative deviation: <b>{mix['max_relative_deviation']:.2%}</b>; short source: "
                f"{html.escape(str(mix.get('short_source')))} ({mix.get('short_sequences', 0):,} sequences); "
                f"held-out documents: {len(mix.get('held_out', [])):,}.</p>")
        if mix.get("missing"):
            names = ", ".join(html.escape(x["source"]) for x in mix["missing"])
            note += (f"<p>Sources left out, nothing to draw: {names} (their files failed or were skipped, or "
                     "every document was dropped or held out; the other shares are renormalised).</p>")
        return f"<h2>Mix: realised vs asked</h2>{note}{table(head, rows)}{img(chart)}"
    if sources is None:
        return "<h2>Mix</h2><p>No mix asked, and this corpus does not record each document's source.</p>"
    tokens: dict[str, int] = defaultdict(int)
    for d, n in zip(pieces["doc"], pieces["length"], strict=True):
        tokens[sources[d]] += int(n)
    total = sum(tokens.values()) or 1
    rows = [[name, f"{tokens[name] / total:.4f}", f"{tokens[name]:,}"] for name in dict.fromkeys(sources)]
    return ("<h2>Mix</h2><p>No mix asked (no weights, policies or short source): every document is packed "
            "once, so the shares are the sources' own (natural) ones.</p>"
            f"{table(['source', 'realised share', 'realised tokens'], rows)}")


def write_html_report(corpus: Corpus, out: str | Path) -> Path:
    """Write the page to `out` (its PNGs next to it, named after it); returns the page's path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stem = out.with_suffix("")
    m, c = corpus.manifest, corpus.manifest["counts"]
    table_ = corpus.documents().data
    n_tokens = table_.column("n_tokens").to_numpy()
    kinds = table_.column("kind").to_pylist()
    sources = _doc_sources(m, len(n_tokens))
    pieces = corpus.piece_arrays()
    fill = np.bincount(pieces["seq"], weights=pieces["length"], minlength=len(corpus)) / corpus.seq_len

    by_kind: dict[str, list[int]] = defaultdict(list)
    for k, n in zip(kinds, n_tokens, strict=True):
        by_kind[k].append(int(n))
    figs = _length_histogram({k: np.array(v) for k, v in by_kind.items()}, "document lengths per kind",
                             Path(f"{stem}-lengths-kind.png"))
    if sources is not None:
        by_source: dict[str, list[int]] = defaultdict(list)
        for s, n in zip(sources, n_tokens, strict=True):
            by_source[s].append(int(n))
        per_source = img(_length_histogram({k: np.array(v) for k, v in by_source.items()},
                                           "document lengths per source", Path(f"{stem}-lengths-source.png")))
    else:
        per_source = "<p>(This corpus version does not record each document's source: lengths per kind only.)</p>"

    summary = [["documents", f"{c['documents']:,}"], ["tokens", f"{c['tokens']:,}"],
               ["packed tokens", f"{c.get('packed_tokens', c['tokens']):,}"],
               ["sequences", f"{c['sequences']:,}"], ["seq_len", f"{corpus.seq_len:,}"],
               ["fill", f"{c['fill']:.4f}"], ["split documents", f"{c['split_documents']:,}"],
               ["duplicates", f"{c['duplicates']:,}"], ["secrets redacted", f"{c.get('secrets_redacted', 0):,}"],
               ["tokenizer", f"{m['tokenizer']['origin']} (vocab {m['tokenizer']['vocab_size']:,})"],
               ["data hash", m.get("data_hash", "")]]
    bad = [[e["source"], e["status"], e["reason"]] for e in m["sources"] if e["status"] != "ingested"]
    sec = m.get("secrets", {})
    found = sec.get("findings", [])
    listed = [[f["source"], f["line"], f["kind"]] for f in found[:MAX_FINDINGS]]
    more = c.get("secrets_redacted", 0) - len(listed)
    body = (f"<h2>Summary</h2>{table(['field', 'value'], summary)}"
            f"<h2>Document lengths</h2>{per_source}{img(figs)}"
            f"<h2>Fill per sequence</h2><p>{int((fill >= 0.999).sum()):,} of {len(fill):,} sequences are full.</p>"
            f"{img(_fill_histogram(fill, Path(f'{stem}-fill.png'))) if len(fill) else ''}"
            f"{_mix_section(m, sources, pieces, stem)}"
            f"<h2>Failed and skipped sources ({len(bad):,})</h2>"
            f"{table(['source', 'status', 'reason'], bad) if bad else '<p>None.</p>'}"
            f"<h2>Redacted secrets ({c.get('secrets_redacted', 0):,})</h2>"
            f"{table(['source', 'redacted'], [[k, v] for k, v in sec.get('per_source', {}).items()])}"
            f"{table(['file', 'line', 'kind'], listed) if listed else ''}"
            f"{f'<p>... and {more:,} more (bookft inspect --json lists them).</p>' if more > 0 else ''}")
    out.write_text(page(f"corpus {m.get('name')} v{m.get('version')}", body), encoding="utf-8")
    return out
