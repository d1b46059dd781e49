"""Pipeline definitions (pipelines/*.yaml): which corpus to refresh, how, how often, and what to do after.

Design choices:
- A pipeline does not redefine a corpus: `corpus:` names a corpora/*.yaml definition and the
  pipeline only overrides what a refresh needs (`sources` added inline, `out`, `tokenizer`,
  `seq_len`, `workers`, `engine`, `ray_address`, and any other IngestConfig key under `ingest:`).
  Without `corpus:` the inline `sources` are the whole corpus. Both end in one strict
  `IngestConfig`, built at load time, so an unknown key anywhere is reported before any work starts.
- Relative paths (corpus, sources, out, checkpoint, status_file) are read from the working
  directory (the project root), the same rule corpora/*.yaml uses for `out` and `sources`; the
  deploy examples set the working directory.
- `schedule` is a 5-field cron string validated by bookft.pipelines.cron (documented there); it is
  what the system scheduler should be given, and `bookft pipeline list` shows the next run.
- `retention` counts published versions kept; the one `current` points to and versions a reader
  holds a lease on (bookft.pipelines.lease) are never pruned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bookft.config import apply_overrides, deep_merge, from_dict, read_yaml, to_dict
from bookft.errors import ConfigError
from bookft.ingest.config import IngestConfig, SourceConfig
from bookft.pipelines.cron import parse_cron


@dataclass(frozen=True, kw_only=True)
class EvalStep:
    """Post-step: `bookft eval niah` on a named checkpoint, with the new corpus as haystack."""

    checkpoint: str | None = None  # a training run dir (or run/checkpoints/N)
    model: str | None = None  # or an HF model folder
    tokenizer: str | None = None  # default: the checkpoint's / model's own
    settings: dict[str, Any] = field(default_factory=dict)  # EvalConfig keys (keep the grid small)
    corpus_haystack: bool = True  # haystack: corpus, corpus: the version just published
    out: str | None = None  # report folder; default CORPUS_DIR/runs/eval/NNNN

    @property
    def enabled(self) -> bool:
        return bool(self.checkpoint or self.model)

    def validate(self) -> None:
        if not self.enabled and not (self.settings or self.out or self.tokenizer):
            return  # no eval step
        if bool(self.checkpoint) == bool(self.model):
            raise ConfigError("post.eval: give exactly one of checkpoint (a training run dir) or model (HF folder)")
        from bookft.eval.config import EvalConfig

        extra = {"haystack": "corpus", "corpus": "<new version>"} if self.corpus_haystack else {}
        from_dict(EvalConfig, {**self.settings, **extra}, "post.eval.settings")


@dataclass(frozen=True, kw_only=True)
class PostConfig:
    eval: EvalStep = field(default_factory=EvalStep)  # runs only after a new version is published
    status_file: str | None = None  # the run's JSON record, written atomically after every run


@dataclass(frozen=True, kw_only=True)
class ValidateConfig:
    allow_tokenizer_change: bool = False  # fail if the new version's tokenizer differs from current's
    min_documents: int = 1
    min_sequences: int = 1
    # kinds of data (manifest per_kind: pdf, code, legal, synthesized, ...) the new version may lose
    # entirely although the current version has them; [] = refuse any such loss
    allow_lost_kinds: tuple[str, ...] = ()
    # sources (by name: the source's `name`, else its path) the current version has documents of and
    # the new one may have none of: true = any; [] = refuse (a source that cannot be read at all keeps
    # its last good documents, marked stale, in a non-strict refresh: it is not lost)
    allow_lost_sources: bool | tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    name: str | None = None  # default: the YAML file's stem
    schedule: str | None = None  # cron, 5 fields (see bookft/pipelines/cron.py)
    corpus: str | None = None  # corpora/*.yaml; None = the inline sources are the corpus
    sources: tuple[SourceConfig, ...] = ()  # added to the corpus definition's sources
    out: str | None = None  # corpus directory; default the corpus definition's `out`
    tokenizer: str | dict[str, Any] | None = None  # a tokenizer.json / HF folder, or TokenizerConfig keys
    seq_len: int | None = None
    workers: int | None = None
    engine: str | None = None  # local|ray: where the changed sources are extracted (IngestConfig.engine)
    ray_address: str | None = None  # engine ray: the cluster to join (default: a local Ray instance)
    ingest: dict[str, Any] = field(default_factory=dict)  # any other IngestConfig keys
    retention: int = 3  # published versions kept
    strict: bool = False  # True: any failed or missing source fails the run (nothing published)
    validate_: ValidateConfig = field(default_factory=ValidateConfig)  # YAML key: validate
    post: PostConfig = field(default_factory=PostConfig)

    def validate(self) -> None:
        if self.schedule is not None:
            parse_cron(self.schedule)
        if self.retention < 1:
            raise ConfigError(f"retention: must be >= 1 (versions kept), got {self.retention}")
        if self.corpus is None and not self.sources and "sample" not in self.ingest:
            raise ConfigError("no corpus: set `corpus: corpora/NAME.yaml` or list inline `sources:`")
        if self.name is not None and (not self.name or "/" in self.name or self.name.startswith(".")):
            raise ConfigError(f"name: {self.name!r} must be a plain name (no '/', not hidden)")


def ingest_config(p: PipelineConfig) -> IngestConfig:
    """The corpus definition with the pipeline's overrides applied; strict (errors name the key)."""
    raw: dict[str, Any] = {}
    if p.corpus is not None:
        if not Path(p.corpus).is_file():
            raise ConfigError(f"corpus: {p.corpus}: corpus definition not found (paths are relative to the "
                              "working directory, the project root)")
        raw = read_yaml(p.corpus)
    if p.sources:
        raw["sources"] = list(raw.get("sources") or []) + [to_dict(s) for s in p.sources]
    if isinstance(p.tokenizer, str):
        raw["tokenizer"] = {**(raw.get("tokenizer") or {}), "path": p.tokenizer}
    elif isinstance(p.tokenizer, dict):
        raw["tokenizer"] = deep_merge(raw.get("tokenizer") or {}, p.tokenizer)
    if p.seq_len is not None:
        raw["packing"] = {**(raw.get("packing") or {}), "seq_len": p.seq_len}
    for key, val in (("out", p.out), ("workers", p.workers), ("engine", p.engine),
                     ("ray_address", p.ray_address)):
        if val is not None:
            raw[key] = val
    raw = deep_merge(raw, p.ingest)
    raw.setdefault("name", p.name)
    return from_dict(IngestConfig, raw)


def load_pipeline(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> tuple[PipelineConfig, IngestConfig]:
    """Read pipelines/NAME.yaml (+ `--set` overrides) -> (PipelineConfig, IngestConfig). ConfigError names the
    file and key of anything wrong."""
    path = Path(path)
    raw = apply_overrides(read_yaml(path), overrides)
    if "validate_" in raw:
        raise ConfigError(f"{path}: unknown key validate_ (did you mean validate?)")
    if "validate" in raw:
        raw["validate_"] = raw.pop("validate")
    raw.setdefault("name", path.stem)
    try:
        p = from_dict(PipelineConfig, raw)
        return p, ingest_config(p)
    except ConfigError as e:
        msg = str(e).replace("validate_", "validate")
        raise ConfigError(f"{path}: {msg}") from None
