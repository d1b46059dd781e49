"""sample: the built-in sample corpus, generated so that `bookft ingest` works offline with no source.

generate.py writes the sample's files (books as PDFs, a USLM archive, JSON Lines opinions, and a
generated code repository from code.py; pdfwriter.py is the minimal PDF writer). sample.yaml is
the default corpus definition, shipped with the package (`default_corpus_yaml`); the repository's
corpora/sample.yaml is the same file (tests/ingest/test_ingest_sample.py keeps them equal).
"""

from bookft.ingest.sample.generate import (
    NAMES,
    WORDS,
    book,
    default_corpus_yaml,
    generate_sample,
    sample_digest,
    uslm_title,
)

__all__ = ["NAMES", "WORDS", "book", "default_corpus_yaml", "generate_sample", "sample_digest", "uslm_title"]
