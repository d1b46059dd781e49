"""docs/log.md reads newest first and each entry states its verdict, so the current decision is the
first thing a reader meets (docs/log.md's introduction)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATE = re.compile(r"^## (\d{4}-\d{2}-\d{2})$")
VERDICT = re.compile(r" — (adopted|rejected|open)\b")


def _problems(text: str) -> list[str]:
    problems, dates, in_day = [], [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            m = DATE.match(line)
            if not m:
                problems.append(f"{n}: a section that is not a date: {line}")
                continue
            if dates and m.group(1) >= dates[-1]:
                problems.append(f"{n}: {m.group(1)} after {dates[-1]}: dates go newest first, each once")
            dates.append(m.group(1))
            in_day = True
        elif line.startswith("### "):
            if not in_day:
                problems.append(f"{n}: an entry outside a dated section: {line}")
            if not VERDICT.search(line):
                problems.append(f"{n}: no verdict (— adopted / rejected / open): {line}")
    if not dates:
        problems.append("no dated sections")
    return problems


def test_log_is_newest_first_with_a_verdict_per_entry():
    problems = _problems((ROOT / "docs" / "log.md").read_text())
    assert not problems, "\n".join(problems)


def test_the_check_can_fail():
    good = "# log\n\n## 2026-12-02\n\n### B — adopted\n\n## 2026-12-01\n\n### A — rejected: by B\n"
    assert _problems(good) == []
    assert len(_problems(good.replace("2026-12-01", "2026-12-03"))) == 1
    assert len(_problems(good.replace(" — adopted", ""))) == 1
    assert len(_problems("# log\n\n### A — open\n")) == 2
