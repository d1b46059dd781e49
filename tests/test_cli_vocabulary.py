"""One vocabulary across commands (issue 19): `--corpus` is a corpus directory; a definition YAML is
`--definition`; `bookft eval niah` without a subject finds the run `bookft train` wrote; `bookft plan`
plans the preset's own length; libtpu stays quiet on a host without TPU chips."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bookft.cli import app
from bookft.hostenv import quiet_libtpu_on_cpu_host

ROOT = Path(__file__).resolve().parents[1]


def test_ingest_corpus_is_the_directory_and_definition_the_yaml(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The river carried old letters past the mill. " * 40)
    spec = tmp_path / "def.yaml"
    spec.write_text(f"name: d\nout: {tmp_path / 'from-yaml'}\npacking: {{seq_len: 64}}\n"
                    "tokenizer: {vocab_size: 300}\nworkers: 0\n"
                    f"sources: [{{path: {src}}}]\n")
    res = CliRunner().invoke(app, ["ingest", "--definition", str(spec), "--corpus", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "c" / "current" / "manifest.json").is_file() and not (tmp_path / "from-yaml").exists()


def test_eval_without_a_subject_finds_the_default_run(tmp_path, monkeypatch):
    from bookft.commands.eval import default_run
    from bookft.train.config import load_run_config

    monkeypatch.chdir(tmp_path)
    assert default_run(None) is None
    res = CliRunner().invoke(app, ["eval", "niah"])
    assert res.exit_code != 0 and "runs/<config name> does not exist" in str(res.exception)
    (tmp_path / "runs" / "tiny-cpu").mkdir(parents=True)
    assert default_run(None) == Path("runs/tiny-cpu")
    cfg = tmp_path / "other.yaml"
    cfg.write_text("name: other\n")
    assert default_run(load_run_config(cfg)) is None


def test_plan_reads_the_presets_length():
    pytest.importorskip("libtpu")
    res = CliRunner().invoke(app, ["plan", "-c", str(ROOT / "configs/llama-3.1-8b-v5p-4m.yaml"), "-t", "v5p-128",
                                   "--remat", "offload", "--json"])  # refused analytically: no compile
    out = json.loads(res.stdout[res.stdout.index("{"):])
    assert out["seq_len"] == 4_194_304, out


def test_libtpu_placeholders_only_without_tpu_chips(monkeypatch):
    import bookft.hostenv as hostenv

    monkeypatch.setattr(hostenv, "has_tpu_devices", lambda: False)
    env = {}
    assert quiet_libtpu_on_cpu_host(env)
    assert env == {"TPU_ACCELERATOR_TYPE": "v5p-8", "TPU_WORKER_HOSTNAMES": "localhost"}
    mine = {"TPU_ACCELERATOR_TYPE": "v6e-4"}
    assert not quiet_libtpu_on_cpu_host(mine) and mine == {"TPU_ACCELERATOR_TYPE": "v6e-4"}
    monkeypatch.setattr(hostenv, "has_tpu_devices", lambda: True)
    env = {}
    assert not quiet_libtpu_on_cpu_host(env) and env == {}


def test_no_libtpu_noise_on_this_host():
    """A fresh process that loads libtpu (a topology for AOT) prints none of its start-up errors."""
    pytest.importorskip("libtpu")
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("TPU_")}
    env["PYTHONPATH"] = str(ROOT)
    code = ("import bookft, jax; from jax.experimental import topologies; jax.devices(); "
            "topologies.get_topology_desc(platform='tpu', topology_name='v5p:2x2x1', chip_config_name='megacore', "
            "chips_per_host_bounds=(2, 2, 1), num_slices=1)")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    if not __import__("bookft.hostenv").hostenv.has_tpu_devices():
        assert "could not determine TPU" not in res.stderr and "INVALID_ARGUMENT" not in res.stderr, res.stderr
