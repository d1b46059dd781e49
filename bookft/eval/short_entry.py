"""What `bookft eval short` does between parsing and printing: load base and tuned, score both sets,
write short.json and the report (the NIAH grid's report.html in the same folder, when there is one).

Design choices:
- One typed call, `evaluate_short(run_config, short_config, subject)`, as `bookft eval niah`'s
  (bookft.eval.entry.evaluate): the subject is the tuned model; the base model and the corpus come
  from `short_config`, else from the run config (the checkpoint's own when None): model.hf_path and
  data.corpus. Reads no config file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from bookft.errors import EvalError
from bookft.eval.entry import Subject, load_subject, read_texts, training_probe
from bookft.eval.ppl_report import write_sections_page
from bookft.eval.report import niah_results, write_report
from bookft.eval.short import generic_texts, held_out_texts, score_documents
from bookft.eval.short_report import KIND, write_short


def _encode(tok, texts: list[str], max_tokens: int) -> list[np.ndarray]:
    pre = list(tok.prefix_ids)
    return [np.array(pre + tok.encode(t).ids[:max_tokens - len(pre)], np.int32) for t in texts]


@dataclass(frozen=True)
class ShortConfig:
    """The base model (an HF folder), the corpus whose held-out documents are scored, the generic
    documents (`texts`, UTF-8 files; none: the eval's generated essay), tokens scored per document."""

    base: str | None = None
    corpus: str | None = None
    texts: tuple[str, ...] = ()
    max_tokens: int = 1024

    def __post_init__(self) -> None:
        if self.max_tokens < 2:
            raise EvalError(f"--max-tokens: must be >= 2, got {self.max_tokens}")


def evaluate_short(run_config, short_config: ShortConfig, subject: Subject, *, out: str | Path,
                   console: Console | None = None) -> dict:
    """Score base and tuned on the corpus's held-out documents and a generic text; write the report."""
    console = console or Console()
    max_tokens, texts = short_config.max_tokens, list(short_config.texts)
    tuned, tuned_tok, _, own_config, info = load_subject(subject.checkpoint, subject.model_dir, subject.tokenizer)
    run_config = run_config or own_config
    base = short_config.base or getattr(getattr(run_config, "model", None), "hf_path", None)
    if not base:
        raise EvalError("no base model to compare with: pass --base HF_DIR (the run started from a random init, "
                        "or the tuned model is an HF folder)")
    corpus = short_config.corpus or getattr(getattr(run_config, "data", None), "corpus", None)
    if not corpus:
        raise EvalError("no corpus for the held-out documents: pass --corpus DIR")
    from bookft.corpus import open_corpus

    sets = {"corpus held-out": held_out_texts(open_corpus(corpus)),
            "generic": read_texts(texts) if texts else generic_texts()}
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
