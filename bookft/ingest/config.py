"""Corpus definition (corpora/*.yaml): sources, limits, tokenizer and packing. Strict, frozen, keyword-only.

Design choices:
- One `IngestConfig` describes a whole corpus build, so `corpora/NAME.yaml`, the CLI flags and the
  refresh pipelines all feed the same object (`bookft.config.load(IngestConfig, ...)`).
- Limits are part of the config (hostile input has a bounded cost, and the bound is visible).
- `sample:` asks for the built-in generated material (books as PDFs, a USLM archive, JSONL opinions,
  a generated code repository) instead of, or besides, `sources:`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from bookft.errors import ConfigError
from bookft.ingest.mix_config import POLICIES, MixConfig, Policy, UpsampleLong  # the mix
from bookft.needles.retrieval_config import RetrievalConfig  # synthesized retrieval examples

ENGINES = ("local", "ray")  # where the per-source extraction jobs run (bookft/ingest/engine/ray_engine.py)

Kind = Literal["auto", "pdf", "epub", "docx", "code", "legal", "jsonl", "html", "text"]  # formats/registry.py


@dataclass(frozen=True, kw_only=True)
class SourceConfig:
    path: str
    kind: Kind = "auto"
    collection: str | None = None  # default: the file or folder name
    pdf_password_env: str | None = None  # name of an environment variable holding the password that opens
    #   this source's encrypted PDFs (files the user owns). A name, not the password: corpus YAML gets
    #   committed and the manifest copies the config. `--pdf-password` does the same for command-line sources.
    name: str | None = None  # how the mix and the manifest name this source (default: its path)
    weight: float | None = None  # relative share of the long tokens (ingest/mix_config.py); None: natural
    policy: Policy = "split"  # a document longer than packing.seq_len: split | truncate | drop
    upsample_long: UpsampleLong | None = None  # draw long documents of this source more often (Fu et al.)

    @property
    def label(self) -> str:
        return self.name or self.path

    def validate(self) -> None:
        if self.weight is not None and not self.weight > 0:
            raise ConfigError(f"source {self.label}: weight must be > 0, got {self.weight}")
        if self.policy not in POLICIES:
            raise ConfigError(f"source {self.label}: policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.pdf_password_env is not None and not self.pdf_password_env.replace("_", "").isalnum():
            raise ConfigError(f"sources[].pdf_password_env: expected an environment variable name, "
                              f"got {self.pdf_password_env!r}")

    def password(self) -> str | None:
        """The password from the environment; ConfigError when the variable is named but not set."""
        if self.pdf_password_env is None:
            return None
        value = os.environ.get(self.pdf_password_env)
        if value is None:
            raise ConfigError(f"source {self.path}: pdf_password_env names ${self.pdf_password_env}, which is not "
                              "set; export it, or remove pdf_password_env")
        return value


@dataclass(frozen=True, kw_only=True)
class LimitsConfig:
    max_file_mb: float = 512.0  # any single file (PDF, text, archive) bigger than this is skipped
    code_max_file_kb: int = 1024  # files in a code repository over this are skipped
    archive_max_member_mb: float = 256.0
    archive_max_total_mb: float = 4096.0
    archive_max_ratio: float = 200.0  # uncompressed / compressed, per member (decompression bombs)
    archive_max_members: int = 1_000_000


@dataclass(frozen=True, kw_only=True)
class OcrConfig:
    """OCR of PDF pages without a text layer (bookft/ingest/formats/ocr.py): Tesseract, when it is on PATH."""

    enabled: bool = False  # the per-corpus switch (`--set extract.ocr.enabled=true`)
    lang: str = "eng"  # tesseract -l (installed traineddata, e.g. "eng+deu")
    dpi: int = 300  # render resolution of a page
    page_timeout_s: float = 120.0

    def validate(self) -> None:
        if not 50 <= self.dpi <= 1200:
            raise ConfigError(f"extract.ocr.dpi: must be in [50, 1200], got {self.dpi}")
        if not self.lang or not all(c.isalnum() or c in "+_" for c in self.lang):
            raise ConfigError(f"extract.ocr.lang: tesseract language codes joined by '+', got {self.lang!r}")


@dataclass(frozen=True, kw_only=True)
class SecretsConfig:
    """Secret scanning with detect-secrets before tokenization (bookft/ingest/filters/secrets.py): found secrets
    are redacted to a placeholder and listed (file, line, kind; never the value) in the manifest."""

    code: bool = True  # code repositories: on by default (`--no-secret-scan` or `extract.secrets.code=false`)
    legal: bool = False  # legal archives and folders: off by default (prose rarely holds keys; costs a pass)


@dataclass(frozen=True, kw_only=True)
class ExtractConfig:
    pdf_backend: Literal["pdfium", "pypdf"] = "pdfium"  # pypdf always takes over when pdfium fails
    code_skip_vendored: bool = True  # vendor/, node_modules/, lock files, minified files
    code_include_hidden: bool = False  # dot-files and dot-folders other than .git (never read)
    ocr: OcrConfig = field(default_factory=OcrConfig)  # off by default
    secrets: SecretsConfig = field(default_factory=SecretsConfig)
    pdf_pages_per_job: int = 100  # a PDF of more pages is read as page ranges of this many, in parallel
    #   (phases/extract.py), then reassembled: the same document as one job; 0 = never split. It only
    #   changes speed, so it is not part of the extraction cache key (sources.py `job_key`). 100 (about
    #   0.15 s of pdfium per range): enough ranges that the pool and the building process end together.

    def validate(self) -> None:
        if self.pdf_pages_per_job < 0 or isinstance(self.pdf_pages_per_job, bool):
            raise ConfigError(f"extract.pdf_pages_per_job: must be >= 1 (pages per page-range job), or 0 to "
                              f"never split a PDF; got {self.pdf_pages_per_job}")


@dataclass(frozen=True, kw_only=True)
class TokenizerConfig:
    path: str | None = None  # tokenizer.json or a HF folder; None = train a byte-level BPE on the corpus
    vocab_size: int = 32000
    train_chars: int = 20_000_000  # characters of the corpus the BPE is trained on (first ones, in order)
    min_frequency: int = 2
    retrain: bool = False  # False: reuse the BPE the current version trained (same vocab_size), so
    #                        unchanged sources keep their cached tokens; True: train again on this corpus

    def validate(self) -> None:
        if self.vocab_size < 300:
            raise ConfigError(f"tokenizer.vocab_size: must be >= 300 (256 bytes + merges), got {self.vocab_size}")


@dataclass(frozen=True, kw_only=True)
class PackingConfig:
    seq_len: int = 2048
    segments: Literal["document", "collection"] = "document"  # attention segment = one doc or a collection
    split_slack: float = 0.005  # paragraph cut may waste up to this fraction of seq_len, else a word cut
    append_eos: bool = True  # end every document with the tokenizer's end-of-text token

    def validate(self) -> None:
        if self.seq_len < 16:
            raise ConfigError(f"packing.seq_len: must be >= 16, got {self.seq_len}")
        if not 0.0 <= self.split_slack < 1.0:
            raise ConfigError(f"packing.split_slack: must be in [0, 1), got {self.split_slack}")


@dataclass(frozen=True, kw_only=True)
class NearDedupConfig:
    """MinHash/LSH near-duplicate removal (ingest/filters/neardup.py); off by default (costs a pass over the text)."""

    enabled: bool = False
    threshold: float = 0.8  # estimated Jaccard similarity of word shingles at which a later document is dropped
    shingle_words: int = 5
    num_perm: int = 128  # MinHash signature length
    seed: int = 0

    def validate(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"near_dedup.threshold: must be in (0, 1], got {self.threshold}")
        if self.shingle_words < 1:
            raise ConfigError(f"near_dedup.shingle_words: must be >= 1, got {self.shingle_words}")
        if not 8 <= self.num_perm <= 1024:
            raise ConfigError(f"near_dedup.num_perm: must be in [8, 1024], got {self.num_perm}")


@dataclass(frozen=True, kw_only=True)
class SampleConfig:
    seed: int = 0
    books: int = 3
    pages_per_book: int = 30
    facts_per_book: int = 10
    legal_titles: int = 2
    sections_per_title: int = 25
    opinions: int = 30
    code_repository: bool = True  # a generated Python repository (bookft.ingest.sample.code)
    code_modules: int = 90  # its modules (about 6.5 KB each)


@dataclass(frozen=True, kw_only=True)
class IngestConfig:
    name: str = "corpus"
    out: str = "data/corpus"
    sources: tuple[SourceConfig, ...] = ()
    sample: SampleConfig | None = None
    dedup: bool = True  # exact duplicates (same text) removed
    near_dedup: NearDedupConfig = field(default_factory=NearDedupConfig)
    workers: int = 2  # extraction processes; 0 = in this process (engine ray: CPUs of the local Ray it starts)
    engine: str = "local"  # local: a process pool here; ray: the per-source jobs on Ray Data (bookft[ray])
    ray_address: str | None = None  # engine ray: the cluster to join (None: start a local Ray instance)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    packing: PackingConfig = field(default_factory=PackingConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)  # rate 0 = off
    mix: MixConfig = field(default_factory=MixConfig)  # nothing set = every document once, as before

    def validate(self) -> None:
        labels = [s.label for s in self.sources]
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise ConfigError(f"sources: two sources share the name {dup[0]!r}; give them distinct `name:`s")
        short = self.mix.short_source
        if short is not None and short not in labels:
            raise ConfigError(f"mix.short_source: no source is named {short!r} (names: {', '.join(labels) or 'none'})")
        for s in self.sources:
            if s.label == short and s.weight is not None:
                raise ConfigError(f"source {short}: the short source takes mix.short_share, not a weight")
        weighted = [s.weight is not None for s in self.sources if s.label != short]
        if any(weighted) and not all(weighted):
            missing = next(s.label for s in self.sources if s.label != short and s.weight is None)
            raise ConfigError(f"source {missing}: has no weight while other sources have one; give every "
                              "source a weight, or none (natural shares)")
        if any(weighted) and self.sample is not None:
            raise ConfigError("sample: the built-in sample's sources carry no weight; drop `sample:` or the weights")
        if self.workers < 0:
            raise ConfigError(f"workers: must be >= 0, got {self.workers}")
        if self.engine not in ENGINES:
            raise ConfigError(f"engine: expected one of {', '.join(ENGINES)}, got {self.engine!r}")
