"""What `bookft eval ppl` does between parsing and printing: load each model, score its windows, write
results.json, ppl.json, ppl.png and the report section.

Design choices:
- Subjects are HF folders (`--model`, each with its own tokenizer.json) and training runs
  (`--checkpoint`), loaded as `bookft eval niah` loads them (entry.load_on_mesh): onto the mesh of
  the --config run config or else of the run's own, with the configured attention strategy and
  kernel (entry.run_attention), so a window of a million tokens runs as a training sequence does.
  Each is scored, then dropped, before the next loads. Labels: --names, else the folder names.
- Compute dtype: float32 by default for every subject (`--dtype`), so base and tuned are compared
  by the same arithmetic (a bf16 program moves perplexity by about 0.1 %, STACK-FACTS).
- Documents: the --text files (each one document), else the --corpus's held-out documents (manifest
  mix.held_out), else its documents (trained on: the report says so); else the checkpoint's corpus.
  Each model tokenizes the raw text with its own tokenizer, without special tokens.
- results.json: one model keeps the flat form, `"ppl": {"1024": x, ...}` (likewise "loss",
  "tokens", "windows" and "loss_by_position", per length); several models nest each of those keys
  by label first, `"ppl": {"base": {"1024": x}, "tuned": {...}}`. "models" is always keyed by label
  (source, native length, attention, timing, and the native-length flag `within_native`). When the
  folder holds the NIAH grid's results.json, that file keeps the grid and gains "ppl" and
  "loss_by_position"; ppl.json always holds the whole record, and report.html its section.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bookft.errors import EvalError
from bookft.eval.drivers import check_model
from bookft.eval.entry import Subject, load_on_mesh, read_texts, realise, run_attention, training_probe
from bookft.eval.ppl import perplexity, windows_of
from bookft.eval.ppl_report import (
    KIND,
    PER_LENGTH_KEYS,
    fmt_len,
    native_rise,
    rise_line,
    write_ppl,
    write_sections_page,
)
from bookft.eval.report import niah_results, write_report
from bookft.eval.short import held_out_texts

DEFAULT_LENGTHS = (1024, 2048, 4096)
DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class PplConfig:
    """What `bookft eval ppl` scores: window lengths (sorted, once each), the sliding windows' stride
    (None: non-overlapping), the compute dtype of every subject, and the documents: `texts` (files,
    each one document), else `corpus` (its held-out documents, else all), else the run's corpus."""

    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    stride: int | None = None
    dtype: str = "float32"
    texts: tuple[str, ...] = ()
    corpus: str | None = None
    max_documents: int | None = None

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise EvalError(f"--dtype: float32 or bfloat16, got {self.dtype!r}")
        object.__setattr__(self, "lengths", tuple(sorted(set(self.lengths or DEFAULT_LENGTHS))))


def labelled_subjects(models: list[str], checkpoints: list[str], names: list[str] | None) -> list[Subject]:
    """The labelled subjects: --model folders, then --checkpoint runs."""
    subs = [(None, m) for m in models] + [(c, None) for c in checkpoints]
    if not subs:
        raise EvalError("give --model HF_DIR or --checkpoint RUN_DIR (either may be repeated)")
    if names and len(names) != len(subs):
        raise EvalError(f"--names: {len(names)} labels for {len(subs)} models (--model folders first, "
                        "then --checkpoint runs)")
    labels = list(names or [])
    if not names:  # the folder names, a duplicate numbered by its place
        for i, (ck, md) in enumerate(subs):
            base = Path(ck or md).resolve().name or f"model{i + 1}"
            labels.append(base if base not in labels else f"{base}-{i + 1}")
    if len(set(labels)) != len(labels):
        raise EvalError(f"--names: labels must differ, got {labels}")
    return [Subject(checkpoint=ck, model_dir=md, label=lb) for lb, (ck, md) in zip(labels, subs, strict=True)]


def documents(texts: list[str] | None, corpus: str | None, max_documents: int | None) -> tuple[list[str], dict]:
    """(texts, description) from --text files or a corpus (module doc)."""
    if texts:
        docs, info = read_texts(texts), {"source": "--text files", "names": list(texts)}
    elif corpus:
        from bookft.corpus import open_corpus

        c = open_corpus(corpus)
        if (c.manifest.get("mix") or {}).get("held_out"):
            docs, info = held_out_texts(c), {"source": f"held-out documents of {corpus}"}
        else:
            docs = list(c.documents()["text"])
            info = {"source": f"all documents of {corpus} (it holds none out: these were trained on)"}
    else:
        raise EvalError("give --text FILE (a long document; repeat for more) or --corpus DIR")
    docs = docs[:max_documents] if max_documents else docs
    return docs, {**info, "count": len(docs)}


def _progress(console: Console, enabled: bool) -> Progress:
    return Progress(TextColumn("[bold]ppl[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("windows"), TimeElapsedColumn(), console=console, disable=not enabled)


def score_subject(model, tok, lengths: list[int], stride: int | None, texts: list[str], *, attend, layout,
                  console: Console, progress: bool, label: str) -> tuple[dict, int]:
    """({length: scores}, document tokens) of one loaded model."""
    ids = [np.asarray(e.ids, np.int32) for e in tok.tok.encode_batch(texts, add_special_tokens=False)]
    total = sum(len(windows_of(len(d), n, min(stride or n, n))) for n in lengths for d in ids)
    with _progress(console, progress) as bar:
        job = bar.add_task(label, total=total)
        scores = perplexity(model, ids, lengths, stride, attend=attend, layout=layout,
                            advance=lambda k: bar.advance(job, k))
    return scores, int(sum(len(d) for d in ids))


def evaluate_ppl(run_config, ppl_config: PplConfig, subjects: list[Subject], *, out: str | Path,
                 console: Console | None = None, progress: bool = True, reuse: dict[str, dict] | None = None) -> dict:
    """Perplexity of every subject by window length on the same documents; writes the report.
    run_config: the RunConfig whose attention and parallel sections score the windows (None: each
    checkpoint's own, an HF folder on one device). `reuse`: {label: subject_record(...)} of subjects
    scored before on these documents and lengths and stride (the tune flow's cached base model);
    they are not loaded again. Reads no config file."""
    console = console or Console()
    c = ppl_config
    lengths, stride, dtype, corpus = list(c.lengths), c.stride, c.dtype, c.corpus
    texts, max_documents = list(c.texts), c.max_documents
    file_run_config = realise(run_config)
    per: dict[str, dict] = {}
    info_by: dict[str, dict] = {}
    texts_got, docs_info = None, None
    for sub in subjects:
        label, ck, md = sub.label, sub.checkpoint, sub.model_dir
        if label in (reuse or {}):
            rec = reuse[label]
            if sorted(int(n) for n in rec["scores"]) != lengths:
                raise EvalError(f"{label}: the reused scores are at lengths {sorted(rec['scores'])}, not {lengths}")
            per[label], info_by[label] = {int(n): v for n, v in rec["scores"].items()}, rec["info"]
            continue
        model, tok, model_config, run_config, info, mesh = load_on_mesh(ck, md, None, file_run_config)
        if texts_got is None:  # a run brings its corpus when neither --text nor --corpus is given
            corpus = corpus or getattr(getattr(run_config, "data", None), "corpus", None)
            texts_got, docs_info = documents(texts, corpus, max_documents)
        check_model(model_config, [], tok.vocab_size)  # vocabulary only: beyond native length is measured
        model.config = dataclasses.replace(model.config, compute_dtype=dtype)
        attend, layout = run_attention(run_config, mesh, 0, info)
        start = time.perf_counter()
        per[label], doc_tokens = score_subject(model, tok, lengths, stride, texts_got, attend=attend, layout=layout,
                                               console=console, progress=progress, label=label)
        seconds = time.perf_counter() - start
        native = int(model_config.max_position_embeddings)
        info_by[label] = {"source": info.get("checkpoint") or info.get("hf_dir", ""), "native_length": native,
                          "dtype": dtype, "tokenizer": tok.fingerprint, "document_tokens": doc_tokens,
                          "attention": info["attention"], "seconds": round(seconds, 2),
                          "within_native": native_rise({str(n): s["ppl"] for n, s in per[label].items()}, native)}
        del model
    if docs_info is None:  # every subject reused
        texts_got, docs_info = documents(texts, corpus, max_documents)
    res = assemble(per, info_by, lengths, stride, docs_info)
    import jax

    if jax.process_index() != 0:  # multi-host: every process scores (the same sums), process 0 reports
        return res
    _write(res, Path(out))
    print_table(res, console)
    console.print(f"wrote {Path(out) / 'results.json'}, {Path(out) / 'ppl.json'} and {Path(out) / 'report.html'}")
    return res


def subject_record(res: dict, label: str) -> dict:
    """One subject of an evaluate_ppl result, as `reuse` takes it back: {"scores", "info"}."""
    flat = len(res["models"]) == 1
    scores = {str(n): {k: (res[k] if flat else res[k][label])[str(n)] for k in PER_LENGTH_KEYS}
              for n in res["lengths"]}
    return {"scores": scores, "info": res["models"][label]}


def assemble(per: dict[str, dict], info_by: dict[str, dict], lengths: list[int], stride: int | None,
             docs_info: dict) -> dict:
    """The results dict (module doc for its shape)."""
    res: dict = {"kind": KIND, "version": 1, "lengths": lengths, "stride": stride,
                 "documents": docs_info, "models": info_by}
    for key in PER_LENGTH_KEYS:
        nested = {label: {str(n): s[key] for n, s in scores.items()} for label, scores in per.items()}
        res[key] = next(iter(nested.values())) if len(per) == 1 else nested
    return res


def _write(res: dict, out: Path) -> None:
    write_ppl(res, out)
    niah = niah_results(out)
    if niah is not None:  # the NIAH grid's folder: its results.json gains the headline, its report the section
        niah.update(ppl=res["ppl"], loss_by_position=res["loss_by_position"])
        write_report(niah, out, probe_rows=training_probe(niah.get("model", {}).get("checkpoint")))
    else:
        (out / "results.json").write_text(json.dumps(res, indent=1), encoding="utf-8")
        write_sections_page(out)


def print_table(res: dict, console: Console) -> None:
    labels = list(res["models"])
    flat = len(labels) == 1
    table = Table(title="perplexity by window length" + (f" (stride {res['stride']})" if res["stride"] else ""))
    table.add_column("length", justify="right")
    for lb in labels:
        table.add_column(f"{lb} ppl", justify="right")
        table.add_column(f"{lb} tokens", justify="right")
    for n in res["lengths"]:
        cells = []
        for lb in labels:
            ppl, tokens = (res[k] if flat else res[k][lb] for k in ("ppl", "tokens"))
            cells += [f"{ppl[str(n)]:.3f}", f"{tokens[str(n)]:,}"]
        table.add_row(fmt_len(n), *cells)
    console.print(table)
    for lb, m in res["models"].items():
        line = escape(rise_line(lb, m["within_native"]))
        console.print(f"[{'red' if m['within_native']['rises'] else 'green'}]{line}[/]")

