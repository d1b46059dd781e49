"""Test setup: 8 simulated CPU devices, set before jax is imported anywhere."""

import os

# Optimisation level 0 about halves XLA's CPU compile time, which dominates this suite; numerics
# are unchanged up to float rounding (every comparison here has a tolerance or compares two runs
# made with the same flags).
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import numpy as np  # noqa: E402  (after the environment above)
import pytest  # noqa: E402

WORDS = ("the river carried old letters past the mill while the clerk counted seven barrels of salt "
         "and a quiet voice read the law of the harbour aloud to nobody in particular").split()


@pytest.fixture(scope="session")
def words_corpus(tmp_path_factory):
    """A small corpus shared read-only by the train tests: 6 text documents of random words, packed
    at 128 tokens with a 300-token BPE (40 sequences)."""
    from typer.testing import CliRunner

    from bookft.cli import app

    root = tmp_path_factory.mktemp("words_corpus")
    src = root / "src"
    src.mkdir()
    rng = np.random.default_rng(0)
    for i in range(6):
        paras = ["\n".join(" ".join(rng.choice(WORDS, 12)) for _ in range(4)) for _ in range(6)]
        (src / f"doc{i}.txt").write_text("\n\n".join(paras) + "\n")
    out = root / "corpus"
    res = CliRunner().invoke(app, ["ingest", str(src), "--out", str(out), "--seq-len", "128",
                                   "--vocab-size", "300", "--workers", "0"])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def ray_instance():
    """A local Ray instance of 2 CPUs per test module (the Ray engine uses an instance already started
    in the process); skips when the `ray` extra is not installed."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()
