"""Every figure in README's "Measured figures" table is the figure of a committed benchmark result.

FIGURES maps each table row (its first cell) to the numbers of its figure cell, in order, each with
the JSON file under benchmarks/results/ that holds it and how to read it there. A number is equal
when the JSON's value, rounded half-up to the digits the README prints, reads the same. A row or a
number the table gains without an entry here fails, as does a figure that no longer matches its
JSON, or a row whose link points at another file than the one its figures come from.
"""

import json
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")

E2E = "e2e_tiny-cpu_cpu2_2026-12-02.json"
MAXTEXT = "maxtext_compare_llama-3.1-8b-ring-cp64_v5p-128-aot_2026-12-06_3.json"  # peaks and longest search
ATTENTION = "attention_default_cpu2_2026-12-01.json"
FLOW0 = "real_flow_full-v5-seed0_cpu2_2026-12-08.json"  # the transfer protocol, training seed 0
FLOW1 = "real_flow_full-v5-seed1_cpu2_2026-12-07.json"  # the same recipe, training seed 1
PDF_BOOK = "pdf_book_1000-pages_cpu2_2026-12-02.json"
INGEST = "ingest_700m-chars_cpu2_2026-11-30.json"
PIPELINE = "pipeline_10000-files_cpu2_2026-11-30.json"
MODEL = "model_1b-float32_cpu2_2026-11-30.json"
SOURCES = "sources_200-chapters_cpu2_2026-12-01.json"


def _bookft(d: dict, key: str):
    """bookft's entry of the MaxText comparison (ring, CP 64, offload of layer inputs, v5p-128)."""
    entry = d["tools"]["bookft"]
    assert (entry["settings"]["strategy"], entry["settings"]["cp"]) == ("ring", 64)
    return entry[key]


def _balance(d: dict) -> float:
    return next(r["arranged_max_over_mean"] for r in d["balance"]["results"]
                if r["cp"] == 64 and r["block"] == 512 and r["corpus"].startswith("books 50K-500K (log-uniform)"))


def _flow(task: str, who: str, seed: int = 0):
    """The strict score at 4,096 tokens on the test split, from the headline rows of the flow whose
    training seed is `seed`."""
    def get(d: dict) -> float:
        (row,) = [r for r in d["headline"]
                  if (r["task"], r["model"], r["scoring"], r["split"]) == (task, who, "strict", "test")]
        assert row["length"] == 4096 and d["train_seed"] == seed
        return row["score"]
    return get


# row -> [(the number as README prints it, JSON file, value in the JSON)]
FIGURES = {
    "default loop, 5 draws, every cell >= 0.9 at 1K and 2K": [
        ("5", E2E, lambda d: d["draws_meeting_target"]), ("5", E2E, lambda d: len(d["draws"])),
        ("921", E2E, lambda d: min(x["wall_s"] for x in d["draws"])),
        ("1,147", E2E, lambda d: max(x["wall_s"] for x in d["draws"]))],
    "8B, 1M / 4M, v5p-128, ring, offload_input": [
        ("4.45", MAXTEXT, lambda d: _bookft(d, "peak_gib")["1M"]),
        ("9.84", MAXTEXT, lambda d: _bookft(d, "peak_gib")["4M"]),
        ("0.68", MAXTEXT, lambda d: d["ratios"]["peak_1M"]), ("0.51", MAXTEXT, lambda d: d["ratios"]["peak_4M"])],
    "longest 8B sequence on v5p-128, ring": [("32,505,856", MAXTEXT, lambda d: _bookft(d, "longest"))],
    "packed books under zig-zag, cp 64, busiest device / mean": [("1.003", ATTENTION, _balance)],
    "SmolLM2-135M, 11 books, 4K test, seed 0: multikey base/few-shot/tuned": [
        (x, FLOW0, _flow("multikey", who)) for x, who in (("0.30", "base"), ("0.34", "fewshot"), ("0.70", "tuned"))],
    "same, vartrack; untrained niah_fact, uuid keys": [
        (x, FLOW0, _flow(task, who)) for task, xs in (("vartrack", ("0", "0", "0")),
                                                      ("niah_fact", ("0.05", "0.30", "0.80")),
                                                      ("multikey_uuid", ("0", "0.05", "0.35")))
        for x, who in zip(xs, ("base", "fewshot", "tuned"), strict=True)],
    "training seed 1, tuned: multikey, vartrack, niah_fact, uuid": [
        (x, FLOW1, _flow(task, "tuned", seed=1))
        for x, task in zip(("0.70", "0.08", "0.95", "0.35"), ("multikey", "vartrack", "niah_fact", "multikey_uuid"),
                           strict=True)],
    "1,000-page PDF, `bookft ingest` vs a bare pdfium loop": [
        ("0.66", PDF_BOOK, lambda d: d["ratio_per_round_median"]["split"])],
    "ingest of 750M characters, PDF pages/s, peak RSS": [
        ("55", INGEST, lambda d: d["pdf_pages_per_s"]), ("741", INGEST, lambda d: d["peak_rss_mib"])],
    "refresh after 1% of 10,000 files change": [
        ("13.6", PIPELINE, lambda d: 100 * d["seconds"]["refresh"] / d["seconds"]["full"])],
    "load a 1B-shape checkpoint, peak RSS": [
        ("1.10", MODEL, lambda d: d["peak_rss_bytes"] / d["checkpoint_bytes"])],
    "secret scan of code": [("16,292", SOURCES, lambda d: d["secrets"]["fast_lines_per_s"])],
}

# settings the rows name, where the JSON states them
SETTINGS = [
    ("SmolLM2-135M, 11 books", "11", FLOW0, lambda d: len(d["documents"])),
    ("1,000-page PDF", "1,000", PDF_BOOK, lambda d: d["pages"]),
    ("ingest of 750M characters", "750", INGEST, lambda d: d["chars"] / 1e6),
    ("1% of 10,000 files", "10,000", PIPELINE, lambda d: d["files"]),
]


def _readme_rows() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Measured figures", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 2 and cells[0] not in ("what", "---"):
            rows[cells[0]] = cells[1]
    return rows


def _links() -> dict[str, str]:
    return dict(re.findall(r"^\[(\w+)\]: (\S+)$", (ROOT / "README.md").read_text(), re.MULTILINE))


def _reads(value: float, printed: str) -> bool:
    digits = len(printed.split(".")[1]) if "." in printed else 0
    q = Decimal(str(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return (f"{q:,}" if "," in printed else f"{q}") == printed


def _load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def test_every_row_is_mapped():
    rows = _readme_rows()
    assert rows, "README has no Measured figures table"
    assert set(rows) == set(FIGURES), (f"rows without a mapping: {sorted(set(rows) - set(FIGURES))}; "
                                       f"mappings without a row: {sorted(set(FIGURES) - set(rows))}")


@pytest.mark.parametrize("row", sorted(FIGURES))
def test_row_figures_equal_their_json(row):
    cell = _readme_rows()[row]
    figure_text = re.sub(r"\]\[\w+\]", "]", cell)  # drop the link label, keep the figures
    printed = NUMBER.findall(figure_text)
    assert printed == [p for p, _, _ in FIGURES[row]], f"{row}: README prints {printed}"
    for text, name, get in FIGURES[row]:
        value = get(_load(name))
        assert _reads(value, text), f"{row}: README {text}, {name} holds {value}"
    links = _links()
    targets = {Path(links[k]).name for k in re.findall(r"\]\[(\w+)\]", cell) if links[k].endswith(".json")}
    assert targets <= {name for _, name, _ in FIGURES[row]}, f"{row}: links {targets}"


def test_row_settings_equal_their_json():
    text = "\n".join(_readme_rows())
    for phrase, printed, name, get in SETTINGS:
        assert phrase in text, phrase
        assert _reads(get(_load(name)), printed), f"{phrase}: {name} holds {get(_load(name))}"


def test_the_comparison_can_fail():
    assert _reads(0.9333, "0.93") and _reads(1146.6, "1,147") and _reads(1.0025, "1.003")
    assert not _reads(0.9667, "0.96") and not _reads(1.1048, "1.11") and not _reads(12, "11")
