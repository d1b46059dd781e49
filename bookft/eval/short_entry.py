"""What `bookft eval short` does between parsing and printing: load base and tuned, score both sets,
write short.json and the report (the NIAH grid's report.html in the same folder, when there is one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from bookft.errors import EvalError
from bookft.eval.entry import load_subject, training_probe
from bookft.eval.ppl_report import write_sections_page
from bookft.eval.report import niah_results, write_report
from bookft.eval.short import generic_texts, held_out_texts, score_documents
from bookft.eval.short_report import KIND, write_short


def _encode(tok, texts: list[str], max_tokens: int) -> list[np.ndarray]:
    pre = list(tok.prefix_ids)
    return [np.array(pre + tok.encode(t).ids[:max_tokens - len(pre)], np.int32) for t in texts]


def _read_texts(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        try:
            out.append(Path(p).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise EvalError(f"--text {p}: cannot read it as UTF-8 text ({e})") from None
    return out


def evaluate_short(*, checkpoint: str | None, model_dir: str | None, base: str | None, tokenizer: str | None,
                   corpus: str | None, texts: list[str] | None, max_tokens: int, out: str | Path,
                   console: Console | None = None) -> dict:
    """Score base and tuned on the corpus's held-out documents and a generic text; write the report."""
    console = console or Console()
    if max_tokens < 2:
        raise EvalError(f"--max-tokens: must be >= 2, got {max_tokens}")
    tuned, tuned_tok, _, run_config, info = load_subject(checkpoint, model_dir, tokenizer)
    base = base or getattr(getattr(run_config, "model", None), "hf_path", None)
    if not base:
        raise EvalError("no base model to compare with: pass --base HF_DIR (the run started from a random init, "
                        "or the tuned model is an HF folder)")
    corpus = corpus or getattr(getattr(run_config, "data", None), "corpus", None)
    if not corpus:
        raise EvalError("no corpus for the held-out documents: pass --corpus DIR")
    from bookft.corpus import open_corpus

    sets = {"corpus held-out": held_out_texts(open_corpus(corpus)),
            "generic": _read_texts(texts) if texts else generic_texts()}
    base_model, base_tok, _, _, _ = load_subject(None, base, None)
    res = {"kind": KIND, "max_tokens": max_tokens, "corpus": str(corpus),
           "models": {"base": str(base), "tuned": info.get("checkpoint") or info.get("hf_dir", "")}, "sets": {}}
    for name, docs in sets.items():
        b = score_documents(base_model, _encode(base_tok, docs, max_tokens))
        t = score_documents(tuned, _encode(tuned_tok, docs, max_tokens))
        res["sets"][name] = {"documents": len(docs), "base": b, "tuned": t}
    out = Path(out)
    write_short(res, out)
    niah = niah_results(out)
    if niah is not None:  # the NIAH grid's report in this folder: re-rendered with the section
        report = write_report(niah, out, probe_rows=training_probe(niah.get("model", {}).get("checkpoint")))["report"]
    else:
        report = write_sections_page(out, "bookft eval: short-context check")  # DIR holds no NIAH results
    table = Table(title="short-context check (loss nats/token, token accuracy)")
    for col in ("set", "base loss", "tuned loss", "base acc", "tuned acc"):
        table.add_column(col, justify="left" if col == "set" else "right")
    for name, s in res["sets"].items():
        table.add_row(name, f"{s['base']['loss']:.4f}", f"{s['tuned']['loss']:.4f}",
                      f"{s['base']['accuracy']:.4f}", f"{s['tuned']['accuracy']:.4f}")
    console.print(table)
    console.print(f"wrote {report} and {out / 'short.json'}")
    return res
