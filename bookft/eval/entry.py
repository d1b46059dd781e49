"""What `bookft eval niah` does between parsing and printing: subject, settings, attention, run, report.

Design choices:
- One typed call, `evaluate(run_config, eval_config, subject)`: dataclasses in, results out, no
  config file read here. The callers decide the settings: `bookft eval niah` reads --config and
  `--set` once (bookft/commands/eval.py, which says how they are layered), the flows and the
  pipeline's post-step start from a RunConfig's `eval:` section or the defaults and change it with
  settings_with. Keys left None are decided here by resolve_settings (eval/config.py), which needs
  the loaded tokenizer: the RULER protocol where the phrasing is ruler (generate scoring, the chat
  template where the tokenizer has one), the run's data.seq_len as the spaced grid's max_length.
- The subject is a checkpoint (`bookft.train.checkpoint.load_params(run_dir) -> (model, run_config)`)
  or an HF folder (`bookft.model.load_hf`), named by a Subject.
- Attention comes from the run config's attention and parallel sections: with a context axis > 1
  in the mesh, the configured context-parallel strategy over that mesh (params placed with their
  train shardings, inputs zig-zag ordered and sequence-sharded) for both scorers, teacher-forced
  and greedy generation; otherwise the same kernel on one device.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bookft.config import from_dict, to_dict
from bookft.errors import CorpusError, EvalError
from bookft.eval.config import EvalConfig, resolve_settings
from bookft.eval.drivers import attention_and_layout
from bookft.eval.report import print_summary, write_report
from bookft.eval.runner import run_niah
from bookft.needles.tokenizer import ModelTokenizer


def _checkpoint_tokenizer(run_dir: Path, run_config) -> Path:
    for cand in (run_dir / "tokenizer.json", run_dir / "tokenizer" / "tokenizer.json"):
        if cand.is_file():
            return cand
    corpus = getattr(getattr(run_config, "data", None), "corpus", None)
    if corpus:
        from bookft.corpus import open_corpus

        try:
            return Path(open_corpus(corpus).tokenizer_path)
        except CorpusError:  # not a full corpus: look for its tokenizer file
            cand = Path(corpus) / "current" / "tokenizer" / "tokenizer.json"
            if cand.is_file():
                return cand
    raise EvalError(f"{run_dir}: cannot find the run's tokenizer (no tokenizer.json and corpus "
                    f"{corpus!r} has none); pass --tokenizer")


def load_subject(checkpoint: str | None, model_dir: str | None, tokenizer: str | None, *, mesh=None,
                 like=None):
    """(model, ModelTokenizer, model_config, run_config or None, info dict).

    `like`: a run config's ModelConfig whose knobs (dtypes, model.rope_scaling, ...) an HF folder is
    loaded with, so `--model DIR --config PRESET` scores the folder as that preset trains it (a
    base model with the preset's YaRN, say). Without one, the folder as it is.

    An HF folder is streamed tensor by tensor onto `mesh` with the train shardings; a checkpoint
    is restored by load_params straight onto `mesh`, or else onto the run's own mesh.
    """
    if bool(checkpoint) == bool(model_dir):
        raise EvalError("give exactly one of --checkpoint RUN_DIR or --model HF_DIR")
    if checkpoint:
        from bookft.train.checkpoint import load_params

        run_dir = Path(checkpoint)
        if not run_dir.exists():
            raise EvalError(f"{run_dir}: checkpoint/run directory not found")
        if mesh is None:  # the run's own mesh, so the checkpoint is restored straight onto it
            from bookft.train.config import load_run_config

            if (run_dir / "config.yaml").is_file():
                mesh = build_mesh(realise(load_run_config(run_dir / "config.yaml")))
        model, run_config = load_params(run_dir, mesh=mesh)
        tok_path = Path(tokenizer) if tokenizer else _checkpoint_tokenizer(run_dir, run_config)
        return (model, ModelTokenizer.load(tok_path), run_config.model, run_config,
                {"checkpoint": str(run_dir), "run": getattr(run_config, "name", "")})
    from bookft.model import load_hf

    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise EvalError(f"{path}: not an HF model folder (no config.json)")
    if mesh is None:
        model, config = load_hf(path, like=like)
    else:
        from bookft.parallel.rules import logical_to_spec

        model, config = load_hf(path, mesh=mesh, like=like,
                                shardings=lambda names, shape: logical_to_spec(names, shape, mesh))
    tok = ModelTokenizer.load(Path(tokenizer) if tokenizer else path)
    return model, tok, config, None, {"hf_dir": str(path)}


def build_mesh(run_config):
    """The run config's mesh when its context axes split the sequence, else None (one device)."""
    if run_config is None or context_degree_of(run_config) <= 1:
        return None
    from bookft.parallel.distributed import start
    from bookft.parallel.mesh import make_mesh
    from bookft.train.program import n_devices

    start(run_config.parallel)  # simulated CPU devices, multi-host runtime: before jax's backend starts
    import jax

    return make_mesh(run_config.parallel, jax.devices()[:n_devices(run_config)])


def realise(run_config):
    """The run config with `attention.strategy: auto` decided and a usp context axis split, as
    `bookft train` does it (bookft.train.program.choose_mesh_axes); run dirs record the result."""
    if run_config is None:
        return None
    a, mesh = run_config.attention, run_config.parallel.mesh
    if a.strategy != "auto" and not (a.strategy == "usp" and "context_ulysses" not in mesh):
        return run_config
    from bookft.parallel.distributed import start
    from bookft.train.program import choose_mesh_axes, n_devices

    start(run_config.parallel)
    return choose_mesh_axes(run_config, n_devices(run_config))[0]


@dataclass(frozen=True)
class Subject:
    """What an eval scores: a training run (`checkpoint`, RUN or RUN/checkpoints/STEP) or an HF folder
    (`model_dir`), exactly one; `tokenizer` (a tokenizer.json or folder) replaces its own; `label`
    names it in a report that holds several (bookft eval ppl)."""

    checkpoint: str | None = None
    model_dir: str | None = None
    tokenizer: str | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        if bool(self.checkpoint) == bool(self.model_dir):
            raise EvalError("give exactly one of --checkpoint RUN_DIR or --model HF_DIR")


def settings_with(base: EvalConfig | None, **changes: Any) -> EvalConfig:
    """`base` (or the defaults) with `changes` (flags; None leaves a key as it is), checked by one
    strict from_dict, so an unknown key or a bad value names its path."""
    data = to_dict(base) if base is not None else {}
    data.update({k: v for k, v in changes.items() if v is not None})
    return from_dict(EvalConfig, data, "eval")


def read_texts(paths: list[str]) -> list[str]:
    """UTF-8 files, each one document (`--text`); a file that is not is an EvalError naming it."""
    out = []
    for p in paths:
        try:
            out.append(Path(p).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise EvalError(f"--text {p}: cannot read it as UTF-8 text ({e})") from None
    return out


def evaluate(run_config, eval_config: EvalConfig, subject: Subject, *, out: str | Path,
             console: Console | None = None, progress: bool = True) -> dict:
    """Score `subject` on the grid of `eval_config`, write the report, print the summary; the results.

    run_config: the RunConfig the subject is scored under (attention, parallel, the model knobs an HF
    folder is loaded with, data.seq_len ending a spaced grid), or None: a checkpoint's own run config,
    an HF folder as it is on one device. eval_config: the settings as layered by the caller (keys left
    None are decided here by resolve_settings, from the subject's tokenizer). Reads no config file."""
    console = console or Console()
    model, tok, model_config, run_config, info, mesh = load_on_mesh(subject.checkpoint, subject.model_dir,
                                                                    subject.tokenizer, realise(run_config))
    seq_len = getattr(getattr(run_config, "data", None), "seq_len", None)  # the preset's length ends the grid
    settings = resolve_settings(eval_config, has_chat_template=bool(tok.chat_template), seq_len=seq_len)
    # both scorers: the configured strategy over the mesh (or the local kernel on one device)
    attend, layout = run_attention(run_config, mesh, settings.length_buckets, info)
    model = layout.place(model)  # the host copy load_params returned is dropped here
    import jax

    if jax.process_index() != 0:  # multi-host: every process runs the grid, process 0 alone reports
        console, progress = Console(quiet=True), False
    results = run_niah(model, tok, settings, attend=attend, layout=layout, model_config=model_config,
                       model_info=info, console=console, progress=progress)
    if jax.process_index() != 0:
        return results
    paths = write_report(results, out, probe_rows=training_probe(subject.checkpoint))
    print_summary(results, console)
    console.print(f"wrote {paths['report']} and {paths['results']}")
    return results


def load_on_mesh(checkpoint: str | None, model_dir: str | None, tokenizer: str | None, file_run_config=None):
    """(model, tokenizer, model_config, run_config, info, mesh): the subject loaded onto the mesh of
    `file_run_config` (a --config run config, realised) or else of the checkpoint's own run config;
    an HF folder takes that config's model knobs (dtypes, rope_scaling), its weights as they are (no
    LoRA adapters). run_config: `file_run_config`, else the checkpoint's (realised), else None."""
    mesh = build_mesh(file_run_config)
    like = getattr(file_run_config, "model", None) if model_dir else None  # --model with a preset's knobs
    if like is not None and like.lora.rank:  # the folder's weights as they are: no (zero) adapters
        import dataclasses

        from bookft.model.config import LoraConfig

        like = dataclasses.replace(like, lora=LoraConfig())
    model, tok, model_config, run_config, info = load_subject(checkpoint, model_dir, tokenizer, mesh=mesh,
                                                              like=like)
    run_config = file_run_config or realise(run_config)
    mesh = mesh if mesh is not None else build_mesh(run_config)
    return model, tok, model_config, run_config, info, mesh


def run_attention(run_config, mesh, per_octave: int, info: dict):
    """(attend, SeqLayout) of the run config's attention section over `mesh` (the local kernel on one
    device without a run config); records them in info["attention"]."""
    from bookft.attention.config import AttentionConfig

    att = run_config.attention if run_config is not None else AttentionConfig(strategy="local")
    attend, layout = attention_and_layout(att, mesh, per_octave)
    info["attention"] = {"strategy": attend.spec.strategy, "kernel": att.kernel, **layout.describe()}
    return attend, layout


def training_probe(checkpoint: str | None) -> list[dict]:
    """The needle-probe rows of the run a checkpoint comes from (RUN or RUN/checkpoints/STEP)."""
    if not checkpoint:
        return []
    from bookft.eval.probe import probe_rows

    for d in (Path(checkpoint), *list(Path(checkpoint).parents)[:2]):
        if (d / "metrics.jsonl").is_file():
            return probe_rows(d)
    return []


def context_degree_of(run_config) -> int:
    sizes = run_config.parallel.mesh
    return int(max(1, sizes.get("context", 1)) * max(1, sizes.get("context_ulysses", 1)))
