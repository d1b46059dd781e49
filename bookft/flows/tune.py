"""The real-model flow: a pretrained HF folder tuned on the user's documents, judged base vs tuned.

`bookft quickstart --model DIR --docs PATH... [--heldout PATH...] [--size small|full]` and
benchmarks/real_flow.py call `run_tune_flow`, which checks the model, its tokenizer, the
documents and the held-out texts first (inputs.check_inputs), then:
1. ingest the documents into OUT/corpus with the model's tokenizer, packed to the longest length,
   with `short` documents as a share of the tokens (ProLong's mix) and examples from the training
   generator (bookft.needles.train: niah, multikey, multivalue, vartrack in its own wording) in a
   share of the sequences, in the model's chat template; an example's loss is on its answer and
   the end-of-turn after it (context_weight 0), the plain text keeps full weight (corpus_weight 1);
2. ingest the held-out documents into OUT/heldout-corpus: the haystacks of every grid, and short
   passages held out for `bookft eval short`; the first characters of each held-out document go to
   OUT/ppl-text/ (perplexity over whole books at 4K costs hours on 2 CPU cores);
3. base and few-shot base grids (multikey and vartrack, and the untrained families cwe, niah_fact,
   multikey_uuid, hops) by generation on the split's held-out haystacks, and base perplexity;
   cached under base_cache (tune_evals.py, base_cache.py);
4. train the preset (configs/smollm2-135m-books.yaml) on OUT/corpus in OUT/run; export the merged
   model to OUT/tuned-model; with dev_grids, the tuned model's headline grids on the dev split
   (choosing between recipes: one that loses there is stopped before it touches the test split);
5. the tuned grids (each task kept under OUT/tuned-cache as it finishes, so --resume goes on from
   the next); tuned perplexity beside base's; the short-context check (base and tuned);
   compare pages per task and OUT/report.html (tune_report.py); OUT/summary.json.

Design choices:
- The run config is loaded once, here, from the preset and the flow's overrides (the model, the
  corpus, the longest length, the seeds, the size's own, the caller's); train and every eval take
  that RunConfig (tune_evals.py), so what trains is what is scored.
- Sizes and their settings: tune_settings.py.
- Every figure comes back in the flows' one summary shape (summary.py), written as summary.json:
  per task, length and depth the base and tuned scores; perplexity per length; the short-context
  deltas; the wall time of each phase; the paths.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from bookft.flows import phases
from bookft.flows import tune_evals as ev
from bookft.flows.inputs import check_inputs, prepare_texts
from bookft.flows.summary import corpus_figures, flow_summary, headline, task_figures, train_figures
from bookft.flows.tune_report import compare_all, ppl_figures, print_summary, short_figures, write_index
from bookft.flows.tune_settings import (
    DEFAULT_PRESET,
    SIZES,
    FlowSettings,
    base_key_settings,
    dev_settings,
    settings_for,
)

__all__ = ["DEFAULT_PRESET", "SIZES", "FlowSettings", "ingest", "published", "run_tune_flow",
           "settings_for"]


def _build(data: dict, console: Console, progress: bool) -> dict:
    from bookft.config import from_dict
    from bookft.ingest.config import IngestConfig

    return phases.build(from_dict(IngestConfig, data), console, progress, fresh=True)


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


def train_corpus(model_dir: Path, docs: list[Path], short: Path | None, out: Path, s: FlowSettings, seed: int) -> dict:
    """The training corpus's definition (ProLong's recipe, FlowSettings): the documents packed to the
    longest length, `short` documents as s.short_share of the tokens, and s.rate of the sequences
    synthesized by s.generator."""
    data: dict = {"name": "tune-docs", "out": str(out / "corpus"), "workers": s.workers,
                  "tokenizer": {"path": str(model_dir)}, "packing": {"seq_len": max(s.lengths)},
                  "sources": [{"path": str(p)} for p in docs],
                  "retrieval": {"rate": s.rate, "generator": s.generator,
                                "lengths": list(s.example_lengths or s.lengths),
                                "length_shares": list(s.length_shares), "asks": list(s.example_asks),
                                "kinds": list(s.train_kinds),
                                "kind_shares": list(s.kind_shares), "task_distractors": s.task_distractors,
                                "chat_template": None, "context_weight": 0.0, "answer_weight": 1.0,
                                "corpus_weight": 1.0, "seed": seed}}
    if short is not None:
        data["sources"].append({"path": str(short), "name": "short"})
        data["mix"] = {"short_source": "short", "short_share": s.short_share, "seed": seed}
    return data


def ingest(model_dir: Path, texts: dict, heldout: list[Path], out: Path, s: FlowSettings, seed: int,
           console: Console, progress: bool, resume: bool = False, short: Path | None = None) -> dict:
    """OUT/corpus (documents, short documents, synthesized examples) and OUT/heldout-corpus; their
    manifests. `resume`: the corpora an earlier call of this flow published are kept."""
    if resume:
        kept = {"train": published(out / "corpus"), "heldout": published(out / "heldout-corpus")}
        if all(kept.values()):
            console.print(f"resumed: corpus {kept['train']['path']}, held-out corpus {kept['heldout']['path']}")
            return kept
    tok = {"path": str(model_dir)}
    train = _build(train_corpus(model_dir, texts["docs"], short, out, s, seed), console, progress)
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




def run_tune_flow(model_dir: str | Path, docs: list[Path], heldout: list[Path], out: str | Path, *,
                  config: str | Path | None = None, size: str = "small", seed: int = 0,
                  short: str | Path | None = None, other: list[Path] = (),
                  base_cache: str | Path | None = None, changes: dict | None = None,
                  overrides: list[str] | None = None, console: Console | None = None,
                  progress: bool = True, resume: bool = False, dev_grids: bool = False,
                  families: bool = True) -> dict[str, Any]:
    """check -> ingest -> base and few-shot evals (cached) -> train -> export -> tuned evals -> compare;
    the summary. `short`: a folder of short documents of other kinds for the training mix; `other`:
    held-out texts of other kinds (code, legal), scored by perplexity beside the held-out books.
    `overrides` (run-config KEY=VALUE) go after the size's own, into the settings the summary keeps.
    `resume`: an interrupted call with the same arguments (OUT/flow.json) goes on from its corpora and
    its run's last checkpoint (checkpoint.every sets how much an interruption loses). `dev_grids`: the
    tuned model's headline tasks on the dev split too (tune_settings.dev_settings), right after export,
    so that a recipe that loses on dev can be stopped before it touches the test split; their rows
    join the headline with split "dev". `families=False`: no model is scored on the untrained
    families (an ablation that asks only what the headline tasks gain). The cache keys and OUT/flow.json
    still hold the whole protocol, so the base grids come from the same cache, and a flow may go on
    (--resume) with or without its families: the grids it finished are kept."""
    from bookft.train.config import load_run_config

    console = console or Console()
    model_dir, out, s = Path(model_dir), Path(out), settings_for(size, changes)
    s = dataclasses.replace(s, overrides=s.overrides + tuple(overrides or ()))
    docs, heldout, other = [Path(p) for p in docs], [Path(p) for p in heldout], [Path(p) for p in other]
    short = Path(short) if short is not None else None
    config = Path(config) if config is not None else DEFAULT_PRESET
    check_inputs(model_dir, docs, heldout, s, short=short, other=other)
    cfg = load_run_config(config, [f"model.hf_path={model_dir}", f"data.corpus={out / 'corpus'}",
                                   f"data.seq_len={max(s.lengths)}", f"train.seed={seed}", f"data.seed={seed}",
                                   *([f"train.steps={s.steps}"] if s.steps else []), *s.overrides])
    out.mkdir(parents=True, exist_ok=True)
    resume = _check_resume(out, {"settings": dataclasses.asdict(s), "seed": seed, "config": str(config),
                                 "model": str(model_dir), "docs": [str(p) for p in docs],
                                 "heldout": [str(p) for p in heldout], "short": str(short) if short else None,
                                 "other": [str(p) for p in other]}, resume)
    steps = phases.Steps(console, (6 if s.fewshot else 5) + dev_grids)
    texts = steps.timed("prepare_s", prepare_texts, docs, heldout, out, s, other=other)
    steps.rule("ingest")
    manifests = steps.timed("ingest_s", ingest, model_dir, texts, heldout, out, s, seed, console, progress, resume,
                            short=short)
    if cfg.parallel.cpu_devices:
        from bookft.parallel.mesh import ensure_cpu_devices

        ensure_cpu_devices(cfg.parallel.cpu_devices)  # before jax starts its backend
    kw = {"run_config": cfg, "console": console, "progress": progress}
    key = ev.cache_key(model_dir, base_key_settings(s), cfg, heldout) if base_cache else None
    fewshot_key = ev.cache_key(model_dir, base_key_settings(s), cfg, heldout, fewshot=True) if base_cache else None
    protocol = s  # the cache keys (and flow.json) hold the whole protocol, scored or not
    if not families:
        s = dataclasses.replace(s, families=())
    cache = Path(base_cache) if base_cache else None
    grids: dict[str, dict] = {}
    hay = {"haystack": out / "heldout-corpus", **kw}
    steps.rule("eval: the base model")
    grids["base"] = steps.timed("eval_base_s", ev.grids, model_dir, s, out / "eval-base", cache=cache, key=key, **hay)
    if s.fewshot:
        steps.rule(f"eval: the base model, {s.fewshot} solved examples in each prompt")
        grids["fewshot"] = steps.timed("eval_fewshot_s", ev.grids, model_dir, s, out / "eval-fewshot",
                                       model="fewshot", cache=cache, key=fewshot_key, **hay)
    ppl_sets = {"books": texts["ppl"], **({"other": texts["other"]} if texts["other"] else {})}
    base_ppl = steps.timed("ppl_base_s", lambda: {
        name: ev.base_ppl(model_dir, t, s.ppl_lengths, out=out / "eval-base" / f"ppl-{name}", cache=cache, key=key,
                          **kw) for name, t in ppl_sets.items()})
    steps.rule(phases.train_title(cfg))
    result = steps.timed("train_s", phases.train, cfg, out / "run", console, progress, fresh=not resume,
                         again="run the same command with --resume to go on")
    tuned_dir = steps.timed("export_s", phases.export, out / "run", out / "tuned-model")
    dev = _tuned_grids(tuned_dir, dev_settings(s), out, "dev", steps, heldout, hay, dev_settings(protocol)) \
        if dev_grids else {}
    grids["tuned"] = _tuned_grids(tuned_dir, s, out, "tuned", steps, heldout, hay, protocol)
    ppl = steps.timed("ppl_s", lambda: {
        name: ppl_figures(ev.run_ppl(model_dir, tuned_dir, t, s.ppl_lengths, out=out / f"eval-ppl-{name}",
                                     base=base_ppl[name], **kw)) for name, t in ppl_sets.items()})
    short_res = steps.timed("short_s", ev.run_short, model_dir, tuned_dir, out / "heldout-corpus", s,
                            out=out / "eval-short", console=console)
    return _report(out, s, seed, {"base": key, "fewshot": fewshot_key}, grids, ppl, short_res, result, manifests,
                   model_dir, tuned_dir, steps, console, dev)


def _tuned_grids(tuned_dir: Path, s: FlowSettings, out: Path, name: str, steps: phases.Steps, heldout: list[Path],
                 hay: dict, protocol: FlowSettings) -> dict[str, dict]:
    """The tuned model's grids of `s` in OUT/eval-<name> (name: tuned, the flow's split; dev). Each
    finished task is kept under OUT/tuned-cache, keyed by every byte of the tuned weights: a flow
    stopped during these grids goes on from the next task with --resume. The key holds `protocol`, the
    settings before any families were left out."""
    steps.rule("eval: the tuned model" + (" on the dev split" if name == "dev" else ""))
    key = ev.cache_key(tuned_dir, base_key_settings(protocol), hay["run_config"], heldout, whole=True)
    return steps.timed(f"eval_{name}_s", ev.grids, tuned_dir, s, out / f"eval-{name}", model="tuned",
                       cache=out / "tuned-cache", key=key, **hay)


def _report(out: Path, s: FlowSettings, seed: int, keys: dict, grids: dict, ppl: dict, short_res: dict, result,
            manifests: dict, model_dir: Path, tuned_dir: Path, steps: phases.Steps, console: Console,
            dev: dict[str, dict] | None = None) -> dict[str, Any]:
    """The compare pages, OUT/summary.json (with the headline rows, and the dev grids' rows and
    figures under "dev" when there are any) and OUT/report.html; the summary."""
    steps.rule("report")
    pages = compare_all(out / "eval-base", out / "eval-tuned", out, (*s.tasks, *s.families))
    times = steps.finish()
    times["train_steps_s"] = _step_seconds(out / "run")
    summary = flow_summary(
        settings={**dataclasses.asdict(s), "seed": seed, "base_cache_key": keys["base"],
                  "fewshot_cache_key": keys["fewshot"] if s.fewshot else None}, tasks=task_figures(grids),
        train_seed=seed, headline=headline(grids, max(s.lengths)) + (headline({"tuned": dev}, max(s.lengths))
                                                                     if dev else []),
        ppl=ppl["books"], ppl_other=ppl.get("other"), short=short_figures(short_res), train=train_figures(result),
        corpus=corpus_figures(manifests["train"], manifests["heldout"]), times=times,
        paths={"out": out, "model": model_dir, "tuned_model": tuned_dir, "run": out / "run",
               "corpus": manifests["train"]["path"], "heldout_corpus": manifests["heldout"]["path"],
               "summary": out / "summary.json"})
    if dev:
        summary["dev"] = {"tasks": task_figures({"tuned": dev}), "out": str(out / "eval-dev")}
    extra = {f"perplexity ({name})": out / f"eval-ppl-{name}" / "report.html" for name in ppl}
    summary["paths"]["report"] = str(write_index(out, summary, pages, {
        **extra, "short-context check": out / "eval-short" / "report.html"}))
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
