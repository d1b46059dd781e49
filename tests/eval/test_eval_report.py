"""Reports: results.json parses, heatmap.png is a PNG, report.html embeds and links it; compare; CLI."""

from __future__ import annotations

import base64
import json
import re

import pytest
from eval_helpers import OracleModel, byte_bpe, random_logits_fn
from rich.console import Console
from typer.testing import CliRunner

from bookft.cli import app
from bookft.eval import EvalConfig, compare_reports, load_results, print_summary, run_niah, write_report
from bookft.needles.tokenizer import ModelTokenizer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    tok = ModelTokenizer.load(byte_bpe())
    cfg = EvalConfig(lengths=(300, 600), depths=(0, 50, 100), seeds=(0,))
    good = run_niah(None, tok, cfg, logits_fn=OracleModel(tok, tok.vocab_size).logits_fn, progress=False)
    bad = run_niah(None, tok, cfg, logits_fn=random_logits_fn(tok.vocab_size), progress=False)
    root = tmp_path_factory.mktemp("reports")
    write_report(bad, root / "base")
    write_report(good, root / "tuned")
    return root, good, bad


def test_report_files_exist_parse_and_link(two_runs):
    root, good, _ = two_runs
    out = root / "tuned"
    data = json.loads((out / "results.json").read_text())
    assert data == json.loads(json.dumps(good))
    assert len(data["cells"]) == 6
    cell = data["cells"][0]
    for key in ("length", "depth", "actual_depth", "actual_depths", "actual_lengths", "seeds", "scores"):
        assert key in cell
    assert data["tokenizer"]["fingerprint"] and data["settings"]["lengths"] == [300, 600]
    png = (out / "heatmap.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and (out / "depth_curve.png").read_bytes().startswith(PNG_MAGIC)
    page = (out / "report.html").read_text()
    uris = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert base64.b64decode(uris[0]) == png  # the embedded heatmap is the file, byte for byte
    for href in re.findall(r'href="([^"]+)"', page):
        assert (out / href).is_file()
    assert "heatmap.png" in re.findall(r'href="([^"]+)"', page)
    assert "effective length" in page and "Per length" in page and "Lost in the middle" in page
    assert load_results(out)["summary"]["mean"] == 1.0


def test_summary_table_and_compare(two_runs):
    root, good, bad = two_runs
    console = Console(record=True, width=120)
    print_summary(good, console)
    text = console.export_text()
    assert "1.00" in text and "mean" in text and "50%" in text
    paths = compare_reports(root / "base", root / "tuned", root / "cmp", names=("base", "tuned"))
    assert paths["png"].read_bytes().startswith(PNG_MAGIC)
    page = paths["html"].read_text()
    assert base64.b64decode(re.findall(r"base64,([A-Za-z0-9+/=]+)", page)[0]) == paths["png"].read_bytes()
    assert "+1.000" in page or "+0.9" in page  # tuned minus base


def test_cli_compare_and_errors(two_runs, tmp_path):
    root, _, _ = two_runs
    runner = CliRunner()
    r = runner.invoke(app, ["eval", "compare", str(root / "base"), str(root / "tuned"), "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "compare.html").is_file()
    r = runner.invoke(app, ["eval", "compare", str(tmp_path / "nope"), str(root / "tuned")])
    assert r.exit_code != 0 and "no results.json" in str(r.exception)
    r = runner.invoke(app, ["eval", "niah", "--model", "a", "--checkpoint", "b"])
    assert r.exit_code != 0 and "exactly one of" in str(r.exception)


def test_progress_bar_counts_cells_and_tokens_per_second():
    import io

    tok = ModelTokenizer.load(byte_bpe())
    console = Console(record=True, file=io.StringIO(), force_terminal=True, width=120)
    res = run_niah(None, tok, EvalConfig(lengths=(300, 600), depths=(0, 100), seeds=(0,)),
                   logits_fn=OracleModel(tok, tok.vocab_size).logits_fn, console=console, progress=True)
    text = console.export_text()
    assert "niah length 600" in text  # the bar names the length in progress
    final = re.findall(r"(\d)/4 cells\s+([\d,]+) tok/s", text)[-1]  # the last refresh: every cell done
    assert final[0] == "4" and int(final[1].replace(",", "")) > 0
    assert res["timing"]["tokens"] == sum(sum(c["actual_lengths"]) for c in res["cells"])


def test_flow_headline_keeps_dev_rows_apart_from_test():
    from bookft.flows.tune_report import headline_rich

    row = lambda m, split, score: {"task": "multikey", "model": m, "scoring": "strict", "split": split,  # noqa: E731
                                   "draws": 50 if split == "test" else 40, "score": score, "ci": [0.0, 1.0]}
    rows = [row("base", "test", 0.3), row("tuned", "test", 0.8), row("tuned", "dev", 0.75)]
    console = Console(record=True, width=200)
    console.print(headline_rich(rows, ["base", "tuned"]))
    lines = [ln for ln in console.export_text().splitlines() if "multikey" in ln]
    assert len(lines) == 2
    assert "test" in lines[0] and "0.30" in lines[0] and "0.80" in lines[0] and "(50)" in lines[0]
    assert "dev" in lines[1] and "0.75" in lines[1] and "(40)" in lines[1] and "0.30" not in lines[1]
