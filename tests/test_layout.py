"""The code base stays easy to read: small modules, short functions, and the product carries results,
not history (what was tried lives in docs/log.md). Import cycles are import-linter's acyclic_siblings
contract (pyproject.toml, checked by tests/test_layers.py). benchmarks/ and experiments/ keep the same
size and history rules, run as modules without sys.path edits, and import no private name
(benchmarks/README.md)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80
HISTORY = re.compile(r"\b(session|issue)s? \d+", re.IGNORECASE)


def _modules():
    return sorted((ROOT / "bookft").rglob("*.py"))


def _scripts():
    """benchmarks/ and experiments/: the scripts and their helper modules."""
    return sorted(p for d in ("benchmarks", "experiments") for p in (ROOT / d).rglob("*.py")
                  if "results" not in p.relative_to(ROOT).parts)


def test_modules_and_functions_are_small():
    big, long = [], []
    for path in [*_modules(), *_scripts()]:
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
    files = [*_modules(), ROOT / "README.md", *(ROOT / "configs").rglob("*.yaml"), *(ROOT / "corpora").rglob("*.yaml"),
             *_scripts(), *(ROOT / "benchmarks").glob("*.sh"), *(ROOT / "benchmarks").glob("*.md"),
             *(ROOT / "experiments").glob("*.md")]
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in files
            for i, line in enumerate(p.read_text().splitlines(), 1) if HISTORY.search(line)]
    assert not hits, "history belongs in docs/log.md:\n" + "\n".join(hits[:30])


def _sys_path_edits(src: str) -> list[int]:
    """Lines that touch sys.path (or set PYTHONPATH) in code, not in prose."""
    lines = []
    for node in ast.walk(ast.parse(src)):
        if (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
                and node.value.id == "sys"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and node.value == "PYTHONPATH":
            lines.append(node.lineno)
    return lines


def test_benchmarks_edit_no_sys_path():
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in _scripts() for n in _sys_path_edits(p.read_text())]
    assert not hits, f"run scripts as `python -m benchmarks.NAME` instead (benchmarks/README.md): {hits}"


def test_docs_run_benchmarks_as_modules():
    """`python benchmarks/x.py` finds neither `benchmarks` nor its helpers: every command is `-m`
    (docs/log.md keeps the commands as they were run)."""
    files = [ROOT / "README.md", *(p for p in (ROOT / "docs").glob("*.md") if p.name != "log.md"), *_scripts(),
             *(ROOT / "benchmarks").glob("*.sh"), *(ROOT / "benchmarks").glob("*.md"),
             *(ROOT / "experiments").glob("*.md"), *(ROOT / "configs").rglob("*.yaml"), *_modules()]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files for i, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"python3? (benchmarks|experiments)/\w+\.py", line)]
    assert not hits, f"write `python -m benchmarks.NAME`: {hits}"


RESULT_NAME = re.compile(r"^[a-z0-9_.-]+_[A-Za-z0-9.-]+_[a-z0-9.-]+_\d{4}-\d{2}-\d{2}(_\d+)?\.json$")
QUOTED_RESULT = re.compile(r"[a-z0-9_.-]+_[A-Za-z0-9.{},-]+_[a-z0-9.{},-]+_\d{4}-\d{2}-\d{2}(?:_\d+)?\.json")


def _expand(name: str) -> list[str]:
    """`real_flow_full-seed{0,1}_...json` -> both names."""
    m = re.search(r"\{([^}]*)\}", name)
    if not m:
        return [name]
    return [n for alt in m.group(1).split(",") for n in _expand(name[:m.start()] + alt + name[m.end():])]


def test_results_are_named_and_quoted_names_exist():
    results = ROOT / "benchmarks" / "results"
    bad = [p.name for p in results.iterdir() if not RESULT_NAME.match(p.name)]
    assert not bad, f"not <bench>_<preset>_<hardware>_<date>.json (benchmarks/README.md): {bad}"
    texts = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "configs").rglob("*.yaml"), *_modules(),
             *_scripts()]
    missing = sorted({f"{p.relative_to(ROOT)}: {n}" for p in texts for q in QUOTED_RESULT.findall(p.read_text())
                      for n in _expand(q) if not (results / n).is_file() and "<" not in n})
    assert not missing, f"quoted results that are not in benchmarks/results/: {missing}"


def test_the_script_checks_can_fail():
    assert _expand("a_b-seed{0,1}_cpu2_2026-12-06.json") == ["a_b-seed0_cpu2_2026-12-06.json",
                                                              "a_b-seed1_cpu2_2026-12-06.json"]
    assert RESULT_NAME.match("real_flow_full-seed0_cpu2_2026-12-06_2.json") and not RESULT_NAME.match("e2e.json")
    assert _sys_path_edits("import sys\nsys.path.insert(0, 'x')\n") == [2]
    assert _sys_path_edits("env = {'PYTHONPATH': '.'}\n") == [1]
    assert _sys_path_edits('"""run without editing sys.path"""\n') == []


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
