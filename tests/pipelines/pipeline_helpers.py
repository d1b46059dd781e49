"""Shared helpers for tests/pipelines: tiny text sources and pipeline YAMLs (fast: vocab 320, seq_len 128)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

WORDS = "river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor".split()
REPO = Path(__file__).resolve().parents[2]


def text(seed: int, n_par: int = 12) -> str:
    rng = np.random.default_rng(seed)
    return "\n\n".join(" ".join(rng.choice(WORDS, size=rng.integers(5, 30))).capitalize() + "."
                       for _ in range(n_par))


def make_sources(folder: Path, seeds=range(4)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        (folder / f"doc{s}.txt").write_text(text(s))
    return folder


def write_pipeline(tmp: Path, src: Path, name: str = "demo", **over) -> Path:
    cfg = {"name": name, "schedule": "17 3 * * *", "sources": [{"path": str(src)}], "out": str(tmp / "corpus"),
           "tokenizer": {"vocab_size": 320}, "seq_len": 128, "workers": 0, "retention": 3}
    cfg.update(over)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def current(corpus: Path) -> str:
    return os.readlink(corpus / "current")


def manifest(corpus: Path) -> dict:
    return json.loads((corpus / "current" / "manifest.json").read_text())


def run_subprocess(path: Path, crash_at: str | None = None, wait: bool = False) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "BOOKFT_TEST_CRASH_AT"}
    if crash_at:
        env["BOOKFT_TEST_CRASH_AT"] = crash_at
    code = ("import sys; from bookft.pipelines.runner import run_pipeline; "
            f"sys.exit(run_pipeline(sys.argv[1], wait={wait})[0])")
    return subprocess.Popen([sys.executable, "-c", code, str(path)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
