"""`bookft quickstart` reads like README and fails early: `--docs A B C` takes several paths, a missing
path is named, and the model, its tokenizer, the held-out text and every document are checked before
anything is ingested (bookft/commands/quickstart.py, bookft/flows/inputs.py)."""

import json

import pytest
from typer.testing import CliRunner

from bookft.cli import app
from bookft.commands.quickstart import spread


def test_spread_gives_each_path_its_flag():
    args = ["--model", "m", "--docs", "a", "b", "c", "--heldout", "h1", "h2", "--out", "o", "--docs", "d"]
    assert spread(args) == ["--model", "m", "--docs", "a", "--docs", "b", "--docs", "c", "--heldout", "h1",
                            "--heldout", "h2", "--out", "o", "--docs", "d"]
    assert spread(["--docs", "a", "--", "b"]) == ["--docs", "a", "--", "b"]
    assert spread(["--out", "o", "x"]) == ["--out", "o", "x"]  # only --docs and --heldout take several


@pytest.fixture
def model_dir(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
    Tokenizer(WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]")).save(str(d / "tokenizer.json"))
    return d


def _texts(tmp_path, n: int, chars: int = 9000) -> list:
    out = []
    for i in range(n):
        out.append(tmp_path / f"book{i}.txt")
        out[-1].write_text(("word " * (chars // 5 + 1))[:chars])
    return out


def _run(*args):
    return CliRunner().invoke(app, ["quickstart", *map(str, args)])


def test_docs_take_several_paths_as_readme_writes_them(tmp_path, model_dir, monkeypatch):
    import bookft.flows.tune as tune

    got = {}
    monkeypatch.setattr(tune, "run_tune_flow", lambda model, docs, heldout, out, **kw: got.update(
        docs=docs, heldout=heldout) or {})
    a, b, c = _texts(tmp_path, 3)
    res = _run("--model", model_dir, "--docs", a, b, c, "--out", tmp_path / "out")
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert got == {"docs": [a, b], "heldout": [c]}  # the last --docs file held out
    res = _run("--model", model_dir, "--docs", a, "--docs", b, "--heldout", c, "--out", tmp_path / "out")
    assert res.exit_code == 0 and got == {"docs": [a, b], "heldout": [c]}


def _fails(res, *words):
    text = res.output + str(res.exception)
    assert res.exit_code != 0 and all(w in text for w in words), text


def test_bad_inputs_fail_before_anything_is_ingested(tmp_path, model_dir):
    a, b, held = _texts(tmp_path, 3)
    out = tmp_path / "out"
    _fails(_run("--model", model_dir, "--docs", a, tmp_path / "missing.txt", "--out", out), "missing.txt")
    _fails(_run("--model", tmp_path / "nowhere", "--docs", a, b, "--out", out), "nowhere", "does not exist")
    (model_dir / "tokenizer.json").write_text("{not json")
    _fails(_run("--model", model_dir, "--docs", a, b, "--out", out), "tokenizer")
    (model_dir / "tokenizer.json").unlink()
    _fails(_run("--model", model_dir, "--docs", a, b, "--out", out), "tokenizer")
    assert not out.exists()


def test_the_held_out_text_is_checked_first(tmp_path, model_dir):
    a, b = _texts(tmp_path, 2)
    out = tmp_path / "out"
    short = tmp_path / "short.txt"
    short.write_text("word " * 400)
    _fails(_run("--model", model_dir, "--docs", a, b, "--heldout", short, "--out", out), str(short), "2,000 characters",
           "8,000")
    pdf = tmp_path / "held.pdf"
    pdf.write_bytes(b"%PDF-1.4\0" + b"x" * 9000)
    _fails(_run("--model", model_dir, "--docs", a, b, "--heldout", pdf, "--out", out), "held.pdf", "plain-text")
    _fails(_run("--model", model_dir, "--docs", a, b, "--heldout", tmp_path, "--out", out), "folder")
    # the short documents and the held-out texts of other kinds, checked as early
    _fails(_run("--model", model_dir, "--docs", a, "--heldout", b, "--short", tmp_path / "nope", "--out", out),
           "--short", "nope")
    _fails(_run("--model", model_dir, "--docs", a, "--heldout", b, "--heldout-other", pdf, "--out", out),
           "--heldout-other", "held.pdf", "plain-text")
    tiny = tmp_path / "tiny.py"
    tiny.write_text("x = 1\n")
    _fails(_run("--model", model_dir, "--docs", a, "--heldout", b, "--heldout-other", tiny, "--out", out),
           "--heldout-other", "tiny.py", "2,000")
    assert not out.exists()


def test_tune_flags_need_a_model_and_help_names_the_defaults():
    from bookft.commands.quickstart import DEFAULT_CONFIG, DEFAULT_PRESET
    from bookft.flows.tune_settings import DEFAULT_PRESET as preset
    from bookft.train.config import DEFAULT_CONFIG as default

    _fails(_run("--docs", "a.txt"), "--docs", "only with --model")
    assert (DEFAULT_CONFIG, DEFAULT_PRESET) == (str(default), str(preset))
    res = CliRunner().invoke(app, ["quickstart", "--help"], terminal_width=200)
    help_text = " ".join(res.output.split())
    assert DEFAULT_CONFIG in help_text and DEFAULT_PRESET in help_text, help_text
