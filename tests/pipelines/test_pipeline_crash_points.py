"""A real refresh process killed with SIGKILL (BOOKFT_TEST_CRASH_AT: os._exit(137) at the instant) at
every crash point, then a rerun: the corpus equals the uninterrupted refresh's (data files by sha256;
the manifest's data hash, counts, kinds and source hashes), nothing the dead run left stays, the dead
run gets its log record, and at no instant does `current` point at an incomplete version."""

import json
import os
import shutil
import signal

import pytest
from pipeline_helpers import current, make_sources, manifest, run_subprocess, text, write_pipeline

from bookft.corpus import integrity
from bookft.corpus.integrity import verify
from bookft.corpus.lease import Lease, holders
from bookft.pipelines import EXIT_OK, run_pipeline
from bookft.pipelines.runlog import read_records

RETRIEVAL = {"retrieval": {"rate": 0.3, "lengths": [512], "kinds": ["magic_number"]}}
PLAIN_POINTS = ["after-extract", "extract", "after-dedup", "after-tokenizer", "after-tokenize", "pack",
                "after-pack", "write", "after-write", "publish", "published", "prune", "pruning"]
RETRIEVAL_POINTS = ["synthesize", "after-synthesize", "publish", "published"]


def data_digests(corpus) -> dict:
    """sha256 of every file of the current version but the datasets' state.json (a random fingerprint)."""
    files = manifest(corpus)["files"]
    return {k: v for k, v in files.items() if not k.endswith("state.json")}


def facts(m: dict) -> tuple:
    return m["data_hash"], m["counts"], m["per_kind"], m["source_hashes"], m["tokenizer"]["fingerprint"]


def make_world(tmp, **over):
    """Version 1 kept as a template, then the sources changed and the reference refresh run (version 2)
    in the same corpus folder: every test restores the template there, so paths match."""
    src = make_sources(tmp / "src", range(4))
    path = write_pipeline(tmp, src, retention=1, **over)
    assert run_pipeline(path)[0] == EXIT_OK
    shutil.copytree(tmp / "corpus", tmp / "template", symlinks=True)
    (src / "doc8.txt").write_text(text(8))
    (src / "doc0.txt").write_text(text(0) + "\n\nA new ending.")
    (src / "doc3.txt").unlink()
    code, ref = run_pipeline(path)
    assert code == EXIT_OK and ref["version"] == 2 and ref["pruned"] == ["0001"]
    assert ref["counts"]["documents_extracted"] == 2  # doc8 added, doc0 changed (either pass extracting them)
    return {"tmp": tmp, "path": path, "corpus": tmp / "corpus", "ref": manifest(tmp / "corpus"),
            "ref_files": data_digests(tmp / "corpus")}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def retrieval(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("retrieval"), seq_len=512, ingest=RETRIEVAL)


def crash_then_rerun(world, point, before=None):
    corpus = world["corpus"]
    shutil.rmtree(corpus)
    shutil.copytree(world["tmp"] / "template", corpus, symlinks=True)
    if before is not None:
        before(corpus)
    proc = run_subprocess(world["path"], crash_at=point)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, out
    assert verify(corpus / "current") == []  # whatever `current` points at is complete
    code, r = run_pipeline(world["path"])
    assert code == EXIT_OK, r
    assert r["took_over_lock_from"]["pid"] == proc.pid
    assert facts(manifest(corpus)) == facts(world["ref"])
    assert data_digests(corpus) == world["ref_files"]
    assert verify(corpus / "current") == []
    assert not [p for p in (corpus / "versions").iterdir() if p.name.startswith(".tmp")]
    assert not [p for p in corpus.iterdir() if p.name.startswith("current.tmp")]
    return proc, r


@pytest.mark.parametrize("point", PLAIN_POINTS)
def test_kill9_at_each_point_then_rerun(plain, point):
    proc, r = crash_then_rerun(plain, point)
    corpus = plain["corpus"]
    assert current(corpus) == "versions/0002"
    assert sorted(p.name for p in (corpus / "versions").iterdir()) == ["0002"]  # retention 1 holds
    published = point in ("published", "prune", "pruning")
    assert r["result"] == ("unchanged" if published else "ok")
    dead = [x for x in read_records(corpus) if x.get("pid") == proc.pid]
    assert len(dead) == 1 and dead[0]["result"] == "killed" and dead[0]["published"] == published
    assert any(line.startswith("runs/lock") for line in r["cleaned"])
    if point == "pruning":  # the half-deleted version the dead run renamed aside is named in the log
        assert any("half-pruned version" in line and "0001" in line for line in r["cleaned"]), r["cleaned"]
    if point not in ("after-extract", "extract"):  # extraction finished before the kill: all cached now
        assert r["counts"]["documents_extracted"] == 0
    if point in ("write", "after-write", "publish"):
        assert any("staging folder" in line for line in r["cleaned"]), r["cleaned"]


@pytest.mark.parametrize("point", RETRIEVAL_POINTS)
def test_kill9_retrieval_build_then_rerun(retrieval, point):
    crash_then_rerun(retrieval, point)
    corpus = retrieval["corpus"]
    assert (corpus / "current" / "retrieval.json").is_file()
    assert json.loads((corpus / "current" / "retrieval.json").read_text())["synthesized_sequences"] >= 1


@pytest.mark.parametrize("point", ["published", "prune"])
def test_kill9_with_a_run_holding_a_lease(plain, point, tmp_path):
    """A training run (its run directory) holds version 1: whatever the crash, the rerun keeps it."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def hold(corpus):
        Lease(corpus, version=1, run_dir=run_dir).__enter__()

    crash_then_rerun(plain, point, before=hold)
    corpus = plain["corpus"]
    assert sorted(p.name for p in (corpus / "versions").iterdir()) == ["0001", "0002"]
    assert [(h["version"], h["run_dir"]) for h in holders(corpus)] == [(1, str(run_dir.resolve()))]
    assert verify(corpus / "versions" / "0001") == []


def _legacy_without_retrieval_json(v):
    """What a kill -9 at the old publish left: a published version without retrieval.json, and a
    manifest without an inventory."""
    (v / "retrieval.json").unlink()
    m = json.loads((v / "manifest.json").read_text())
    del m["files"]
    (v / "manifest.json").write_text(json.dumps(m))


def _flipped_byte(v):
    """A data shard damaged in place (same size): only the digest tells."""
    shard = v / "sequences" / "data-00000-of-00001.arrow"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_legacy_without_retrieval_json, _flipped_byte])
def test_rerun_repairs_a_broken_current_version(retrieval, damage):
    """Never "unchanged" over a broken version: the rerun removes it, says so, and rebuilds it."""
    corpus = retrieval["corpus"]
    shutil.rmtree(corpus)
    shutil.copytree(retrieval["tmp"] / "template", corpus, symlinks=True)
    code, _ = run_pipeline(retrieval["path"])
    assert code == EXIT_OK and current(corpus) == "versions/0002"
    damage(corpus / "versions" / "0002")
    assert verify(corpus / "current") != []
    code, r = run_pipeline(retrieval["path"])
    assert code == EXIT_OK and r["result"] == "ok" and r["published"], r
    assert any("versions/0002 (incomplete, was current" in line for line in r["cleaned"]), r["cleaned"]
    assert verify(corpus / "current") == [] and (corpus / "current" / "retrieval.json").is_file()
    assert facts(manifest(corpus)) == facts(retrieval["ref"])
    assert data_digests(corpus) == retrieval["ref_files"]
    code, r = run_pipeline(retrieval["path"])
    assert code == EXIT_OK and r["result"] == "unchanged" and not r["cleaned"]


def test_unchanged_files_are_not_read_again(plain, monkeypatch):
    """The current version is digested once; later runs reread only files whose size or mtime changed."""
    corpus = plain["corpus"]
    shutil.rmtree(corpus)
    shutil.copytree(plain["tmp"] / "template", corpus, symlinks=True)
    assert run_pipeline(plain["path"])[0] == EXIT_OK  # publishes version 2
    assert run_pipeline(plain["path"])[0] == EXIT_OK  # digests it: every file read once
    read = []
    real = integrity.digest
    monkeypatch.setattr(integrity, "digest", lambda p: read.append(p.name) or real(p))
    code, r = run_pipeline(plain["path"])
    assert code == EXIT_OK and r["result"] == "unchanged" and read == []
    shard = corpus / "current" / "documents" / "data-00000-of-00001.arrow"
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 1_000_000))
    code, r = run_pipeline(plain["path"])
    assert code == EXIT_OK and r["result"] == "unchanged" and read == [shard.name]
