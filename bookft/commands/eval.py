"""`bookft eval niah`, `bookft eval short`, `bookft eval ppl` and `bookft eval compare`: parse flags, call one
library function each."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from bookft.errors import EvalError

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


def _default_checkpoint(config: str | None) -> str:
    """The run `bookft train` wrote for `config` (or the default preset), when neither subject is given."""
    from bookft.eval.entry import default_run

    run = default_run(config)
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
    from bookft.eval.entry import evaluate

    if not checkpoint and not model:  # after `bookft train` with the same (or the default) config: its run
        checkpoint = _default_checkpoint(config)
    flags = {
        "task": task, "lengths": parse_lengths(lengths), "depths": parse_floats(depths, "--depths"),
        "seeds": [int(s) for s in parse_floats(seeds, "--seeds")] if seeds else None,
        "haystack": haystack, "corpus": corpus,
        "scoring": [p for v in scoring for p in v.split(",") if p] if scoring else None,
    }
    evaluate(checkpoint=checkpoint, model_dir=model, tokenizer=tokenizer, config=config,
             overrides=list(overrides or []), flags=flags, out=out, console=Console(), progress=progress)


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
    from bookft.eval.short_entry import evaluate_short

    if not checkpoint and not model:
        checkpoint = _default_checkpoint(None)
    evaluate_short(checkpoint=checkpoint, model_dir=model, base=base, tokenizer=tokenizer, corpus=corpus,
                   texts=list(text or []), max_tokens=max_tokens, out=out, console=Console())


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
    from bookft.eval.ppl_entry import evaluate_ppl

    if dtype not in ("float32", "bfloat16"):
        raise EvalError(f"--dtype: float32 or bfloat16, got {dtype!r}")
    if not checkpoint and not model:
        checkpoint = [_default_checkpoint(config)]
    evaluate_ppl(models=list(model or []), checkpoints=list(checkpoint or []),
                 names=[n.strip() for n in names.split(",")] if names else None, texts=list(text or []),
                 corpus=corpus, lengths=parse_lengths(lengths), stride=stride, out=out, dtype=dtype, config=config,
                 overrides=list(overrides or []), max_documents=max_documents, console=Console(), progress=progress)


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
