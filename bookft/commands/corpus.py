"""`bookft inspect CORPUS [--json] [--html OUT]`: the manifest summary of a corpus version (counts, fill,
tokenizer, failed/skipped/stale sources, redacted secrets by file, line and kind); --html writes the
corpus report page (bookft/corpus/html_report.py). `bookft corpus leases|release`: the versions held by
training runs (bookft/corpus/lease.py) and letting one go."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:  # imported where used: the reader pulls pyarrow.compute, which `bookft ingest` never needs
    from bookft.corpus.reader import Corpus


def summary(corpus: Corpus) -> dict:
    """The inspect JSON: at least n_documents, n_tokens, n_sequences, seq_len, fill, failed, skipped."""
    m = corpus.manifest
    c = m["counts"]
    pick = lambda status: [{"source": e["source"], "reason": e["reason"]} for e in m["sources"]
                           if e["status"] == status]
    return {"path": str(corpus.path), "name": m.get("name"), "version": m.get("version"),
            "created": m.get("created"), "n_documents": c["documents"], "n_tokens": c["tokens"],
            "n_sequences": c["sequences"], "seq_len": m["seq_len"], "fill": c["fill"],
            "padding_tokens": c["padding_tokens"], "split_documents": c["split_documents"],
            "duplicates": c["duplicates"], "chars": c["chars"], "pdf_pages": c.get("pdf_pages", 0),
            "per_kind": m.get("per_kind", {}), "segments": m.get("segments"),
            "tokenizer": m["tokenizer"], "data_hash": m.get("data_hash"), "work": m.get("work", {}),
            "n_ingested": sum(1 for e in m["sources"] if e["status"] == "ingested"),
            "failed": pick("failed"), "skipped": pick("skipped"),
            "secrets_redacted": c.get("secrets_redacted", 0),  # file, line, kind per finding; never the value
            "secrets": m.get("secrets", {"per_source": {}, "findings": [], "findings_not_listed": 0}),
            "packed_tokens": c.get("packed_tokens", c["tokens"]),
            "mix": m.get("mix"),  # realised vs asked per source (ingest/mix.py); None: no mix asked
            # sources that could not be read, built from their last good documents (ingest/phases/stale.py)
            "stale": [{k: v for k, v in s.items() if k != "paths"} | {"files": len(s.get("paths", []))}
                      for s in m.get("stale") or []]}


def held_lines(corpus: str) -> list[str]:
    """One line per lease of the corpus: version, holder, since, whether it still holds."""
    from bookft.corpus.lease import holders

    out = []
    for h in holders(corpus):
        who = f"run {h['run_dir']}" if h.get("run_dir") else f"process {h.get('pid')} on {h.get('host')}"
        out.append(f"version {h['version']}: {who}, since {h.get('since') or '?'}"
                   + ("" if h["live"] else f" (no longer held: {h['why']})"))
    return out


def leases_command(corpus: str = typer.Argument(..., help="Corpus directory."),
                   as_json: bool = typer.Option(False, "--json", help="Print the leases as JSON.")) -> None:
    """The versions of a corpus that training runs (or other readers) hold, so retention keeps them."""
    from bookft.corpus.lease import holders

    if as_json:
        print(json.dumps(holders(corpus), indent=1))
        return
    lines = held_lines(corpus)
    typer.echo("\n".join(lines) if lines else f"{corpus}: no version is held")  # plain: paths unwrapped


def release_command(
    corpus: str = typer.Argument(..., help="Corpus directory."),
    run: str = typer.Option(None, "--run", help="Release the lease of this training run directory."),
    version: int = typer.Option(None, "--version", help="Release every lease on this version."),
) -> None:
    """Let a training run's version go (retention may then prune it): a run you will not resume."""
    from bookft.corpus.lease import release
    from bookft.errors import CorpusError

    if run is None and version is None:
        raise CorpusError("bookft corpus release: name --run RUN_DIR or --version N")
    gone = release(corpus, run_dir=run, version=version)
    if not gone:
        what = " and ".join(x for x in (f"run {run}" if run else "", f"version {version}" if version else "") if x)
        raise CorpusError(f"{corpus}: no lease of {what} (bookft corpus leases {corpus} lists them)")
    typer.echo("\n".join(f"released leases/{f}" for f in gone))


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Corpus versions held by training runs: list and release leases.", no_args_is_help=True)
    app.add_typer(group, name="corpus")
    group.command("leases")(leases_command)
    group.command("release")(release_command)

    @app.command()
    def inspect(corpus: str = typer.Argument(..., help="Corpus directory (or one version folder)."),
                as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
                html: str = typer.Option(None, "--html", help="Also write a self-contained HTML report to this file "
                                         "(lengths per source and kind, fill, mix, failed sources, redactions).")) -> None:
        """Print a corpus's manifest summary (counts, fill, tokenizer, failed/skipped sources)."""
        from bookft.corpus.reader import Corpus

        c = Corpus(corpus)
        s = summary(c)
        if html:
            from bookft.corpus.html_report import write_html_report

            page = write_html_report(c, html)
            if not as_json:
                Console().print(f"wrote {page}")
        if as_json:
            print(json.dumps(s, indent=1))
            return
        con = Console()
        t = Table(title=f"{s['name']} v{s['version']}  {s['path']}")
        t.add_column("field")
        t.add_column("value", justify="right")
        for k in ("n_documents", "n_tokens", "n_sequences", "seq_len", "fill", "padding_tokens",
                  "split_documents", "duplicates", "chars", "pdf_pages", "n_ingested", "secrets_redacted"):
            v = s[k]
            t.add_row(k, f"{v:,.4f}" if isinstance(v, float) else f"{v:,}")
        t.add_row("tokenizer", f"{s['tokenizer']['origin']} vocab {s['tokenizer']['vocab_size']:,} "
                               f"fp {s['tokenizer']['fingerprint'][:12]}")
        t.add_row("failed / skipped", f"{len(s['failed'])} / {len(s['skipped'])}")
        for st in s["stale"]:  # unreadable at the last refresh: its documents are the last good ones
            t.add_row("stale source", f"{st['source']}: {st['files']} file(s) kept since version "
                                      f"{st['since_version']} ({st['reason']})")
        con.print(t)
        k = Table(title="per kind")
        for col in ("kind", "documents", "chars", "tokens"):
            k.add_column(col, justify="right" if col != "kind" else "left")
        for kind, v in sorted(s["per_kind"].items()):
            k.add_row(kind, f"{v['documents']:,}", f"{v['chars']:,}", f"{v['tokens']:,}")
        con.print(k)
        found = s["secrets"]["findings"]
        if found:
            r = Table(title=f"redacted secrets ({s['secrets_redacted']:,}; per source: "
                            + ", ".join(f"{k}: {v:,}" for k, v in s["secrets"]["per_source"].items()) + ")")
            for col in ("file", "line", "kind"):
                r.add_column(col, overflow="fold", justify="right" if col == "line" else "left")
            for f in found[:50]:
                r.add_row(f["source"], str(f["line"]), f["kind"])
            if len(found) > 50 or s["secrets"]["findings_not_listed"]:
                r.caption = f"... {s['secrets_redacted'] - 50:,} more (--json lists them)"
            con.print(r)
        bad = s["failed"] + s["skipped"]
        if bad:
            b = Table(title="failed / skipped")
            b.add_column("source", overflow="fold")
            b.add_column("reason", overflow="fold")
            for e in bad[:30]:
                b.add_row(e["source"], e["reason"])
            con.print(b)
