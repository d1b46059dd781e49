"""A run's record of its data (RUN_DIR/corpus.json) is never rewritten: a missing or malformed record in
a run with checkpoints is refused with an error naming the file and `--corpus-version N|latest`; with
that choice the run goes on, the bad file kept beside and the move marked in the metrics; a version
that does not exist creates nothing."""

import json
import shutil

import pytest
from test_train_corpus_version import StopAt, _config, _ingest

from bookft.errors import CorpusError
from bookft.train import corpus_pin
from bookft.train.config import load_run_config
from bookft.train.trainer import train

BAD = {"null": "null", "empty": "{}", "list": "[1, 2]", "eleven": '{"version": "eleven"}',
       "text": "not json", "history": None}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rec")
    _ingest(tmp / "src", tmp / "c", seed=0)
    _ingest(tmp / "src2", tmp / "c", seed=1, replace=True)
    return tmp / "c"


def _run_with_checkpoint(tmp_path, corpus, pin_text):
    run = tmp_path / "run"
    (run / "checkpoints" / "2").mkdir(parents=True)
    good = {"corpus": str(corpus.resolve()), "version": 1, "version_dir": str(corpus.resolve() / "versions/0001"),
            "data_hash": json.loads((corpus / "versions/0001/manifest.json").read_text())["data_hash"],
            "history": [{"step": 0, "version": 1}]}
    if pin_text is None:  # a good record with a bad history
        pin_text = json.dumps({**good, "history": [{"step": "two", "version": 1}]})
    if pin_text != "missing":
        (run / "corpus.json").write_text(pin_text)
    return run


@pytest.mark.parametrize("shape", [*BAD, "missing"])
def test_bad_or_missing_record_is_refused_then_chosen(corpus, tmp_path, shape):
    run = _run_with_checkpoint(tmp_path, corpus, BAD.get(shape, "missing"))
    before = (run / "corpus.json").read_text() if shape != "missing" else None
    with pytest.raises(CorpusError) as e:
        corpus_pin.choose(run, corpus)
    msg = str(e.value)
    assert str(run / "corpus.json") in msg and "--corpus-version N" in msg and "--corpus-version latest" in msg
    assert "Traceback" not in msg
    pin = corpus_pin.choose(run, corpus, "1")
    assert pin.version == 1 and pin.lost and pin.marked and "a new record starts here" in pin.note
    corpus_pin.record(run, pin, 2)
    assert json.loads((run / "corpus.json").read_text())["history"] == [{"step": 2, "version": 1}]
    if before is not None:  # the unreadable record is kept, not overwritten
        assert (run / "corpus.json.unreadable").read_text() == before


def test_record_history_only_grows(corpus, tmp_path):
    run = _run_with_checkpoint(tmp_path, corpus, "missing")
    pin = corpus_pin.choose(run, corpus, "1")
    corpus_pin.record(run, pin, 2)
    pin = corpus_pin.choose(run, corpus)  # a resume: same version, history kept
    corpus_pin.record(run, pin, 4)
    pin = corpus_pin.choose(run, corpus, "latest")
    corpus_pin.record(run, pin, 6)
    pin = corpus_pin.choose(run, corpus)
    corpus_pin.record(run, pin, 8)
    assert json.loads((run / "corpus.json").read_text())["history"] == [
        {"step": 2, "version": 1}, {"step": 6, "version": 2}]


def test_no_such_version_creates_nothing(corpus, tmp_path):
    cfg = load_run_config(_config(tmp_path, corpus))
    run = tmp_path / "runs" / "fresh"
    with pytest.raises(CorpusError, match=r"no version 99 exists \(asked for with --corpus-version; versions "
                                          r"there: 1, 2\)"):
        train(cfg, run_dir=run, corpus_version="99")
    assert not (tmp_path / "runs").exists()


def test_deleted_record_refused_then_resumed_with_the_choice_marked(corpus, tmp_path):
    """End to end: a real run stopped at step 2, its corpus.json deleted."""
    cfg = load_run_config(_config(tmp_path, corpus, "train: {steps: 4, loss_chunk: 32}\ncheckpoint: {every: 2}"))
    run = tmp_path / "run"
    first = train(cfg, run_dir=run, corpus_version="1", hooks=[StopAt(2)])
    assert first.interrupted and first.step == 2
    (run / "corpus.json").unlink()
    with pytest.raises(CorpusError, match=r"corpus.json: missing, but .* has checkpoints.*--corpus-version N"):
        train(cfg, run_dir=run)
    lines = []
    res = train(cfg, run_dir=run, corpus_version="1", announce=lines.append)
    assert res.step == 4 and any("corpus.json: missing: a new record starts here, on version 1" in x for x in lines)
    rows = {r["step"]: r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())}
    assert rows[3]["corpus_version"] == 1 and rows[3]["corpus_version_from"] is None
    assert json.loads((run / "corpus.json").read_text())["history"] == [{"step": 2, "version": 1}]


def test_an_incomplete_version_is_never_pinned(corpus, tmp_path):
    broken = tmp_path / "c"
    shutil.copytree(corpus, broken, symlinks=True)
    (broken / "versions" / "0002" / "tokenizer" / "tokenizer.json").unlink()
    with pytest.raises(CorpusError, match=r"incomplete corpus version \(tokenizer/tokenizer.json: missing\)"):
        corpus_pin.choose(tmp_path / "run", broken)
    assert corpus_pin.choose(tmp_path / "run", broken, "1").version == 1


def test_a_torn_metrics_line_does_not_stop_a_resume(tmp_path):
    """A kill -9 can leave half a line at the end of metrics.jsonl: the resume drops it (and later rows)."""
    from bookft.train.metrics import MetricsLog

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 7.4}\n{"step": 2, "loss": 7.3}\n{"step": 3, "lo')
    MetricsLog(tmp_path, enabled=False).truncate_after(2)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1, "loss": 7.4}\n{"step": 2, "loss": 7.3}\n'
