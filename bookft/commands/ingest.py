"""`bookft ingest`: thin CLI over `build_corpus` with rich progress bars and a summary table."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from bookft.config import load
from bookft.errors import ConfigError
from bookft.ingest.progress import RichProgress

console = Console(stderr=True)


def summary_table(m: dict) -> Table:
    c = m["counts"]
    t = Table(title=f"corpus {m['name']} v{m['version']}  ({m.get('path', '')})")
    t.add_column("kind")
    t.add_column("documents", justify="right")
    t.add_column("characters", justify="right")
    t.add_column("tokens", justify="right")
    for kind, v in sorted(m["per_kind"].items()):
        t.add_row(kind, f"{v['documents']:,}", f"{v['chars']:,}", f"{v['tokens']:,}")
    t.add_row("[bold]total", f"{c['documents']:,}", f"{c['chars']:,}", f"{c['tokens']:,}")
    t.caption = (f"seq_len {m['seq_len']:,}: {c['sequences']:,} sequences, fill {c['fill']:.4f}, "
                 f"padding {c['padding_tokens']:,} tokens, {c['split_documents']} documents split; "
                 f"{c['duplicates']} duplicates removed; {c.get('secrets_redacted', 0)} secrets redacted; "
                 f"entries {c['entries']}; "
                 f"work {m['work']}; {m['timings']['total']:.1f} s")
    return t


def problems_table(m: dict) -> Table | None:
    rows = [e for e in m["sources"] if e["status"] != "ingested"]
    if not rows:
        return None
    t = Table(title="skipped / failed")
    t.add_column("status")
    t.add_column("source", overflow="fold")
    t.add_column("reason", overflow="fold")
    for e in rows[:50]:
        t.add_row(e["status"], e["source"], e["reason"])
    if len(rows) > 50:
        t.caption = f"... and {len(rows) - 50} more (see manifest.json)"
    return t


def checked(out: str):
    """before_publish for `bookft ingest -o` onto an existing corpus: a refresh's validation against the
    current version (pipelines/validate.py: sources and kinds kept, the tokenizer unchanged, the data
    sound); refused with what `--replace` would override."""
    from bookft.errors import IngestError, PipelineError
    from bookft.pipelines.config import ValidateConfig
    from bookft.pipelines.plan import current_manifest
    from bookft.pipelines.validate import validate_version

    def check(staged: Path, manifest: dict) -> bool:
        previous = current_manifest(Path(out))
        if previous is None:
            return True
        try:
            validate_version(staged, manifest, previous, ValidateConfig())
        except PipelineError as e:
            why = str(e).removeprefix("validation of the new version failed: ")
            raise IngestError(f"{out}: a corpus already (version {previous.get('version')}); the new version "
                              f"fails the checks a refresh makes against it: {why}. Nothing was published. "
                              "Pass --replace to publish it anyway, or choose another --out") from None
        return True

    return check


def register(app: typer.Typer) -> None:
    @app.command()
    def ingest(
        sources: list[str] = typer.Argument(None, help="Files or folders (PDF, EPUB, DOCX, code repository, "
                                            "legal archive/folder, JSONL, HTML, text). None: the built-in sample."),
        out: str = typer.Option(None, "--corpus", "--out", "-o", help="Corpus directory to build (default from "
                                "the definition); `--corpus` names a corpus directory in every command."),
        definition: Path = typer.Option(None, "--definition", "-d", help="Corpus definition YAML (corpora/*.yaml)."),
        kind: str = typer.Option("auto", "--kind", help="auto|pdf|epub|docx|code|legal|jsonl|html|text for SOURCES."),
        tokenizer: str = typer.Option(None, "--tokenizer", help="tokenizer.json or HF model folder (local)."),
        seq_len: int = typer.Option(None, "--seq-len", help="Tokens per packed sequence."),
        vocab_size: int = typer.Option(None, "--vocab-size", help="Vocabulary of the BPE trained on the corpus."),
        segments: str = typer.Option(None, "--segments", help="document|collection: attention segment unit."),
        workers: int = typer.Option(None, "--workers", help="Extraction processes (0 = in process)."),
        engine: str = typer.Option(None, "--engine", help="local|ray: where the per-source jobs run (default local: "
                                   "a process pool; ray: Ray Data, needs pip install 'bookft[ray]')."),
        ray_address: str = typer.Option(None, "--ray-address", help="--engine ray: the Ray cluster to join "
                                        "(default: start a local Ray instance)."),
        set_: list[str] = typer.Option([], "--set", help="Config override key=value (repeatable)."),
        synthesize_retrieval: float = typer.Option(None, "--synthesize-retrieval", help="Share of sequences "
                                                   "that are synthesized long-range retrieval examples (0-0.99)."),
        pdf_password: str = typer.Option(None, "--pdf-password", envvar="BOOKFT_PDF_PASSWORD", help="Password of the "
                                         "encrypted PDFs in SOURCES (files you own); never written to the corpus. "
                                         "For a corpus YAML's sources: pdf_password_env."),
        no_secret_scan: bool = typer.Option(False, "--no-secret-scan", help="Do not scan code (or legal) sources "
                                            "for secrets (on for code by default: found ones are redacted)."),
        replace: bool = typer.Option(False, "--replace", help="Publish into an existing corpus even when the new "
                                     "version fails a refresh's checks against the current one (sources or "
                                     "kinds lost, another tokenizer)."),
    ) -> None:
        """Turn sources into a packed, versioned corpus (tokens in sequences of --seq-len)."""
        from bookft.ingest.config import IngestConfig
        from bookft.ingest.corpus_build import build_corpus
        from bookft.ingest.formats.registry import KINDS
        from bookft.ingest.sample import default_corpus_yaml

        if kind not in ("auto", *KINDS):
            raise ConfigError(f"--kind {kind!r}: expected auto, {', '.join(KINDS)}")
        if pdf_password and not sources:
            console.print("[yellow]note[/]: --pdf-password (BOOKFT_PDF_PASSWORD) opens PDFs named on the command "
                          "line; a corpus YAML source names its own: pdf_password_env: NAME")
        path = definition if definition is not None else (None if sources else default_corpus_yaml())
        overrides = list(set_)
        for key, val in (("out", out), ("tokenizer.path", tokenizer), ("packing.seq_len", seq_len),
                         ("tokenizer.vocab_size", vocab_size), ("packing.segments", segments),
                         ("workers", workers), ("retrieval.rate", synthesize_retrieval), ("engine", engine),
                         ("ray_address", ray_address)):
            if val is not None:
                overrides.append(f"{key}={val}")
        if no_secret_scan:
            overrides += ["extract.secrets.code=false", "extract.secrets.legal=false"]
        cfg = load(IngestConfig, path, overrides)
        cli_sources = [(s, kind, None, pdf_password) if pdf_password else (s, kind, None) for s in sources or []]
        progress = RichProgress(console)
        try:
            m = build_corpus(cfg, progress, sources=cli_sources, before_publish=None if replace else checked(cfg.out))
        finally:
            progress.stop()
        for line in m.get("cleaned", []):
            console.print(f"[yellow]cleaned[/]: {line}")
        console.print(summary_table(m))
        probs = problems_table(m)
        if probs is not None:
            console.print(probs)
        if "retrieval" in m:
            r = m["retrieval"]
            console.print(f"retrieval: {r['examples']:,} synthesized examples in {r['synthesized_sequences']:,} "
                          f"sequences (per length {r['per_length']}, per kind {r['per_kind']})")
        console.print(f"[green]published[/] {m['path']}  (current -> versions/{m['version']:04d})")
