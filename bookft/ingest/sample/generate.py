"""The built-in sample corpus: material bookft generates (or owns), so `bookft ingest` works offline.

Design choices:
- Deterministic (seeded): the same config gives the same bytes, so reruns hit the extraction cache.
- Books are real PDFs (own minimal writer, no reportlab) with running headers, page numbers and
  hyphenated line ends, and keyed facts ("The code of NAME is DDDDD.") spread through them at known
  depths; `facts.json` records them for retrieval evaluation.
- A USLM-style legal archive (zip of XML titles), JSON Lines court opinions, and a generated Python
  repository (bookft.ingest.sample.code). Nothing in the sample depends on the package's own source,
  so it is the same corpus at every commit; tests/ingest/test_ingest_sample.py pins its content hash
  (`sample_digest`).
"""

from __future__ import annotations

import hashlib
import json
import random
import zipfile
from importlib import resources
from pathlib import Path

from bookft.ingest.config import SampleConfig
from bookft.ingest.sample.code import code_repository, write_repository
from bookft.ingest.sample.pdfwriter import book_pdf

WORDS = ("river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor garden "
         "letter window mountain valley forest candle journey evening morning silver copper market "
         "village bridge tower library scholar captain engine signal island shadow harvest thunder "
         "festival chapter promise secret distant northern southern careful patient curious "
         "remarkable considerable extraordinary unexpected gradually suddenly carefully whispered "
         "remembered travelled discovered considered returned followed gathered wandered").split()
NAMES = ("Aldric Brienne Corvin Delphine Emrys Fenna Gideon Hollis Isolde Jorah Kestrel Lysander Marisol "
         "Nerys Orrin Perpetua Quillon Rosalind Silas Thessaly Ulric Vesper Wren Xanthe Yorick Zephyr").split()
USLM_NS = "http://xml.house.gov/schemas/uslm/1.0"


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
    return " ".join(words).capitalize() + rng.choice(".....!?")


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(2, 7)))


def book(rng: random.Random, pages: int, n_facts: int) -> tuple[list[str], list[dict]]:
    """Paragraphs of about `pages` pages (~3,300 chars each) with keyed facts at spread depths."""
    paras: list[str] = []
    target = pages * 3300
    size = 0
    while size < target:
        p = _paragraph(rng)
        paras.append(p)
        size += len(p) + 2
    facts = []
    names = rng.sample(NAMES, k=min(n_facts, len(NAMES)))
    for j, name in enumerate(names):
        depth = (j + 0.5) / len(names)
        k = min(len(paras) - 1, int(depth * len(paras)))
        code = f"{rng.randint(0, 99999):05d}"
        paras[k] = paras[k] + f" The code of {name} is {code}."
        facts.append({"name": name, "code": code, "paragraph": k, "depth": round(k / len(paras), 4)})
    return paras, facts


def uslm_title(rng: random.Random, number: int, sections: int) -> bytes:
    parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<uscDoc xmlns="{USLM_NS}" '
             f'xmlns:dc="http://purl.org/dc/elements/1.1/" identifier="/us/usc/t{number}">',
             f"<meta><dc:title>Title {number}. Sample Provisions</dc:title></meta><main>",
             f'<title identifier="/us/usc/t{number}"><num value="{number}">Title {number}.</num>'
             f"<heading>Sample Provisions</heading>"]
    per_chapter = max(1, sections // 3)
    for s in range(1, sections + 1):
        if (s - 1) % per_chapter == 0:
            if s > 1:
                parts.append("</chapter>")
            c = (s - 1) // per_chapter + 1
            parts.append(f'<chapter><num value="{c}">Chapter {c}.</num><heading>{rng.choice(WORDS).title()} '
                         f"{rng.choice(WORDS).title()}</heading>")
        parts.append(f'<section identifier="/us/usc/t{number}/s{s}"><num value="{s}">\u00a7 {s}.</num>'
                     f"<heading>{rng.choice(WORDS).title()} of {rng.choice(WORDS)}</heading>"
                     f"<chapeau>{_sentence(rng)}</chapeau>")
        for k, letter in enumerate("abc"[: rng.randint(1, 3)]):
            parts.append(f"<subsection><num value=\"{letter}\">({letter})</num><content><p>{_paragraph(rng)}"
                         f"</p></content></subsection>")
            del k
        parts.append("</section>")
    parts.append("</chapter></title></main></uscDoc>")
    return "\n".join(parts).encode("utf-8")


def generate_sample(folder: Path, cfg: SampleConfig) -> list[tuple[str, str, str | None]]:
    """Write the sample's files into `folder` (only when their bytes change); return the source list."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(cfg.seed)
    out: list[tuple[str, str, str | None]] = []
    all_facts = {}

    def put(path: Path, data: bytes) -> None:
        if not (path.is_file() and path.read_bytes() == data):
            path.write_bytes(data)

    books = folder / "books"
    books.mkdir(exist_ok=True)
    for b in range(cfg.books):
        title = f"The {rng.choice(WORDS).title()} of {rng.choice(WORDS).title()} (volume {b + 1})"
        paras, facts = book(rng, cfg.pages_per_book, cfg.facts_per_book)
        path = books / f"book-{b + 1:02d}.pdf"
        put(path, book_pdf(title, "bookft sample generator", paras))
        all_facts[path.name] = facts
        out.append((str(path), "pdf", path.stem))
    if cfg.legal_titles:
        zpath = folder / "uslm-sample.zip"
        import io

        mem = io.BytesIO()
        with zipfile.ZipFile(mem, "w", zipfile.ZIP_DEFLATED) as zf:
            for t in range(1, cfg.legal_titles + 1):
                info = zipfile.ZipInfo(f"usc/title{t:02d}.xml", date_time=(2026, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, uslm_title(rng, t, cfg.sections_per_title))
        put(zpath, mem.getvalue())
        out.append((str(zpath), "legal", "uslm-sample"))
    if cfg.opinions:
        lines = []
        for k in range(cfg.opinions):
            a, b = rng.sample(NAMES, 2)
            text = "\n\n".join(_paragraph(rng) for _ in range(rng.randint(3, 9)))
            lines.append(json.dumps({"id": f"op-{k + 1:04d}", "case_name": f"{a} v. {b}",
                                     "court": "Sample Court of Appeals", "text": text}))
        jpath = folder / "opinions.jsonl"
        put(jpath, ("\n".join(lines) + "\n").encode())
        out.append((str(jpath), "jsonl", "opinions"))
    put(folder / "facts.json", (json.dumps(all_facts, indent=1) + "\n").encode())
    if cfg.code_repository:
        repo = folder / "code"
        write_repository(repo, code_repository(rng, cfg.code_modules))
        out.append((str(repo), "code", "samplekit"))
    return out


def sample_digest(folder: Path) -> str:
    """sha256 of the sample's content: every file's relative path and bytes, zip archives by their
    members' names and uncompressed bytes (deflate output may differ between zlib builds)."""
    h = hashlib.sha256()
    for p in sorted(q for q in Path(folder).rglob("*") if q.is_file()):
        h.update(p.relative_to(folder).as_posix().encode() + b"\0")
        if p.suffix == ".zip":
            with zipfile.ZipFile(p) as zf:
                for info in sorted(zf.infolist(), key=lambda i: i.filename):
                    h.update(info.filename.encode() + b"\0" + hashlib.sha256(zf.read(info)).digest())
        else:
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def default_corpus_yaml() -> Path:
    """The built-in sample's corpus definition, shipped inside the package (sample.yaml here; the repository's
    corpora/sample.yaml is the same file, for users to read and copy), so `bookft ingest` with no source
    builds it from any working directory and from an installed package."""
    return Path(str(resources.files("bookft.ingest.sample") / "sample.yaml"))
