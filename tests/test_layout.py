"""The code base stays easy to read: small modules, short functions, and the product carries results,
not history (what was tried lives in docs/log.md). Import cycles are import-linter's acyclic_siblings
contract (pyproject.toml, checked by tests/test_layers.py)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80
HISTORY = re.compile(r"\b(session|issue)s? \d+", re.IGNORECASE)


def _modules():
    return sorted((ROOT / "bookft").rglob("*.py"))


def test_modules_and_functions_are_small():
    big, long = [], []
    for path in _modules():
        src = path.read_text()
        name = path.relative_to(ROOT)
        if src.count("\n") > MAX_MODULE_LINES:
            big.append(f"{name}: {src.count(chr(10))} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{name}:{node.lineno} {node.name}: {n} lines")
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_history_in_the_product():
    files = [*_modules(), ROOT / "README.md", *(ROOT / "configs").rglob("*.yaml"), *(ROOT / "corpora").rglob("*.yaml")]
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in files
            for i, line in enumerate(p.read_text().splitlines(), 1) if HISTORY.search(line)]
    assert not hits, "history belongs in docs/log.md:\n" + "\n".join(hits[:30])


def test_the_check_can_fail(tmp_path):
    """The history pattern catches what it should and not ordinary prose."""
    assert HISTORY.search("as measured in session 12") and HISTORY.search("(issue 9)")
    assert not HISTORY.search("the issue is that 3 sessions") and not HISTORY.search("a session's time")


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines"
    wide = [i for i, line in enumerate(lines, 1) if len(line) > 100]
    assert not wide, f"README.md lines over 100 characters: {wide}"
    toc = "\n".join(lines[:60]).lower()
    assert all(k in toc for k in ("my pdfs", "my model", "my pod"))
