"""The short-context check in the eval report: short.json, short.png and the report section.

`bookft eval short --out DIR` writes short.json there; report.html of DIR (the NIAH grid's report, when
`bookft eval niah` wrote one to DIR, before or after) carries a "Short-context check" section from it.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from bookft.errors import EvalError  # noqa: E402
from bookft.htmlpage import img, table  # noqa: E402

SHORT_FILE = "short.json"
KIND = "bookft-eval-short"


def read_json(p: Path) -> dict:
    """A JSON file of an eval folder; EvalError naming it when it does not parse."""
    try:
        return json.loads(Path(p).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise EvalError(f"{p}: not valid JSON ({e})") from None


def load_section(out: Path, name: str, kind: str, what: str) -> dict | None:
    """The JSON file `name` of DIR behind a report section (None when absent); EvalError unless its
    "kind" is `kind`."""
    p = Path(out) / name
    if not p.is_file():
        return None
    data = read_json(p)
    if data.get("kind") != kind:
        raise EvalError(f"{p}: not a bookft {what} file")
    return data


def write_section(res: dict, out: Path, name: str) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    p = out / name
    p.write_text(json.dumps(res, indent=1), encoding="utf-8")
    return p


def load_short(out: Path) -> dict | None:
    return load_section(out, SHORT_FILE, KIND, "short-eval")


def plot_short(res: dict, path: Path) -> Path:
    """Loss and token accuracy per set, base and tuned side by side."""
    sets = list(res["sets"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    x = np.arange(len(sets))
    for ax, key in zip(axes, ("loss", "accuracy"), strict=True):
        for k, (who, color) in enumerate((("base", "#8c8c8c"), ("tuned", "#1f77b4"))):
            ax.bar(x + (k - 0.5) * 0.38, [res["sets"][s][who][key] for s in sets], 0.38, label=who, color=color)
        ax.set_xticks(x, sets)
        ax.set_ylabel("loss (nats / token)" if key == "loss" else "token accuracy")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("short-context check: base vs tuned", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def short_section(out: Path) -> str:
    """The report's "Short-context check" section ('' when DIR has no short.json)."""
    res = load_short(out)
    if res is None:
        return ""
    png = plot_short(res, Path(out) / "short.png")
    rows = []
    for name, s in res["sets"].items():
        b, t = s["base"], s["tuned"]
        rows.append([name, s["documents"], f"{b['loss']:.4f}", f"{t['loss']:.4f}", f"{t['loss'] - b['loss']:+.4f}",
                     f"{b['accuracy']:.4f}", f"{t['accuracy']:.4f}", f"{t['accuracy'] - b['accuracy']:+.4f}"])
    head = ["set", "documents", "base loss", "tuned loss", "delta loss", "base accuracy", "tuned accuracy",
            "delta accuracy"]
    return (f"<h2>Short-context check</h2><p>Next-token loss and token accuracy on short documents (at most "
            f"{res['max_tokens']} tokens each): what long-context tuning cost at short range. Base: "
            f"{html.escape(res['models']['base'])}; tuned: {html.escape(res['models']['tuned'])}.</p>"
            f"{table(head, rows)}{img(png)}")


def write_short(res: dict, out: Path) -> Path:
    return write_section(res, out, SHORT_FILE)
