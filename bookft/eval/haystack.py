"""The eval's haystacks: generated fillers (bookft/needles/haystack.py) or a corpus's documents."""

from __future__ import annotations

from pathlib import Path

from bookft.errors import CorpusError, EvalError
from bookft.needles.haystack import Haystack, fill_haystack, generated_haystack, split_sentences
from bookft.needles.tokenizer import ModelTokenizer


def corpus_documents_dir(path: str | Path) -> Path:
    """The `documents/` folder of a corpus (resolving `current` once) or of a version directory."""
    path = Path(path)
    from bookft.corpus import open_corpus

    try:  # the corpus reader resolves `current` exactly once
        path = Path(open_corpus(path).path)
    except CorpusError:  # documents only (no manifest/sequences): resolve it here
        if (path / "current").exists():
            path = (path / "current").resolve()
    docs = path / "documents"
    if not docs.is_dir():
        raise EvalError(f"{path}: not a bookft corpus (no documents/ folder); pass a corpus or version dir")
    return docs


def _corpus_chunks(docs_dir: Path, seed: int):
    import datasets

    try:
        ds = datasets.load_from_disk(str(docs_dir))
    except Exception as e:  # datasets raises FileNotFoundError/ValueError variants
        raise EvalError(f"{docs_dir}: cannot read corpus documents ({e})") from None
    if "text" not in ds.column_names:
        raise EvalError(f"{docs_dir}: corpus documents have no `text` column (columns: {ds.column_names})")
    n = len(ds)
    if n == 0:
        return
    start = seed % n  # each seed starts at another document, in order, wrapping around once
    for k in range(n):
        text = ds[(start + k) % n]["text"] or ""
        chunks = split_sentences(text)
        if chunks and not chunks[-1][-1].isspace():
            chunks[-1] += "\n\n"
        yield from chunks


def build_haystack(kind: str, tokenizer: ModelTokenizer, seed: int, min_tokens: int,
                   corpus: str | None = None) -> Haystack:
    """At least `min_tokens` tokens of filler (or EvalError when a corpus holds too little)."""
    if kind in ("essay", "noise"):
        return generated_haystack(kind, tokenizer, seed, min_tokens)
    if kind == "corpus":
        if not corpus:
            raise EvalError("haystack corpus needs eval.corpus (a corpus directory)")
        docs = corpus_documents_dir(corpus)
        hay = fill_haystack(kind, _corpus_chunks(docs, seed), tokenizer, min_tokens, str(docs))
        if hay.total_tokens < min_tokens:
            raise EvalError(
                f"corpus {docs} holds only {hay.total_tokens} tokens of document text "
                f"({len(hay.chunks)} sentences), but the requested length needs about {min_tokens} "
                "tokens of haystack; lower eval.max_length/eval.lengths, add documents, or use "
                "eval.haystack=essay")
        return hay
    raise EvalError(f"unknown haystack {kind!r}; choose essay, noise or corpus")
