"""The real-model flow: a pretrained HF folder tuned on the user's documents, judged base vs tuned.

`bookft quickstart --model DIR --docs PATH... [--heldout PATH...] [--size small|full]` and
benchmarks/real_flow.py call `run_tune_flow`:
1. ingest the documents into OUT/corpus with the model's tokenizer, plus synthesized RULER examples
   (multikey, multivalue, vartrack) in its chat template, the loss on the answers only
   (context_weight 0) and the plain text kept at full weight (corpus_weight 1), so the model keeps
   modelling the books;
2. ingest the held-out documents into OUT/heldout-corpus: the haystacks of every grid, and short
   passages held out for `bookft eval short`; the first characters of each held-out document go to
   OUT/ppl-text/ (perplexity over whole books at 4K costs hours on 2 CPU cores);
3. base grids (niah, multikey, vartrack, and multiquery: the transfer task, never trained on), by
   generation, on held-out haystacks, and base perplexity; cached under base_cache
   (bookft/tune_flow_evals.py);
4. train the preset (configs/smollm2-135m-books.yaml) on OUT/corpus in OUT/run; export the merged
   model to OUT/tuned-model;
5. the tuned grids; tuned perplexity beside base's; the short-context check (base and tuned);
   compare pages per task and OUT/report.html; OUT/summary.json.

Design choices:
- Sizes: `full` is the preset (2,048/4,096 tokens, 5 seeds, ppl at 1K/2K/4K: hours on 2 CPU
  cores); `small` (minutes) trains a few steps at 256/512 with local attention on one device, one
  seed, documents cut to their first characters. FlowSettings fields can be changed on top of either
  (`run_tune_flow(..., changes={...})`; the tests shrink `small` further).
- Every figure comes back in one dict (summary.json): per task, length and depth the base and tuned
  scores; perplexity per length; the short-context deltas; the wall time of each phase; the paths.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bookft import tune_flow_evals as ev

DEFAULT_PRESET = Path("configs/smollm2-135m-books.yaml")
TEXT_SUFFIXES = (".txt", ".md")
SMALL_ATTENTION = ("attention.strategy=local", "parallel.mesh.context=1", "parallel.cpu_devices=1")
# the small size's eight steps tune LoRA adapters, the recipe its documented figures were measured
# with, and hold only adapters' optimizer state: a user's own larger model fits where it loads
SMALL_LORA = ("model.lora.rank=16", "model.lora.alpha=32", "model.lora.targets=[q,k,v,o,gate,up,down]",
              "train.optimizer.lr=1e-3")


@dataclass(frozen=True, kw_only=True)
class FlowSettings:
    size: str
    lengths: tuple[int, ...]  # eval grid lengths; retrieval example lengths; the longest is data.seq_len
    seeds: tuple[int, ...]  # eval seeds per cell
    ppl_lengths: tuple[int, ...]
    depths: tuple[float, ...] = (10.0, 50.0, 90.0)
    tasks: tuple[str, ...] = ("niah", "multikey", "vartrack", "multiquery")
    transfer: tuple[str, ...] = ("niah", "multiquery")  # tasks no training example asks
    train_kinds: tuple[str, ...] = ("multikey", "multivalue", "vartrack")
    kind_shares: tuple[float, ...] = ()  # relative share of examples per train kind; () = equal
    rate: float = 0.5  # share of the training sequences that are synthesized examples
    task_distractors: int = 3  # keyed distractors per multikey training example (the eval's grid has 3)
    # example lengths (each dividing the longest eval length; () = the eval lengths) and the share of
    # synthesized sequences per length: a sequence of 4,096 tokens holds four examples of 1,024
    example_lengths: tuple[int, ...] = ()
    length_shares: tuple[float, ...] = ()
    ppl_chars: int = 40_000  # first characters of each held-out document scored by perplexity
    short_docs: int = 12  # held-out passages for `bookft eval short`
    short_chars: int = 1_500
    short_tokens: int = 512
    doc_chars: int | None = None  # documents cut to their first N characters (None: whole)
    steps: int | None = None  # None: the preset's train.steps
    overrides: tuple[str, ...] = ()  # run-config overrides (train and evals)
    workers: int = 2  # ingest processes


SIZES = {
    "full": FlowSettings(size="full", lengths=(2048, 4096), seeds=(0, 1, 2, 3, 4), ppl_lengths=(1024, 2048, 4096),
                         rate=0.8, kind_shares=(0.45, 0.1, 0.45), task_distractors=7,
                         example_lengths=(1024, 2048, 4096),
                         length_shares=(0.2, 0.3, 0.5)),
    "small": FlowSettings(size="small", lengths=(256, 512), seeds=(0,), ppl_lengths=(256, 512), ppl_chars=6_000,
                          short_docs=6, short_chars=1_000, short_tokens=256, doc_chars=120_000, steps=8,
                          overrides=SMALL_ATTENTION + SMALL_LORA),
}


def settings_for(size: str, changes: dict | None = None) -> FlowSettings:
    if size not in SIZES:
        from bookft.errors import ConfigError

        raise ConfigError(f"--size: small or full, got {size!r}")
    return dataclasses.replace(SIZES[size], **(changes or {}))


def base_key_settings(s: FlowSettings) -> dict[str, Any]:
    """The flow settings that the base evals' cache key holds (tune_flow_evals.cache_key)."""
    return {k: v for k, v in dataclasses.asdict(s).items() if k in ("lengths", "depths", "seeds", "tasks", "ppl_chars")}


def cut_text(text: str, start: int, n: int) -> str:
    """About n characters of text from `start`, ended at a space."""
    piece = text[start:start + n]
    return piece.rsplit(" ", 1)[0] if len(piece) == n and " " in piece else piece


def read_text(p: Path) -> str:
    """A plain-text file: UTF-8, else Windows-1252 (older e-texts)."""
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return p.read_text(encoding="cp1252", errors="replace")


def prepare_texts(docs: list[Path], heldout: list[Path], out: Path, s: FlowSettings) -> dict[str, Any]:
    """OUT/docs (cut documents, small), OUT/ppl-text and OUT/short-text; the paths."""
    for d in ("docs", "ppl-text", "short-text"):
        shutil.rmtree(out / d, ignore_errors=True)
        (out / d).mkdir(parents=True)
    if s.doc_chars:  # plain-text files cut to their first characters; folders and other formats as they are
        cut = []
        for i, p in enumerate(docs):
            if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES:
                p, text = out / "docs" / f"{i:02d}-{p.stem}.txt", cut_text(read_text(p), 0, s.doc_chars)
                p.write_text(text, encoding="utf-8")
            cut.append(p)
        docs = cut
    texts = [read_text(p) for p in heldout]
    ppl = []
    for i, (p, t) in enumerate(zip(heldout, texts, strict=True)):
        ppl.append(out / "ppl-text" / f"{i:02d}-{p.stem}.txt")
        ppl[-1].write_text(cut_text(t, 0, s.ppl_chars), encoding="utf-8")
    short = 0
    for i in range(s.short_docs):
        t = texts[i % len(texts)]
        start = s.ppl_chars + (i // len(texts)) * s.short_chars
        piece = cut_text(t, start, s.short_chars) if start < len(t) else ""
        if piece.strip():
            (out / "short-text" / f"passage-{i:02d}.txt").write_text(piece, encoding="utf-8")
            short += 1
    return {"docs": docs, "ppl": ppl, "short": short}


def _build(data: dict, console: Console, progress: bool) -> dict:
    from bookft.config import from_dict
    from bookft.ingest.config import IngestConfig
    from bookft.ingest.corpus_build import build_corpus
    from bookft.ingest.progress import RichProgress

    cfg = from_dict(IngestConfig, data)
    shutil.rmtree(cfg.out, ignore_errors=True)
    bar = RichProgress(console) if progress else None
    try:
        return build_corpus(cfg, bar)
    finally:
        if bar is not None:
            bar.stop()


def published(root: Path) -> dict | None:
    """The manifest of the corpus at `root` as build_corpus returned it (its path, and the retrieval
    summary when examples were synthesized); None when no version was published."""
    from bookft.corpus.store import version_numbers

    numbers = version_numbers(root) if root.is_dir() else []
    if not numbers:
        return None
    path = root / "versions" / f"{max(numbers):04d}"
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    manifest["path"] = str(path)
    if (path / "retrieval.json").is_file():
        manifest["retrieval"] = json.loads((path / "retrieval.json").read_text(encoding="utf-8"))
    return manifest


def ingest(model_dir: Path, texts: dict, heldout: list[Path], out: Path, s: FlowSettings, seed: int,
           console: Console, progress: bool, resume: bool = False) -> dict:
    """OUT/corpus (documents + synthesized examples) and OUT/heldout-corpus; their manifests.
    `resume`: the corpora an earlier call of this flow published are kept."""
    console.rule("[bold]1/5 ingest")
    if resume:
        kept = {"train": published(out / "corpus"), "heldout": published(out / "heldout-corpus")}
        if all(kept.values()):
            console.print(f"resumed: corpus {kept['train']['path']}, held-out corpus {kept['heldout']['path']}")
            return kept
    tok = {"path": str(model_dir)}
    train = _build({"name": "tune-docs", "out": str(out / "corpus"), "workers": s.workers, "tokenizer": tok,
                    "packing": {"seq_len": max(s.lengths)}, "sources": [{"path": str(p)} for p in texts["docs"]],
                    "retrieval": {"rate": s.rate, "lengths": list(s.example_lengths or s.lengths),
                                  "length_shares": list(s.length_shares), "kinds": list(s.train_kinds),
                                  "kind_shares": list(s.kind_shares), "task_distractors": s.task_distractors,
                                  "chat_template": None, "context_weight": 0.0, "answer_weight": 1.0,
                                  "corpus_weight": 1.0, "seed": seed}}, console, progress)
    sources = [{"path": str(p)} for p in heldout] + [{"path": str(out / "short-text"), "name": "short"}]
    held = _build({"name": "tune-heldout", "out": str(out / "heldout-corpus"), "workers": s.workers,
                   "tokenizer": tok, "packing": {"seq_len": max(s.lengths)}, "sources": sources,
                   "mix": {"holdout_docs": texts["short"], "holdout_max_tokens": s.short_tokens}},
                  console, progress)
    r = train.get("retrieval") or {}
    console.print(f"corpus {train['path']}: {train['counts']['sequences']:,} sequences, "
                  f"{r.get('examples', 0):,} synthesized examples {r.get('per_kind', {})}; held-out corpus "
                  f"{held['path']}")
    return {"train": train, "heldout": held}


def train_run(cfg, out: Path, console: Console, progress: bool, resume: bool = False):
    """Train in OUT/run (fresh, or from its last checkpoint with `resume`); (TrainResult, run dir)."""
    from bookft.train.progress import TrainProgress
    from bookft.train.trainer import train

    run = out / "run"
    if not resume:
        shutil.rmtree(run, ignore_errors=True)
    console.rule(f"[bold]3/5 train ({cfg.train.steps} steps at {cfg.data.seq_len} tokens)")
    if progress:
        with TrainProgress(console, cfg.train.steps) as bar:
            result = train(cfg, run_dir=run, progress=bar.update)
    else:
        result = train(cfg, run_dir=run)
    if result.interrupted:
        from bookft.errors import TrainError

        raise TrainError(f"training stopped at step {result.step} of {cfg.train.steps}; its checkpoint is in "
                         f"{run / 'checkpoints'}: run the same command with --resume to go on")
    return result, run


def export(run: Path, out: Path) -> Path:
    """The run's last checkpoint, LoRA merged, as an HF folder: OUT/tuned-model."""
    from bookft.train.export import export_checkpoint

    return Path(export_checkpoint(run, out / "tuned-model", overwrite=True))


def _timed(times: dict, name: str, fn, *args, **kw):
    t0 = time.perf_counter()
    try:
        return fn(*args, **kw)
    finally:
        times[name] = round(time.perf_counter() - t0, 1)


def run_tune_flow(model_dir: str | Path, docs: list[Path], heldout: list[Path], out: str | Path, *,
                  config: str | Path | None = None, size: str = "small", seed: int = 0,
                  base_cache: str | Path | None = None, changes: dict | None = None,
                  overrides: list[str] | None = None, console: Console | None = None,
                  progress: bool = True, resume: bool = False) -> dict[str, Any]:
    """ingest -> base evals (cached) -> train -> export -> tuned evals -> compare; the summary dict.
    `overrides` (run-config KEY=VALUE) go after the size's own, into the settings the summary keeps.
    `resume`: an interrupted call with the same arguments (OUT/flow.json) goes on from its corpora and
    its run's last checkpoint (checkpoint.every sets how much an interruption loses)."""
    from bookft.train.config import load_run_config

    console = console or Console()
    model_dir, out, s = Path(model_dir), Path(out), settings_for(size, changes)
    s = dataclasses.replace(s, overrides=s.overrides + tuple(overrides or ()))
    config = Path(config) if config is not None else DEFAULT_PRESET
    out.mkdir(parents=True, exist_ok=True)
    resume = _check_resume(out, {"settings": dataclasses.asdict(s), "seed": seed, "config": str(config),
                                 "model": str(model_dir), "docs": [str(p) for p in docs],
                                 "heldout": [str(p) for p in heldout]}, resume)
    times: dict[str, float] = {}
    texts = _timed(times, "prepare_s", prepare_texts, [Path(p) for p in docs], [Path(p) for p in heldout], out, s)
    manifests = _timed(times, "ingest_s", ingest, model_dir, texts, heldout, out, s, seed, console, progress,
                       resume)
    overrides = [f"model.hf_path={model_dir}", f"data.corpus={out / 'corpus'}", f"data.seq_len={max(s.lengths)}",
                 f"train.seed={seed}", f"data.seed={seed}", *([f"train.steps={s.steps}"] if s.steps else []),
                 *s.overrides]
    cfg = load_run_config(config, overrides)
    if cfg.parallel.cpu_devices:
        from bookft.parallel.mesh import ensure_cpu_devices

        ensure_cpu_devices(cfg.parallel.cpu_devices)  # before jax starts its backend
    grid_kw = {"config": config, "overrides": overrides, "haystack": out / "heldout-corpus", "console": console,
               "progress": progress}
    key = ev.cache_key(model_dir, base_key_settings(s), cfg, list(heldout)) if base_cache else None
    console.rule("[bold]2/5 eval: the base model")
    cache = Path(base_cache) if base_cache else None
    base = _timed(times, "eval_base_s", ev.grids, model_dir, s, out / "eval-base", cache=cache, key=key, **grid_kw)
    base_ppl = _timed(times, "ppl_base_s", ev.base_ppl, model_dir, texts["ppl"], s.ppl_lengths, config=config,
                      overrides=overrides, out=out / "eval-base" / "ppl", console=console, progress=progress,
                      cache=cache, key=key)
    result, run = _timed(times, "train_s", train_run, cfg, out, console, progress, resume)
    tuned_dir = _timed(times, "export_s", export, run, out)
    console.rule("[bold]4/5 eval: the tuned model")
    tuned = _timed(times, "eval_tuned_s", ev.grids, tuned_dir, s, out / "eval-tuned", cache=None, key=None,
                   **grid_kw)
    ppl = _timed(times, "ppl_s", ev.run_ppl, model_dir, tuned_dir, texts["ppl"], s.ppl_lengths, config=config,
                 overrides=overrides, out=out / "eval-ppl", console=console, progress=progress, base=base_ppl)
    short = _timed(times, "short_s", ev.run_short, model_dir, tuned_dir, out / "heldout-corpus", s,
                   out=out / "eval-short", console=console)
    console.rule("[bold]5/5 report")
    pages = ev.compare_all(out / "eval-base", out / "eval-tuned", out, s.tasks)
    times["total_s"] = round(sum(times.values()), 1)
    times["train_steps_s"] = _step_seconds(run)
    summary = _summary(s, seed, model_dir, tuned_dir, run, out, manifests, result, (base, tuned, ppl, short),
                       times, key)
    summary["paths"]["report"] = str(ev.write_index(out, summary, pages, {
        "perplexity": out / "eval-ppl" / "report.html", "short-context check": out / "eval-short" / "report.html"}))
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print_summary(summary, console)
    return summary


def _check_resume(out: Path, state: dict, resume: bool) -> bool:
    """Record this call's arguments in OUT/flow.json; with `resume`, they must be the recorded ones
    (else a ConfigError). True when there is an earlier call to go on from."""
    from bookft.errors import ConfigError

    path = out / "flow.json"
    state = json.loads(json.dumps(state))  # tuples as lists, as read back
    if resume and path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        if before != state:
            changed = sorted(k for k in set(before) | set(state) if before.get(k) != state.get(k))
            raise ConfigError(f"--resume: {out} holds a flow started with other {', '.join(changed)} "
                              f"({path}); run it as it was started, or drop --resume to start over")
        return True
    path.write_text(json.dumps(state, indent=1), encoding="utf-8")
    return False


def _step_seconds(run: Path) -> float:
    """The training steps' own time (metrics.jsonl), across every call that trained this run."""
    log = run / "metrics.jsonl"
    if not log.is_file():
        return 0.0
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return round(sum(r.get("step_time_s") or 0.0 for r in rows if "step" in r), 1)


def _summary(s: FlowSettings, seed: int, model_dir: Path, tuned_dir: Path, run: Path, out: Path, manifests: dict,
             result, evals: tuple, times: dict, key: str | None) -> dict[str, Any]:
    base, tuned, ppl, short = evals
    train_m = manifests["train"]
    return {
        "settings": {**dataclasses.asdict(s), "seed": seed, "base_cache_key": key},
        "tasks": ev.task_figures(base, tuned),
        "ppl": ev.ppl_figures(ppl),
        "short": ev.short_figures(short),
        "train": {"steps": result.step, "final_loss": result.losses.get(result.step),
                  "tokens_per_s": result.tokens_per_s},
        "corpus": {"sequences": train_m["counts"]["sequences"], "retrieval": train_m.get("retrieval"),
                   "heldout_sequences": manifests["heldout"]["counts"]["sequences"]},
        "times": times,
        "paths": {"out": str(out), "model": str(model_dir), "tuned_model": str(tuned_dir), "run": str(run),
                  "corpus": train_m["path"], "heldout_corpus": manifests["heldout"]["path"],
                  "summary": str(out / "summary.json")},
    }


def print_summary(summary: dict, console: Console) -> None:
    from rich.table import Table

    console.print(ev.figures_table(summary["tasks"]))
    t = Table(title="held-out perplexity: base -> tuned")
    t.add_column("length", justify="right")
    t.add_column("base", justify="right")
    t.add_column("tuned", justify="right")
    for n, v in summary["ppl"].items():
        t.add_row(n, f"{v['base']:.3f}", f"{v['tuned']:.3f}")
    console.print(t)
    for name, v in summary["short"].items():
        console.print(f"short-context {name}: loss {v['base_loss']:.4f} -> {v['tuned_loss']:.4f} "
                      f"({v['loss_delta']:+.4f}), accuracy {v['accuracy_delta']:+.4f}")
    console.print(" ".join(f"{k[:-2]} {v:.0f} s" for k, v in summary["times"].items()))
    console.print(f"[green]report[/]: {summary['paths']['report']}  (summary {summary['paths']['summary']})")


def tune_command(model: Path, docs: list[Path], heldout: list[Path] | None, *, size: str, out: Path,
                 config: Path | None, seed: int, overrides: list[str] | None = None,
                 console: Console | None = None, resume: bool = False) -> dict[str, Any]:
    """`bookft quickstart --model`: the held-out default (the last --docs file), then the flow."""
    from bookft.errors import ConfigError

    console = console or Console()
    docs = list(docs)
    if not docs:
        raise ConfigError("--model needs --docs PATH (repeat it for more documents)")
    if not heldout:
        if len(docs) < 2:
            raise ConfigError("give --heldout PATH, or at least two --docs (the last one is held out)")
        heldout = [docs.pop()]
        console.print(f"holding out the last --docs file, {heldout[0]} (--heldout to choose)")
    return run_tune_flow(model, docs, list(heldout), out, config=config, size=size, seed=seed,
                         base_cache=out / "base-cache", overrides=overrides, console=console, resume=resume)
