"""`bookft plan`: topology names, AOT compile of the tiny preset for v5p:2x2x1, fit answers, JSON keys."""

import json

import pytest
from typer.testing import CliRunner

from bookft.attention.kernel_splash import splash_available
from bookft.errors import PlanError
from bookft.plan.topology import parse_topology
from bookft.train.config import load_run_config


def test_topology_names():
    t = parse_topology("v5p-128")
    assert (t.libtpu_name, t.chips, t.n_devices) == ("v5p:4x4x4", 64, 64)
    assert parse_topology("v5p:4x4x4").user_name == "v5p-128"
    assert parse_topology("v5e-8").libtpu_name == "v5e:2x4"
    assert parse_topology("v6e:2x2").n_devices == 4
    assert parse_topology("v5p-1024").libtpu_name == "v5p:8x8x8"
    assert parse_topology("ironwood:2x2x1").n_devices == 8  # two devices per Ironwood chip
    for bad, msg in [("v9-8", "unknown TPU generation"), ("v5p-7", "counts TensorCores"), ("v5p:4x4", "3-D"),
                     ("tpu", "expected GEN"), ("v5p-6", "no standard v5p slice")]:
        with pytest.raises(PlanError, match=msg):
            parse_topology(bad)


@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("libtpu")
    if not splash_available():
        pytest.skip("plan compiles Tokamax's splash kernel: Python >= 3.12 with bookft[tpu]")
    return load_run_config("configs/tiny-cpu.yaml", ["model.num_layers=1", "data.batch_size=1"])


@pytest.fixture(scope="module")
def v5p8(tiny):
    from bookft.plan.topology import topology_devices

    topo = parse_topology("v5p:2x2x1")
    return topo, topology_devices(topo)


def test_tiny_fits_and_more_context_shards_use_less_memory(tiny, v5p8):
    import dataclasses

    from bookft.plan.build import plan_one

    topo, devices = v5p8
    peaks = {}
    for cp in (2, 4):  # one 8K-token sequence over cp chips
        cfg = dataclasses.replace(tiny, parallel=dataclasses.replace(
            tiny.parallel, mesh={"data": 1, "fsdp": 1, "context": cp}))
        r = plan_one(cfg, topo, devices[:cp], seq_len=8192, strategy="ring", remat="full")
        assert r.fits and r.error is None and r.splash_in_hlo
        assert 0 < r.peak_bytes < topo.hbm_per_device
        assert r.model_flops_per_step > 0 and r.step_time_s > 0
        peaks[cp] = r.peak_bytes
    assert peaks[4] < peaks[2]


def test_absurd_length_does_not_fit_with_figure_and_json_keys(tiny, v5p8):
    from bookft.cli import app

    res = CliRunner().invoke(app, ["plan", "-t", "v5p-8", "--seq-len", str(2**34), "--json",
                                   "--set", "model.num_layers=1"])
    out = json.loads(res.stdout[res.stdout.index("{"):])
    for key in ("topology", "topology_user_name", "n_devices", "seq_len", "chip", "results", "best",
                "assumptions", "measured"):
        assert key in out
    r = out["results"][0]
    for key in ("strategy", "remat", "mesh", "fits", "peak_gib", "capacity_gib", "params_gib", "opt_state_gib",
                "temp_gib", "model_flops_per_step", "step_time_s", "error", "overrides"):
        assert key in r
    assert out["best"] is None and r["fits"] is False
    assert "does not fit: at least" in r["error"] and "GiB per chip" in r["error"]


def test_offloaded_layer_inputs_beyond_host_memory_refused_without_compiling():
    from bookft.plan.planner import plan_fast

    cfg = load_run_config("configs/llama-3.1-8b-v5p-1m.yaml")
    topo = parse_topology("v5p-128")
    # 32 layers x 32M tokens / 64 chips x 4096 x bf16 = 128 GiB of layer inputs per chip
    r = plan_fast(cfg, topo, None, seq_len=2**25, strategy="ring", remat="offload_input")
    assert not r.fits and "128 GiB of host memory per chip" in r.error and "not compiled" in r.error


def test_max_seq_len_search_uses_known_lengths_and_compiles_only_new_ones():
    from bookft.plan.build import PlanResult
    from bookft.plan.planner import max_seq_len

    cfg = load_run_config("configs/llama-3.1-8b-v5p-1m.yaml")
    topo = parse_topology("v5p-128")
    limit = 27 * 2**20  # pretend everything up to 27M tokens fits
    compiled = []

    def evaluate(n):
        compiled.append(n)
        return PlanResult(strategy="ring", remat="offload_input", seq_len=n, topology=topo.libtpu_name, n_devices=64,
                          mesh={}, fits=n <= limit, capacity_bytes=topo.hbm_per_device)

    best, tried = max_seq_len(cfg, topo, strategy="ring", remat="offload_input", start=2**24, devices=[None] * 64,
                              known={2**24: True}, evaluate=evaluate)
    # 16M known; 32M, 24M, 28M, 26M tried (bisection stops at 1/8 of 16M = 2M, unit 2 x 64 x 512)
    assert compiled == [2**25, 24 * 2**20, 28 * 2**20, 26 * 2**20]
    assert best == 26 * 2**20 and [t.seq_len for t in tried] == compiled


def test_max_seq_len_treats_vmem_overflow_as_too_long_and_other_inapplicable_as_the_end():
    from bookft.plan.build import PlanResult
    from bookft.plan.planner import max_seq_len

    cfg = load_run_config("configs/llama-3.1-8b-v5p-1m.yaml")
    topo = parse_topology("v5p-128")

    def evaluate(error):
        def run(n):
            fits = n <= 10 * 2**20
            return PlanResult(strategy="usp", remat="offload_input", seq_len=n, topology=topo.libtpu_name,
                              n_devices=64, mesh={}, fits=fits, capacity_bytes=topo.hbm_per_device,
                              error=None if fits else error)
        return run

    vmem = "not applicable: the attention kernel's blocks do not fit the chip's VMEM (E1001)"
    best, tried = max_seq_len(cfg, topo, strategy="usp", remat="offload_input", start=2**23, devices=[None] * 64,
                              evaluate=evaluate(vmem))
    # 8M fits, 16M overflows VMEM (too long), then 12M (too long), 10M fits, 11M too long: stop at 1M steps
    assert best == 10 * 2**20 and [t.seq_len for t in tried] == [2**23, 2**24, 12 * 2**20, 10 * 2**20, 11 * 2**20]
    never = "not applicable: XLA:TPU cannot compile this combination (UNIMPLEMENTED)"
    best, tried = max_seq_len(cfg, topo, strategy="usp", remat="offload", start=2**23, devices=[None] * 64,
                              evaluate=evaluate(never))
    assert best is None and [t.seq_len for t in tried] == [2**23, 2**24]


def test_compiler_errors_become_readable_answers():
    from bookft.plan.build import _oom

    unimpl = _oom("UNIMPLEMENTED: Async slice only supports slicing in 1 dimension\n  at ...")
    assert unimpl.startswith("not applicable: XLA:TPU cannot compile") and "Async slice" in unimpl
    assert _oom("RESOURCE_EXHAUSTED: Used 120.5G of 95.7G hbm").startswith("does not fit: the compiler needs 120.5GB")
    temps = _oom("RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries "
                 "(124.63G) exceeds available HBM (95.74G).")
    assert temps == "does not fit: the compiler needs 124.63GB of temporaries per chip, 95.74GB of HBM available"
    assert _oom("INTERNAL: something else") is None  # a real failure is raised, not hidden


@pytest.mark.parametrize("name", ["v6e:2x2", "v7:2x2x1"])
def test_tiny_compiles_for_newer_generations(tiny, name):
    """v6e (Trillium) and v7x (Ironwood) where the installed libtpu knows them (0.0.51 knows both)."""
    from bookft.plan.build import plan_one
    from bookft.plan.topology import topology_devices

    topo = parse_topology(name)
    try:
        devices = topology_devices(topo)
    except PlanError as e:
        pytest.skip(f"this libtpu does not know {name}: {e}")
    import dataclasses

    cfg = dataclasses.replace(tiny, parallel=dataclasses.replace(tiny.parallel, mesh={"data": 1, "fsdp": 1,
                                                                                      "context": 2}))
    r = plan_one(cfg, topo, devices[:2], seq_len=8192, strategy="ring", remat="full")
    assert r.fits and r.error is None and r.splash_in_hlo, r.error
    assert 0 < r.peak_bytes < topo.hbm_per_device
