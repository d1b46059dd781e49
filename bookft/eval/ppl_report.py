"""Perplexity by window length in the eval report: ppl.json, ppl.png and the report section.

`bookft eval ppl --out DIR` writes ppl.json there (the whole record); report.html of DIR (the NIAH
grid's report when `bookft eval niah` wrote one to DIR, before or after) carries a "Perplexity by
window length" section from it.

The flag: within a model's native length (max_position_embeddings of the model as loaded), a longer
window gives every scored token at least as much context, so perplexity should fall or hold; a rise
of more than `RISE_TOLERANCE` from one tested length to the next is flagged in red in the report and
the terminal (`native_rise`), and the native length is a dashed line on the curve.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bookft.eval.short_report import load_section, short_section, write_section  # noqa: E402
from bookft.htmlpage import img, page, table  # noqa: E402

PPL_FILE = "ppl.json"
KIND = "bookft-eval-ppl"
RISE_TOLERANCE = 0.005  # a relative rise of ppl above 0.5 % from one length to the next is flagged
PER_LENGTH_KEYS = ("ppl", "loss", "tokens", "windows", "loss_by_position")


def fmt_len(n: int) -> str:
    return f"{n >> 20}M" if n >= 1 << 20 and n % (1 << 20) == 0 else \
        f"{n >> 10}K" if n >= 1024 and n % 1024 == 0 else str(n)


def per_model(res: dict, key: str) -> dict[str, dict]:
    """{model label: {length str: value}} of a per-length key, whether results are flat (one model)
    or keyed by model."""
    labels = list(res["models"])
    return {labels[0]: res[key]} if len(labels) == 1 else res[key]


def native_rise(ppl: dict, native: int | None) -> dict:
    """Whether perplexity rises with the window within the native length: the steps between
    consecutive tested lengths <= native, their relative change, and `rises` (any step above
    RISE_TOLERANCE)."""
    within = sorted(int(n) for n in ppl if native is None or int(n) <= native)
    steps = [{"from": a, "to": b, "change": ppl[str(b)] / ppl[str(a)] - 1.0}
             for a, b in zip(within, within[1:], strict=False)]
    return {"native_length": native, "lengths": within, "tolerance": RISE_TOLERANCE,
            "rises": any(s["change"] > RISE_TOLERANCE for s in steps), "steps": steps}


def rise_line(label: str, rise: dict) -> str:
    """One sentence on the flag, plain text (the terminal and the report both print it)."""
    native = rise["native_length"]
    where = f"within its native length ({fmt_len(native)})" if native else "over the tested lengths"
    if len(rise["lengths"]) < 2:
        return f"{label}: fewer than two tested lengths {where}: nothing to compare"
    steps = ", ".join(f"{fmt_len(s['from'])}->{fmt_len(s['to'])} {100 * s['change']:+.1f}%" for s in rise["steps"])
    if rise["rises"]:
        return f"{label}: PERPLEXITY RISES with longer windows {where} ({steps})"
    return f"{label}: longer windows do not raise perplexity {where} ({steps}; tolerance " \
           f"+{100 * RISE_TOLERANCE:.1f}%)"


def load_ppl(out: Path) -> dict | None:
    return load_section(out, PPL_FILE, KIND, "perplexity")


def plot_ppl(res: dict, path: Path) -> Path:
    """Left: ppl against window length per model (native length dashed). Right: mean loss against
    in-window position (power-of-two buckets), one line per length, one line style per model."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    styles = ["-", "--", ":", "-."]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    lengths = res["lengths"]
    for m, (label, ppl) in enumerate(per_model(res, "ppl").items()):
        xs = [n for n in lengths if str(n) in ppl]
        line = left.plot(xs, [ppl[str(n)] for n in xs], marker="o", ls=styles[m % 4], label=label)[0]
        native = res["models"][label].get("native_length")
        if native:
            left.axvline(native, color=line.get_color(), ls="--", alpha=0.5, lw=1,
                         label=f"{label} native length ({fmt_len(native)})")
        for k, n in enumerate(xs):
            b = per_model(res, "loss_by_position")[label][str(n)]
            mid = [math.sqrt(a * e) for a, e, t in zip(b["start"], b["end"], b["tokens"], strict=True) if t]
            right.plot(mid, [v for v in b["loss"] if v is not None], ls=styles[m % 4], marker=".",
                       color=colors[k % len(colors)], label=f"{label} {fmt_len(n)}")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    values = [v for ppl in per_model(res, "ppl").values() for v in ppl.values()]
    if max(values) > 3 * min(values):  # a blow-up beyond the native length: log scale
        left.set_yscale("log")
    left.set_xticks(lengths, [fmt_len(n) for n in lengths])
    left.set_xlabel("window length (tokens); dashed: native length")
    left.set_ylabel("perplexity")
    right.set_xlabel("position in the window (tokens of context, power-of-two buckets)")
    right.set_ylabel("mean loss (nats / token)")
    left.set_title("perplexity by window length", fontsize=10)
    right.set_title("loss by position", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _tables(res: dict) -> tuple[str, str]:
    ppl, tokens, windows = (per_model(res, k) for k in ("ppl", "tokens", "windows"))
    labels = list(res["models"])
    head = ["length", *[f"{lb} ppl" for lb in labels], *[f"{lb} tokens" for lb in labels],
            *[f"{lb} windows" for lb in labels]]
    rows = []
    for n in res["lengths"]:
        k = str(n)
        beyond = [lb for lb in labels if (res["models"][lb].get("native_length") or n) < n]
        name = fmt_len(n) + (f" (beyond native: {', '.join(beyond)})" if beyond else "")
        rows.append([name, *[f"{ppl[lb][k]:.3f}" for lb in labels], *[f"{tokens[lb][k]:,}" for lb in labels],
                     *[windows[lb][k] for lb in labels]])
    pos = per_model(res, "loss_by_position")
    cols = [(lb, n) for lb in labels for n in res["lengths"]]
    top = pos[labels[0]][str(res["lengths"][-1])]
    prow = []
    for i, (a, e) in enumerate(zip(top["start"], top["end"], strict=True)):
        vals = []
        for lb, n in cols:
            b = pos[lb][str(n)]
            v = b["loss"][i] if i < len(b["loss"]) else None
            vals.append("" if v is None else f"{v:.4f}")
        prow.append([f"[{a}, {e})", *vals])
    return table(head, rows), table(["position", *[f"{lb} {fmt_len(n)}" for lb, n in cols]], prow)


def ppl_section(out: Path) -> str:
    """The report's "Perplexity by window length" section ('' when DIR has no ppl.json)."""
    res = load_ppl(out)
    if res is None:
        return ""
    png = plot_ppl(res, Path(out) / "ppl.png")
    flags = []
    for label, m in res["models"].items():
        rise = m["within_native"]
        color = "#c0392b" if rise["rises"] else "#1e8449"
        flags.append(f"<p style='color:{color};font-weight:bold'>{html.escape(rise_line(label, rise))}</p>")
    models = "; ".join(f"{html.escape(lb)}: {html.escape(m.get('source', ''))}" for lb, m in res["models"].items())
    stride = res["stride"]
    how = (f"sliding windows advancing by {stride} tokens (each scores only the tokens no earlier window "
           "scored)" if stride else "consecutive non-overlapping windows (each scores its L-1 next-token targets)")
    docs = res["documents"]
    ppl_table, pos_table = _tables(res)
    return (f"<h2>Perplexity by window length</h2><p>{how}, from each document's start, of the raw text "
            f"tokenized without special tokens; {docs['count']} documents ({html.escape(docs['source'])}). "
            f"Models: {models}.</p>{''.join(flags)}{ppl_table}{img(png)}"
            f"<h3>Loss by position in the window</h3><p>Mean loss (nats/token) of the scored tokens by their "
            f"position in the window (the context they were predicted from), power-of-two buckets.</p>{pos_table}")


def write_ppl(res: dict, out: Path) -> Path:
    return write_section(res, out, PPL_FILE)


def write_sections_page(out: Path, title: str = "bookft eval: perplexity by window length") -> Path:
    """report.html of DIR with the sections of `bookft eval ppl` and `bookft eval short` that DIR has
    (DIR holds no NIAH results: its report would carry them)."""
    p = Path(out) / "report.html"
    p.write_text(page(title, ppl_section(out) + short_section(out)), encoding="utf-8")
    return p
