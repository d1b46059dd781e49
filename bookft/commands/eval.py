"""`bookft eval niah`, `bookft eval short`, `bookft eval ppl` and `bookft eval compare`: parse flags, read
--config and `--set` once, call one typed library function each (bookft.eval.entry.evaluate,
ppl_entry.evaluate_ppl, short_entry.evaluate_short).

Design choices:
- --config is read once (read_config). A file with run-config sections is the run config (its
  attention, parallel and model knobs score the subject; `--set SECTION.KEY=...` overrides apply to
  it); a file without them is an eval YAML (its `eval:` section, or the whole file).
- The eval settings are layered: the run config's `eval:` section (the --config file's, else the
  checkpoint's own run), then an eval YAML's section, then `--set eval.KEY=VALUE` overrides, then
  the explicit flags (--lengths, --depths, ...). Keys under another run-config section go to the
  run config; a bare `--set lengths=...` is refused with the spelling to use. One strict
  `from_dict(EvalConfig, ...)` checks the result, so an unknown key names its path; keys set by
  none of them are decided by the eval once the subject's tokenizer is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from bookft.config import apply_overrides, deep_merge, from_dict, parse_override, read_yaml, to_dict
from bookft.errors import ConfigError, EvalError

RUN_SECTIONS = ("name", "model", "attention", "parallel", "data", "train", "checkpoint")

eval_app = typer.Typer(help="Needle-in-a-haystack / RULER-style retrieval grids and reports.",
                       no_args_is_help=True)


def parse_lengths(values: list[str] | None) -> list[int] | None:
    """'1024,2K' '1M' -> [1024, 2048, 1048576] (K = 1024, M = 1024*1024)."""
    if not values:
        return None
    out = []
    for item in values:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            mult = {"k": 1024, "m": 1024 * 1024}.get(part[-1].lower(), 1)
            try:
                out.append(int(float(part[:-1] if mult > 1 else part) * mult))
            except ValueError:
                raise EvalError(f"--lengths: {part!r} is not a length (use 1024, 4K or 1M)") from None
    return out


def parse_floats(values: list[str] | None, flag: str) -> list[float] | None:
    if not values:
        return None
    try:
        return [float(p.strip().rstrip("%")) for v in values for p in str(v).split(",") if p.strip()]
    except ValueError:
        raise EvalError(f"{flag}: expected numbers such as 0,25,50,75,100") from None


def eval_keys() -> tuple[str, ...]:
    from bookft.eval.config import EvalConfig

    return tuple(EvalConfig.__dataclass_fields__)


def split_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    """(eval overrides without the `eval.` prefix, run-config overrides). Eval keys have one
    spelling, `eval.KEY=VALUE`; a key under no section is a ConfigError that says so."""
    ev, run = [], []
    for item in overrides or []:
        keys, _ = parse_override(item)
        if keys[0] == "eval":
            ev.append(item.split(".", 1)[1])
        elif keys[0] in RUN_SECTIONS:
            run.append(item)
        elif keys[0] in eval_keys():
            raise ConfigError(f"--set {item}: eval keys are spelled with their section: "
                              f"--set eval.{item.strip()}")
        else:
            raise ConfigError(f"--set {item}: unknown key {keys[0]} (keys are eval.KEY or a run-config "
                              f"section's: {', '.join(RUN_SECTIONS)})")
    return ev, run


def read_config(config: str | Path | None, overrides: list[str]):
    """(run config or None, eval section) of --config, read once: a file with run sections gives
    its RunConfig (with the run-config overrides) and its `eval:` mapping; an eval YAML gives None
    and its `eval:` mapping or the whole file; no file, (None, {})."""
    if config is None:
        return None, {}
    raw = read_yaml(config)
    run_config = None
    if any(k in raw for k in RUN_SECTIONS):
        from bookft.train.config import RunConfig

        try:
            run_config = from_dict(RunConfig, apply_overrides(raw, split_overrides(overrides)[1]))
        except ConfigError as e:
            raise ConfigError(f"{config}: {e}") from None
    section = raw.get("eval", {}) if run_config is not None or "eval" in raw else raw
    if not isinstance(section, dict):
        raise EvalError(f"{config}: eval: expected a mapping")
    return run_config, section


def layer_settings(base, section: dict, overrides: list[str], flags: dict[str, Any]):
    """The EvalConfig of the module doc's layers: `base` (an EvalConfig or None), an eval YAML's
    `section`, the overrides' eval keys, the flags."""
    from bookft.eval.config import EvalConfig

    data = deep_merge(to_dict(base) if base is not None else {}, section)
    data = apply_overrides(data, split_overrides(overrides)[0])
    data.update({k: v for k, v in flags.items() if v is not None})
    return from_dict(EvalConfig, data, "eval")


def load_settings(config: str | Path | None, overrides: list[str], flags: dict[str, Any], base=None, *,
                  has_chat_template: bool = False, seq_len: int | None = None):
    """The EvalConfig of a --config file (a run config's `eval:` section, or an eval YAML), the
    overrides and the flags over `base` (an EvalConfig or None), every key decided (resolve_settings)."""
    from bookft.eval.config import resolve_settings

    _, section = read_config(config, overrides)
    return resolve_settings(layer_settings(base, section, overrides, flags), has_chat_template=has_chat_template,
                            seq_len=seq_len)


def default_run(run_config) -> Path | None:
    """The run directory `bookft train` writes for `run_config` (None: the default preset),
    runs/<name>, when it exists: what `bookft eval` evaluates without --checkpoint or --model."""
    from bookft.train.config import load_run_config

    run = Path("runs") / (run_config or load_run_config(None)).name
    return run if run.is_dir() else None


def _default_checkpoint(run_config) -> str:
    """The run `bookft train` wrote for `run_config` (or the default preset), when neither subject is given."""
    run = default_run(run_config)
    if run is None:
        raise EvalError("give --checkpoint RUN_DIR or --model HF_DIR (no default run: runs/<config name> "
                        "does not exist; `bookft train` writes it)")
    Console().print(f"evaluating {run} (the run `bookft train` wrote for this config; --checkpoint to choose)")
    return str(run)


@eval_app.command("niah")
def niah(
    checkpoint: str = typer.Option(None, "--checkpoint", help="training run directory (default: runs/<config name>, where `bookft train` writes)"),
    model: str = typer.Option(None, "--model", help="Hugging Face model folder (config.json, safetensors)"),
    tokenizer: str = typer.Option(None, "--tokenizer", help="tokenizer.json or folder (default: the model's)"),
    task: str = typer.Option(None, "--task", help="niah | multikey | multivalue | multiquery | passkey | vartrack"),
    lengths: list[str] = typer.Option(None, "--lengths", help="context lengths, e.g. 1K,2K,4K"),
    depths: list[str] = typer.Option(None, "--depths", help="needle depths in percent, e.g. 0,50,100"),
    seeds: list[str] = typer.Option(None, "--seeds", help="seeds per cell, e.g. 0,1,2"),
    haystack: str = typer.Option(None, "--haystack", help="essay | noise | corpus"),
    corpus: str = typer.Option(None, "--corpus", help="corpus directory for --haystack corpus"),
    scoring: list[str] = typer.Option(None, "--scoring", help="teacher_forced and/or generate"),
    out: Path = typer.Option(Path("eval-out"), "--out", help="output directory for the report"),
    config: str = typer.Option(None, "--config", help="run config YAML (its eval: section) or an eval YAML"),
    overrides: list[str] = typer.Option(None, "--set", help="override, e.g. eval.threshold=0.9"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Score a needle-in-a-haystack grid and write results.json, heatmap.png, report.html."""
    from bookft.eval.entry import Subject, evaluate

    overrides = list(overrides or [])
    run_config, section = read_config(config, overrides)
    if not checkpoint and not model:  # after `bookft train` with the same (or the default) config: its run
        checkpoint = _default_checkpoint(run_config)
    subject = Subject(checkpoint=checkpoint, model_dir=model, tokenizer=tokenizer)
    if run_config is None and checkpoint:  # the run's own config: its eval section is the first layer
        from bookft.train.checkpoint import run_config_of

        run_config = run_config_of(checkpoint)
    flags = {
        "task": task, "lengths": parse_lengths(lengths), "depths": parse_floats(depths, "--depths"),
        "seeds": [int(s) for s in parse_floats(seeds, "--seeds")] if seeds else None,
        "haystack": haystack, "corpus": corpus,
        "scoring": [p for v in scoring for p in v.split(",") if p] if scoring else None,
    }
    settings = layer_settings(getattr(run_config, "eval", None), section, overrides, flags)
    evaluate(run_config, settings, subject, out=out, console=Console(), progress=progress)


@eval_app.command("short")
def short(
    checkpoint: str = typer.Option(None, "--checkpoint", help="the tuned model: a training run directory"),
    model: str = typer.Option(None, "--model", help="the tuned model: a Hugging Face model folder"),
    base: str = typer.Option(None, "--base", help="the base model: an HF folder (default: the run's model.hf_path)"),
    tokenizer: str = typer.Option(None, "--tokenizer", help="the tuned model's tokenizer (default: its own)"),
    corpus: str = typer.Option(None, "--corpus", help="corpus whose held-out documents to score (default: the run's data.corpus)"),
    text: list[str] = typer.Option(None, "--text", help="UTF-8 files, each one generic document (default: the eval's generated essay)"),
    max_tokens: int = typer.Option(1024, "--max-tokens", help="tokens scored per document (longer ones are cut)"),
    out: Path = typer.Option(Path("eval-out"), "--out", help="output directory: the NIAH report's, to share its report.html"),
) -> None:
    """Loss and token accuracy on short held-out corpus documents and a generic text, base vs tuned."""
    from bookft.eval.entry import Subject
    from bookft.eval.short_entry import ShortConfig, evaluate_short

    settings = ShortConfig(base=base, corpus=corpus, texts=tuple(text or ()), max_tokens=max_tokens)
    if not checkpoint and not model:
        checkpoint = _default_checkpoint(None)
    evaluate_short(None, settings, Subject(checkpoint=checkpoint, model_dir=model, tokenizer=tokenizer), out=out,
                   console=Console())


@eval_app.command("ppl")
def ppl(
    model: list[str] = typer.Option(None, "--model", help="Hugging Face model folder (config.json, safetensors, tokenizer.json); repeat to compare several"),
    checkpoint: list[str] = typer.Option(None, "--checkpoint", help="training run directory; repeatable"),
    names: str = typer.Option(None, "--names", help="labels, comma-separated: the --model folders, then the --checkpoint runs (default: folder names)"),
    text: list[str] = typer.Option(None, "--text", help="UTF-8 file, one long document; repeat for more"),
    corpus: str = typer.Option(None, "--corpus", help="corpus directory: its held-out documents, else all (default: the run's data.corpus)"),
    lengths: list[str] = typer.Option(None, "--lengths", help="window lengths, e.g. 1K,2K,4K (the default)"),
    stride: int = typer.Option(None, "--stride", help="sliding windows advancing by this many tokens (default: non-overlapping)"),
    dtype: str = typer.Option("float32", "--dtype", help="compute dtype of every model: float32 | bfloat16"),
    max_documents: int = typer.Option(None, "--max-documents", help="score only the first N documents"),
    out: Path = typer.Option(Path("eval-out"), "--out", help="output directory (shares report.html with eval niah/short)"),
    config: str = typer.Option(None, "--config", help="run config YAML: its attention and parallel sections (context parallelism)"),
    overrides: list[str] = typer.Option(None, "--set", help="run-config override, e.g. attention.strategy=ring"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Perplexity on long documents by window length (Press et al.'s sliding window), and loss by position."""
    from bookft.eval.ppl_entry import PplConfig, evaluate_ppl, labelled_subjects

    settings = PplConfig(lengths=tuple(parse_lengths(lengths) or ()), stride=stride, dtype=dtype,
                         texts=tuple(text or ()), corpus=corpus, max_documents=max_documents)
    run_config, _ = read_config(config, list(overrides or []))
    if not checkpoint and not model:
        checkpoint = [_default_checkpoint(run_config)]
    subjects = labelled_subjects(list(model or []), list(checkpoint or []),
                                 [n.strip() for n in names.split(",")] if names else None)
    evaluate_ppl(run_config, settings, subjects, out=out, console=Console(), progress=progress)


@eval_app.command("compare")
def compare(
    a: str = typer.Argument(..., help="first eval output dir (e.g. the base model)"),
    b: str = typer.Argument(..., help="second eval output dir (e.g. the tuned model)"),
    out: Path = typer.Option(Path("eval-compare"), "--out", help="output directory"),
    names: str = typer.Option("base,tuned", "--names", help="labels for A and B, comma-separated"),
) -> None:
    """Draw two eval runs side by side: compare.png and compare.html."""
    from bookft.eval.report import compare_reports

    label = tuple((names.split(",") + ["A", "B"])[:2])
    paths = compare_reports(a, b, out, names=label)  # type: ignore[arg-type]
    Console().print(f"wrote {paths['html']} and {paths['png']}")


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
