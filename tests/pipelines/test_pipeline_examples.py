"""One build: `bookft ingest` and `bookft pipeline run` publish the same corpus for a definition that
asks for synthesized training examples; a refresh never strips them, a kill -9 anywhere (the
synthesis phase included) loses nothing, and validation refuses to lose a whole kind of data."""

import json
import shutil
import signal

import pytest
import yaml
from pipeline_helpers import current, manifest, run_subprocess
from typer.testing import CliRunner

from bookft.cli import app
from bookft.needles import NIAH_INSTRUCTION
from bookft.needles.haystack import essay_sentences
from bookft.pipelines import EXIT_FAILED, EXIT_OK, run_pipeline


def _sources(folder):
    gen = essay_sentences(1)
    folder.mkdir(parents=True)
    for i in range(3):
        (folder / f"essay{i}.txt").write_text("".join(next(gen) for _ in range(120)))
    (folder / "frame.txt").write_text((NIAH_INSTRUCTION + "What is the special magic number for x?\n") * 20)
    return folder


def _definition(tmp, src, out):
    d = {"name": "books", "out": str(out), "workers": 0, "tokenizer": {"vocab_size": 600},
         "packing": {"seq_len": 512}, "sources": [{"path": str(src)}],
         "retrieval": {"rate": 0.6, "lengths": [256, 512], "questions": 3, "min_context": 0.25}}
    path = tmp / "books.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def _pipeline(tmp, definition, name="refresh", **over):
    p = {"name": name, "corpus": str(definition), "retention": 2, **over}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(p))
    return path


def _copy_of_version_1(tmp, definition, folder, name="books"):
    """A copy of the template corpus (version 1) in `folder`, and the definition pointed at it."""
    corpus = folder / "corpus" if name == "books" else folder / name
    shutil.copytree(tmp / "template", corpus, symlinks=True)
    d = yaml.safe_load(definition.read_text())
    d["out"] = str(corpus)
    own = folder / f"{name}.yaml"
    own.write_text(yaml.safe_dump(d))
    return corpus, own


def _ingest(definition):
    res = CliRunner().invoke(app, ["ingest", "--definition", str(definition)])
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """`bookft ingest` of the definition (version 1); then one source changed and the reference: the
    same refresh run without interruption (version 2)."""
    tmp = tmp_path_factory.mktemp("examples")
    src = _sources(tmp / "src")
    definition = _definition(tmp, src, tmp / "corpus")
    _ingest(definition)
    v1 = manifest(tmp / "corpus")
    shutil.copytree(tmp / "corpus", tmp / "template", symlinks=True)
    gen = essay_sentences(7)
    (src / "essay1.txt").write_text("".join(next(gen) for _ in range(120)))
    code, ref = run_pipeline(_pipeline(tmp, definition))
    assert code == EXIT_OK and ref["version"] == 2, ref
    return tmp, src, definition, v1, manifest(tmp / "corpus")


def test_ingest_publishes_one_version_with_examples(world):
    tmp, _, _, v1, _ = world
    assert v1["version"] == 1 and sorted(p.name for p in (tmp / "template" / "versions").iterdir()) == ["0001"]
    assert v1["per_kind"]["synthesized"]["documents"] > 0 and v1["loss_weights"] is True
    assert (tmp / "template" / "versions" / "0001" / "retrieval.json").is_file()
    # the examples' files are not sources of the definition: a refresh does not see them as removed
    assert not [s for s in v1["source_hashes"] if "retrieval-" in s]


def test_refresh_after_ingest_publishes_nothing(world, tmp_path):
    tmp, src, _, _, _ = world
    corpus = tmp_path / "corpus"
    definition = _definition(tmp_path, src, corpus)
    _ingest(definition)
    v1 = manifest(corpus)
    code, r = run_pipeline(_pipeline(tmp_path, definition))
    assert code == EXIT_OK and r["result"] == "unchanged" and not r["published"], r
    assert r["counts"]["removed"] == 0 and r["counts"]["unchanged"] == 4
    after = manifest(corpus)
    assert current(corpus) == "versions/0001" and after["data_hash"] == v1["data_hash"]
    assert after["per_kind"]["synthesized"] == v1["per_kind"]["synthesized"]


def test_refresh_after_a_change_rebuilds_the_examples_deterministically(world, tmp_path):
    tmp, src, definition, v1, v2 = world
    assert v2["per_kind"]["synthesized"]["documents"] > 0 and v2["data_hash"] != v1["data_hash"]
    # the same refresh again, from a copy of version 1: the same examples, the same corpus
    corpus, again = _copy_of_version_1(tmp, definition, tmp_path)
    code, r = run_pipeline(_pipeline(tmp_path, again))
    assert code == EXIT_OK and r["version"] == 2
    assert manifest(corpus)["data_hash"] == v2["data_hash"]
    files = sorted(p.name for p in (tmp / "corpus" / "retrieval-sources").iterdir())
    assert files and files == sorted(p.name for p in (corpus / "retrieval-sources").iterdir())
    for f in files:
        ours, theirs = corpus / "retrieval-sources" / f, tmp / "corpus" / "retrieval-sources" / f
        assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize("point", ["extract", "pack", "write", "synthesize", "publish", "prune"])
def test_kill9_in_the_one_build_then_rerun_equals_uninterrupted(world, point):
    tmp, src, definition, v1, v2 = world
    corpus, own = _copy_of_version_1(tmp, definition, tmp, name=f"c-{point}")
    path = _pipeline(tmp, own, name=f"p-{point}")
    proc = run_subprocess(path, crash_at=point)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, out
    if point == "prune":  # killed after the rename: the new version is complete and current
        assert current(corpus) == "versions/0002" and manifest(corpus)["data_hash"] == v2["data_hash"]
    else:  # killed before the rename: version 1 is current, with its examples
        assert current(corpus) == "versions/0001" and manifest(corpus)["data_hash"] == v1["data_hash"]
        assert not (corpus / "versions" / "0002").exists()
    code, r = run_pipeline(path)
    assert code == EXIT_OK, r
    final = manifest(corpus)
    assert current(corpus) == "versions/0002" and final["data_hash"] == v2["data_hash"]
    assert final["per_kind"] == v2["per_kind"] and final["counts"] == v2["counts"]
    assert json.loads((corpus / "current" / "retrieval.json").read_text())["examples"] > 0
    assert not [p for p in (corpus / "versions").iterdir() if p.name.startswith(".tmp")]


def test_validation_refuses_to_lose_a_whole_kind(world, tmp_path):
    tmp, _, definition, v1, _ = world
    corpus, definition = _copy_of_version_1(tmp, definition, tmp_path)
    path = _pipeline(tmp_path, definition, ingest={"retrieval": {"rate": 0.0}})
    code, r = run_pipeline(path)
    assert code == EXIT_FAILED and not r["published"]
    n = v1["per_kind"]["synthesized"]["documents"]
    assert f"lose every synthesized document ({n:,} in version 1)" in r["error"]
    assert "validate.allow_lost_kinds: [synthesized]" in r["error"]
    assert current(corpus) == "versions/0001"
    path = _pipeline(tmp_path, definition, ingest={"retrieval": {"rate": 0.0}},
                     validate={"allow_lost_kinds": ["synthesized"]})
    code, r = run_pipeline(path)
    assert code == EXIT_OK and r["published"] and "synthesized" not in manifest(corpus)["per_kind"]
