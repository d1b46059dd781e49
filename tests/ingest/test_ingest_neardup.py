"""Near-duplicate removal: MinHash estimates, LSH banding, chunked reading, and the build option."""

import numpy as np
import pytest

from bookft.config import from_dict
from bookft.errors import ConfigError
from bookft.ingest import IngestConfig, build_corpus
from bookft.ingest.config import NearDedupConfig
from bookft.ingest.filters import neardup
from bookft.ingest.filters.neardup import MinHasher, NearDuplicates, lsh_bands

WORDS = [f"w{i}" for i in range(3000)]


def _words(seed, n):
    return list(np.random.default_rng(seed).choice(WORDS, size=n))


def _edit(words, n_changes, seed):
    rng = np.random.default_rng(seed)
    out = list(words)
    for p in rng.choice(len(out), size=n_changes, replace=False):
        out[p] = "changed"
    return out


def _jaccard(a, b, k=5):
    sa = {tuple(a[i:i + k]) for i in range(len(a) - k + 1)}
    sb = {tuple(b[i:i + k]) for i in range(len(b) - k + 1)}
    return len(sa & sb) / len(sa | sb)


def test_lsh_bands_recall_first():
    assert lsh_bands(128, 0.8) == (16, 8)  # midpoint 0.707 <= 0.8; (8, 16) would be 0.878
    assert lsh_bands(128, 0.5) == (32, 4)
    b, r = lsh_bands(64, 0.9)
    assert b * r == 64


def test_minhash_estimates_jaccard_and_is_deterministic():
    a = _words(0, 2000)
    h = MinHasher(256, 5)
    for n_changes in (10, 60, 200):
        b = _edit(a, n_changes, n_changes)
        est = float(np.mean(h.signature(" ".join(a)) == h.signature(" ".join(b))))
        assert abs(est - _jaccard(a, b)) < 0.08, (n_changes, est, _jaccard(a, b))
    sig = MinHasher(256, 5).signature(" ".join(a).upper())  # case-insensitive, fresh hasher, same seed
    np.testing.assert_array_equal(sig, h.signature(" ".join(a)))
    assert float(np.mean(sig == h.signature(" ".join(_words(1, 2000))))) < 0.05  # unrelated text


def test_chunked_reading_gives_the_same_signature(monkeypatch):
    text = "\n".join(" ".join(_words(s, 50)) for s in range(40))
    h = MinHasher(64, 5)
    whole = h.signature(text)
    monkeypatch.setattr(neardup, "CHUNK_CHARS", 97)  # many chunks, words carried over between them
    np.testing.assert_array_equal(h.signature(text), whole)
    short = h.signature("two words")  # fewer words than a shingle: one shingle of both
    assert (short < np.iinfo(np.uint32).max).all()
    assert not np.array_equal(short, h.signature("other words"))


def test_first_occurrence_wins_and_threshold():
    nd = NearDuplicates(NearDedupConfig(enabled=True, threshold=0.8))
    a = _words(0, 1500)
    assert nd.check_add(" ".join(a), "a") is None
    near = nd.check_add(" ".join(_edit(a, 15, 1)), "a2")  # true Jaccard ~0.9
    assert near is not None and near[0] == "a" and near[1] >= 0.8
    assert nd.check_add(" ".join(_edit(a, 300, 2)), "far") is None  # Jaccard ~0.3: kept
    assert nd.check_add(" ".join(_words(5, 1500)), "b") is None
    assert nd.names == ["a", "far", "b"]


def test_build_option_removes_near_duplicates_and_reports_them(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    a = _words(0, 1200)
    paras = lambda ws: "\n\n".join(" ".join(ws[i:i + 60]) for i in range(0, len(ws), 60))  # noqa: E731
    (src / "a.txt").write_text(paras(a))
    (src / "b.txt").write_text(paras(_edit(a, 12, 3)))  # a near copy of a.txt
    (src / "c.txt").write_text(paras(_words(9, 1200)))

    def build(out, enabled):
        cfg = from_dict(IngestConfig, {"out": str(tmp_path / out), "workers": 0, "tokenizer": {"vocab_size": 320},
                                       "packing": {"seq_len": 512}, "near_dedup": {"enabled": enabled}})
        return build_corpus(cfg, sources=[(str(src), "auto", None)])

    off = build("off", False)
    assert off["counts"]["documents"] == 3 and off["counts"]["near_duplicates"] == 0
    on = build("on", True)
    assert on["counts"]["documents"] == 2 and on["counts"]["near_duplicates"] == 1
    assert on["counts"]["duplicates"] == 0
    (dup,) = on["duplicates"]
    assert dup["source"].endswith("b.txt") and dup["near_duplicate_of"].endswith("a.txt") and dup["jaccard"] >= 0.8
    with pytest.raises(ConfigError, match="near_dedup.threshold"):
        from_dict(IngestConfig, {"near_dedup": {"threshold": 1.5}})
