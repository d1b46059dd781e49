"""The streaming pieces of a build: batched encoding, the split extraction cache, direct Arrow shards, pread."""

import json

import datasets
import numpy as np
import pyarrow as pa
import pytest

from bookft.corpus.store import ArrowDatasetWriter, FlatFile
from bookft.ingest.documents import Document, Entry, ExtractResult, text_hash
from bookft.ingest.engine.cache import SourceCache, extract_paths
from bookft.ingest.tokenize import encode_documents, train_bpe, units

WORDS = "alpha beta gamma delta epsilon zeta eta theta".split()


@pytest.fixture(scope="module")
def texts_and_tok():
    rng = np.random.default_rng(0)
    texts = []
    for _ in range(60):
        n = int(rng.choice([0, 1, 3, 10, 40]))  # empty documents too
        texts.append("\n\n".join(" ".join(rng.choice(WORDS, size=rng.integers(1, 30))) for _ in range(n)))
    return texts, train_bpe(texts, 400)


def _reference(tok, texts, eos):
    """One unit at a time, no batching: what encode_documents must give whatever its batch size."""
    for t in texts:
        ids = [tok.encode(u, add_special_tokens=False).ids for u in units(t)]
        flat = np.array([i for x in ids for i in x] + ([eos] if eos is not None else []), np.int32)
        b = np.cumsum([len(x) for x in ids], dtype=np.int64)[:-1]
        yield flat, b[(b > 0) & (b < len(flat))]


@pytest.mark.parametrize("batch_chars", [1, 37, 500, 1 << 30])
@pytest.mark.parametrize("eos", [None, 0])
def test_encoding_does_not_depend_on_batching(texts_and_tok, batch_chars, eos):
    texts, tok = texts_and_tok
    got = list(encode_documents(tok, iter(texts), eos, batch_chars))  # a generator: consumed lazily
    want = list(_reference(tok, texts, eos))
    assert len(got) == len(want) == 60
    for (ids, bnd), (ids_r, bnd_r) in zip(got, want, strict=True):
        assert ids.dtype == np.int32 and bnd.dtype == np.int64
        np.testing.assert_array_equal(ids, ids_r)
        np.testing.assert_array_equal(bnd, bnd_r)


def test_extraction_cache_streams_documents_and_prunes_old_format(tmp_path):
    docs = [Document("a.txt", "c", "text", "caf\u00e9 \u2603 plain", "A", {"n": 1}),
            Document("b.txt", "c", "text", "", "B"),
            Document("c.txt", "c", "text", "lone surrogate \udc80 kept", "C")]
    res = ExtractResult("src", "text", "h0", docs, [Entry("src", "ingested")], {"files": 3})
    cache = SourceCache(tmp_path)
    head = cache.save_extract("k1", res)
    assert [d["hash"] for d in head["documents"]] == [text_hash(d.text) for d in docs]
    assert all("text" not in d for d in head["documents"])  # texts live in the .text file only
    fresh = SourceCache(tmp_path)  # reads the head from disk
    assert fresh.has_extract("k1") and not fresh.has_extract("k2")
    assert [d.text for d in fresh.documents("k1", [0, 2])] == [docs[0].text, docs[2].text]
    back = fresh.load_extract("k1")
    assert back.documents == docs and back.entries == res.entries and back.stats == {"files": 3}
    old = tmp_path / "cache" / "extract" / "k1.json"  # an entry of the one-file format
    old.write_text("{}")
    cache.save_extract("k2", res)
    cache.prune({"k1"}, "0" * 64)
    assert sorted(p.name for p in old.parent.iterdir()) == ["k1.head.json", "k1.text"]
    assert extract_paths(tmp_path / "cache", "k1")[1].stat().st_size == sum(
        len(d.text.encode("utf-8", "surrogatepass")) for d in docs)


def test_arrow_writer_shards_open_with_load_from_disk(tmp_path):
    schema = pa.schema([("ids", pa.list_(pa.int32())), ("name", pa.string())])
    w = ArrowDatasetWriter(tmp_path / "ds", schema, max_shard_bytes=2000)
    rng = np.random.default_rng(1)
    rows = [rng.integers(0, 1000, size=int(rng.integers(1, 100)), dtype=np.int32) for _ in range(50)]
    for k in range(0, 50, 5):
        w.write({"ids": rows[k:k + 5], "name": [f"r{j}" for j in range(k, k + 5)]})
    w.close()
    state = json.loads((tmp_path / "ds" / "state.json").read_text())
    n = len(state["_data_files"])
    assert n > 3 and state["_data_files"][-1]["filename"] == f"data-{n - 1:05d}-of-{n:05d}.arrow"
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    assert len(ds) == 50 and ds.features["ids"].feature.dtype == "int32"
    assert ds["name"] == [f"r{j}" for j in range(50)]
    for j in (0, 17, 49):
        assert ds[j]["ids"] == rows[j].tolist()
    empty = ArrowDatasetWriter(tmp_path / "empty", schema)
    empty.close()
    assert len(datasets.load_from_disk(str(tmp_path / "empty"))) == 0


def test_flat_file_reads_slices(tmp_path):
    a = np.arange(1000, dtype=np.int32) * 7
    (tmp_path / "t.bin").write_bytes(a.tobytes())
    f = FlatFile(tmp_path / "t.bin", np.int32)
    assert len(f) == 1000
    np.testing.assert_array_equal(f[10:20], a[10:20])
    np.testing.assert_array_equal(f[np.int64(990):np.int64(2000)], a[990:])
    assert len(f[500:400]) == 0
    with pytest.raises(ValueError, match="contiguous"):
        f[::2]
    f.close()


def test_unreadable_head_counts_as_missing(tmp_path):
    cache = SourceCache(tmp_path)
    cache.save_extract("k", ExtractResult("s", "text", documents=[Document("s", "c", "text", "hello")]))
    head, _ = extract_paths(tmp_path / "cache", "k")
    head.write_text("{not json")
    assert not SourceCache(tmp_path).has_extract("k")
    head.write_text(json.dumps({"format": 1}))
    assert not SourceCache(tmp_path).has_extract("k")


def test_paragraph_units_round_trip_and_a_split_document_tokenizes_as_one(texts_and_tok):
    """A long document cut into paragraph batches (units end after "\\n\\n"; issue 18) gives the ids of
    the same document in one batch, and the ids decode back to the text exactly."""
    texts, tok = texts_and_tok
    doc = "\n\n".join(t for t in texts if t)  # one long document of many paragraphs
    (one, b_one), = encode_documents(tok, [doc], None, 1 << 30)
    (cut, b_cut), = encode_documents(tok, [doc], None, 64)  # many batches, the document spans them
    np.testing.assert_array_equal(one, cut)
    np.testing.assert_array_equal(b_one, b_cut)
    assert tok.decode(one.tolist()) == doc
    assert "".join(units(doc)) == doc and all(u.endswith("\n\n") for u in units(doc)[:-1])


def test_hf_metadata_equals_what_datasets_writes():
    """The corpus writer's own `datasets` metadata (bookft/corpus/hf_features.py, no `datasets` import)
    is byte for byte what `datasets` builds for every schema the writer uses."""
    from datasets.utils.py_utils import asdict

    from bookft.corpus import hf_features
    from bookft.corpus.writer import DOC_SCHEMA, seq_schema

    for schema in (DOC_SCHEMA, seq_schema(False), seq_schema(True)):
        ref = datasets.Features.from_arrow_schema(schema)
        assert hf_features.with_features(schema).metadata == ref.arrow_schema.metadata
        assert hf_features.with_features(schema).equals(ref.arrow_schema, check_metadata=True)
        info = asdict(datasets.DatasetInfo(features=ref))
        assert json.dumps(hf_features.dataset_info(schema), indent=2) == json.dumps(
            {k: info[k] for k in sorted(info)}, indent=2)
    assert len(hf_features.random_fingerprint()) == len(datasets.fingerprint.generate_random_fingerprint())
    with pytest.raises(TypeError, match="no datasets feature mapping"):
        hf_features.feature(pa.large_list(pa.int8()))


def test_columns_from_buffers_equal_pa_array():
    from bookft.corpus.store import _column

    rng = np.random.default_rng(0)
    cases = [(["a", "h\u00e9llo \u2603", ""], pa.string()), (["x" * 10, "y"], pa.large_string()), ([], pa.string()),
             ([1, 2, 3], pa.int64()), ([], pa.int64()), ([0.5, 2], pa.float32()),
             ([np.arange(3, dtype=np.int32), np.zeros(0, np.int32)], pa.list_(pa.int32())), ([], pa.list_(pa.int64())),
             ([rng.random(4).astype(np.float32)], pa.list_(pa.float32())), (["a", None], pa.string())]
    for values, typ in cases:
        got, ref = _column(values, typ), pa.array(values, type=typ)
        got.validate(full=True)
        assert got.type == ref.type and got.equals(ref), (values, typ)


def test_an_ingest_imports_neither_datasets_nor_pandas(tmp_path):
    """Issue 18's whole-process budget: `datasets` (~0.5 s) and pandas (~0.3 s, which `pa.array` imports
    when installed) stay out of a build; the corpus still opens with `datasets.load_from_disk`."""
    import subprocess
    import sys

    (tmp_path / "a.txt").write_text("Some text. " * 500)
    code = ("import sys; from bookft.config import from_dict; from bookft.ingest import IngestConfig, build_corpus; "
            f"build_corpus(from_dict(IngestConfig, {{'out': {str(tmp_path / 'c')!r}, "
            f"'sources': [{{'path': {str(tmp_path / 'a.txt')!r}}}], 'tokenizer': {{'vocab_size': 300}}}})); "
            "print(sorted(m for m in ('datasets', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    assert len(datasets.load_from_disk(str(tmp_path / "c" / "current" / "documents"))) == 1
