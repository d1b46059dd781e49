"""bookft beside PyTorch on one GPU: step time, tokens/s and MFU at equal model and length, and the
longest sequence each trains (the lent-GPU device script; at most ~8 minutes of device time).

    python -m benchmarks.gpu_compare                 # on the GPU machine (H100 / H200)
    python -m benchmarks.gpu_compare --size tiny     # CPU smoke run (tests/e2e/test_gpu_script.py)

Design choices:
- Both sides train the same Llama shape from random weights: SmolLM2-135M (30 layers, d 576, 9/3
  heads, vocab 49,152, tied) and a 1B Llama (Llama-3.2-1B: 16 layers, d 2048, 32/8 heads, MLP
  8192, vocab 128,256, tied), one row of S tokens per step, AdamW, float32 master weights, bf16
  compute, full rematerialisation. bookft: its train program (`build_program`, strategy local on
  the one device, attention.kernel auto, the chunked loss). PyTorch: transformers'
  LlamaForCausalLM with `attn_implementation="sdpa"` (flash attention on an H100), autocast bf16
  and gradient checkpointing.
- Each side runs in its own process (JAX preallocates GPU memory, and an OOM must not poison the
  other side's figures); the parent prints the table and writes
  benchmarks/results/gpu_compare_<size>_<hardware>_<date>.json through bookft.benchrecord.
- Timing: WARMUP steps (compile, autotune), then STEPS timed steps, each ended by a host sync.
  `--budget` (420 s) bounds the three processes together, so the run fits the 8 device minutes
  with the machine's start; a side stopped at its share keeps the figures it printed.
- MFU = model FLOPs per step / step time / bf16 dense peak of the card (H100 SXM and H200: 989
  TFLOP/s; unknown cards: no MFU). Model FLOPs per step = 6 * N * T + 6 * L * d_attn * S^2 for one
  causal row of S = T tokens (12 * L * d_attn * S^2 / 2: QK^T and PV, forward and backward, half the
  square under the causal mask), N = the parameters of every matmul (the embedding lookup
  excluded, the LM head included), d_attn = heads * head_dim. Recomputation is not counted.
- The longest sequence: at most 3 probes per side for the 1B shape, doubling from PROBE_START;
  a probe that fails (out of memory) ends the search.
- bookft's GPU kernel is xla (attention.kernel auto; docs/parallelism.md says why). A third process
  times the attention kernels alone at the 1B shape (forward + backward, causal, bf16): bookft's
  xla kernel and Tokamax's public `dot_product_attention` (mosaic, cudnn, xla_chunked), each checked
  against `jax.nn.dot_product_attention` at 2K first: the evidence for wiring a Tokamax GPU kernel.
- Wheels the GPU machine lacks (Tokamax and its dependencies; `import tokamax` needs xprof) travel
  with the working tree, 37 MiB: on this host, with the Python 3.12 venv,
  `pip download --no-deps -d wheels/gpu tokamax==0.0.17 qwix einshape jaxtyping wadler-lindig
  immutabledict tensorboardx xprof==2.24.2 pydantic pydantic-core annotated-types typing-inspection`;
  on the device, `pip install --no-deps --no-index wheels/gpu/*.whl` before the script
  (run: carry ["wheels"]; wheels/ is not tracked).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MODELS = {
    "smollm2-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_layers=30, num_heads=9,
                         num_kv_heads=3, head_dim=64, tie_embeddings=True),
    "llama-1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_layers=16, num_heads=32,
                     num_kv_heads=8, head_dim=64, tie_embeddings=True),
    "tiny": dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                 head_dim=16, tie_embeddings=True),
}
SIZES = {  # cells (model, seq), probe model, probe start, warmup, timed steps
    "full": dict(cells=[("smollm2-135m", 8192), ("smollm2-135m", 32768), ("llama-1b", 8192), ("llama-1b", 32768)],
                 probe="llama-1b", probe_start=65536, warmup=2, steps=5, kernel_seq=32768),
    "tiny": dict(cells=[("tiny", 256), ("tiny", 512)], probe="tiny", probe_start=512, warmup=1, steps=2,
                 kernel_seq=512),
}
PEAK_BF16 = {"h100": 989e12, "h200": 989e12}  # dense bf16 FLOP/s (SXM)
PROBES = 3


def model_flops(m: dict, seq: int) -> float:
    """Model FLOPs of one training step on one causal row of `seq` tokens (module docstring)."""
    d, hd, L = m["hidden_size"], m["head_dim"], m["num_layers"]
    attn = d * (m["num_heads"] * hd) * 2 + d * (m["num_kv_heads"] * hd) * 2  # q, o; k, v
    n = L * (attn + 3 * d * m["intermediate_size"]) + d * m["vocab_size"]
    return 6.0 * n * seq + 6.0 * L * m["num_heads"] * hd * seq * seq


def _timed(step, warmup: int, steps: int) -> float:
    for _ in range(warmup):
        step()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t) / steps


def bookft_side(model: str, seq: int, warmup: int, steps: int, dtype: str) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bookft.config import from_dict
    from bookft.parallel.mesh import make_mesh
    from bookft.train.config import RunConfig
    from bookft.train.program import build_program
    from bookft.train.step import BATCH_FIELDS, batch_sharding

    m = {k: v for k, v in MODELS[model].items() if k != "head_dim"}
    cfg = from_dict(RunConfig, {
        "model": {**m, "compute_dtype": dtype, "param_dtype": "float32", "remat": "full"},
        "attention": {"strategy": "local", "kernel": "auto", "max_chunk": min(4096, seq),
                      "block_q": min(512, seq), "block_kv": min(512, seq)},
        "parallel": {"mesh": {"data": 1, "fsdp": 1, "context": 1}},
        "data": {"batch_size": 1, "seq_len": seq},
        "train": {"loss_chunk": min(4096, seq)},
    })
    mesh = make_mesh(cfg.parallel, jax.devices()[:1])
    program = build_program(cfg, mesh)
    state, frozen = program.init_state()
    sh = batch_sharding(mesh)
    ids = np.random.default_rng(0).integers(1, m["vocab_size"], (1, 1, seq + 1)).astype(np.int32)
    host = {"input_ids": ids[..., :-1], "targets": ids[..., 1:], "weights": np.ones((1, 1, seq), np.float32),
            "positions": np.arange(seq, dtype=np.int32)[None, None], "segment_ids": np.ones((1, 1, seq), np.int32)}
    batch = {f: jax.device_put(jnp.asarray(host[f]), sh) for f in BATCH_FIELDS}
    box = {"state": state}

    def step():
        box["state"], metrics = program.step(box["state"], frozen, batch)
        jax.block_until_ready(metrics["loss"])

    return {"step_s": _timed(step, warmup, steps), "kernel": program.attend.spec.kernel.name}


def torch_side(model: str, seq: int, warmup: int, steps: int, dtype: str) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    m = MODELS[model]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    conf = LlamaConfig(vocab_size=m["vocab_size"], hidden_size=m["hidden_size"], head_dim=m["head_dim"],
                       intermediate_size=m["intermediate_size"], num_hidden_layers=m["num_layers"],
                       num_attention_heads=m["num_heads"], num_key_value_heads=m["num_kv_heads"],
                       tie_word_embeddings=m["tie_embeddings"], max_position_embeddings=seq,
                       attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    net = LlamaForCausalLM(conf).to(dev)  # float32 master weights
    net.gradient_checkpointing_enable()
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    ids = torch.randint(1, m["vocab_size"], (1, seq), device=dev)
    amp = torch.bfloat16 if dtype == "bfloat16" else torch.float32

    def step():
        with torch.autocast(dev, dtype=amp, enabled=amp != torch.float32):
            loss = net(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if dev == "cuda":
            torch.cuda.synchronize()

    return {"step_s": _timed(step, warmup, steps), "kernel": "sdpa"}


def kernels_side(model: str, seq: int, warmup: int, steps: int, dtype: str) -> list[dict]:
    """Attention alone at `model`'s heads ([1, seq, H, head_dim]), causal, forward + backward."""
    import jax
    import jax.numpy as jnp

    from bookft.attention import make_attention

    m = MODELS[model]
    key = jax.random.split(jax.random.key(0), 3)

    def inputs(s):
        shape = lambda h: (1, s, h, m["head_dim"])  # noqa: E731
        return (jax.random.normal(key[0], shape(m["num_heads"]), dtype),
                jax.random.normal(key[1], shape(m["num_kv_heads"]), dtype),
                jax.random.normal(key[2], shape(m["num_kv_heads"]), dtype))

    xla = make_attention("local", "xla", None, load_balanced=False, block_q=512, block_kv=512)
    fns = {"bookft-xla": lambda q, k, v: xla(q, k, v, jnp.ones(q.shape[:2], jnp.int32), None)}
    try:
        import tokamax

        for impl in ("mosaic", "cudnn", "xla_chunked"):
            fns[f"tokamax-{impl}"] = functools.partial(tokamax.dot_product_attention, is_causal=True,
                                                       implementation=impl)
    except ImportError:
        pass
    ref = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True))
    rows = []
    for name, fn in fns.items():
        grad = jax.jit(jax.value_and_grad(lambda q, k, v, fn=fn: jnp.sum(fn(q, k, v).astype(jnp.float32)),
                                          argnums=(0, 1, 2)))
        try:
            small = inputs(min(seq, 2048))
            err = float(jnp.max(jnp.abs(jax.jit(fn)(*small).astype(jnp.float32) - ref(*small).astype(jnp.float32))))
            big = inputs(seq)
            t = _timed(functools.partial(_sync, grad, big), warmup, steps)
            flops = 2 * 2 * seq * seq / 2 * m["num_heads"] * m["head_dim"] * 3.5  # fwd + bwd (2.5x fwd)
            rows.append({"kernel": name, "seq": seq, "fwd_bwd_s": t, "max_abs_err_2k": err, "tflops": flops / t / 1e12})
        except Exception as e:
            rows.append({"kernel": name, "seq": seq, "error": f"{type(e).__name__}: {str(e)[:200]}"})
    return rows


def _sync(fn, args) -> None:
    import jax

    jax.block_until_ready(fn(*args))


def _is_oom(e: BaseException) -> bool:
    text = f"{type(e).__name__} {e}".lower()
    return "out of memory" in text or "resource_exhausted" in text or "outofmemory" in text


def worker(side: str, size: str, dtype: str) -> None:
    """One side's cells, then its probes; one JSON line per figure on stdout."""
    plan = SIZES[size]
    if side == "kernels":
        import jax.numpy as jnp

        for r in kernels_side(plan["probe"], plan["kernel_seq"], plan["warmup"], plan["steps"], jnp.dtype(dtype)):
            print(json.dumps({"what": "kernel", **r}), flush=True)
        return
    run = {"bookft": bookft_side, "torch": torch_side}[side]
    for model, seq in plan["cells"]:
        r = run(model, seq, plan["warmup"], plan["steps"], dtype)
        print(json.dumps({"what": "cell", "side": side, "model": model, "seq": seq, **r}), flush=True)
    seq = plan["probe_start"]
    for _ in range(PROBES):
        try:
            run(plan["probe"], seq, 1, 1, dtype)
            ok = True
        except Exception as e:  # out of memory ends the search; anything else is reported as such
            ok, why = False, f"{type(e).__name__}: {str(e)[:200]}"
        print(json.dumps({"what": "probe", "side": side, "model": plan["probe"], "seq": seq, "fits": ok,
                          **({} if ok else {"error": why})}), flush=True)
        if not ok:
            break
        seq *= 2


SHARE = {"kernels": 0.2, "bookft": 0.45, "torch": 0.35}  # of --budget; a side past its share is stopped


def _run_side(side: str, args) -> list[dict]:
    """One side's process; what it printed before its share of the budget ran out is kept."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", side, "--size", args.size, "--dtype", args.dtype]
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.budget * SHARE[side])
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")  # noqa: E731
        out, err, rc = text(e.stdout), text(e.stderr) + f"\nstopped at {e.timeout:.0f} s (its budget share)", -9
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if rc != 0:
        rows.append({"what": "error", "side": side, "rc": rc, "tail": err[-2000:]})
    return rows


def summarize(rows: list[dict], hardware: str) -> dict:
    """The cells side by side (tokens/s, MFU, bookft / torch) and each side's longest probe."""
    peak = PEAK_BF16.get(hardware)
    cells = {}
    for r in rows:
        if r["what"] != "cell":
            continue
        flops = model_flops(MODELS[r["model"]], r["seq"])
        cell = cells.setdefault(f"{r['model']}@{r['seq']}", {"model": r["model"], "seq": r["seq"],
                                                              "model_flops_per_step": flops})
        cell[r["side"]] = {"step_s": r["step_s"], "tokens_per_s": r["seq"] / r["step_s"], "kernel": r["kernel"],
                           "mfu": flops / r["step_s"] / peak if peak else None}
    for cell in cells.values():
        if "bookft" in cell and "torch" in cell:
            cell["bookft_over_torch"] = cell["bookft"]["tokens_per_s"] / cell["torch"]["tokens_per_s"]
    longest = {}
    for r in rows:
        if r["what"] == "probe" and r["fits"]:
            longest[r["side"]] = max(longest.get(r["side"], 0), r["seq"])
    return {"cells": list(cells.values()), "longest": longest, "peak_bf16_flops": peak,
            "kernels": [r for r in rows if r["what"] == "kernel"],
            "errors": [r for r in rows if r["what"] == "error"],
            "probes": [r for r in rows if r["what"] == "probe"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--sides", default="kernels,bookft,torch")
    ap.add_argument("--budget", type=float, default=420,
                    help="seconds for all sides together (shares: kernels 20%%, bookft 45%%, torch 35%%)")
    ap.add_argument("--results", help="results folder (default benchmarks/results)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.size, args.dtype)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the parent only asks what the device is
    import jax

    from bookft.benchrecord import record_header, result_path, write_result

    devices = jax.devices()
    header = record_header(devices=devices)
    hardware = header["machine"]["hardware"]
    rows = [r for side in args.sides.split(",") for r in _run_side(side, args)]
    body = {"size": args.size, "dtype": args.dtype, "device": str(devices[0].device_kind),
            "jax": jax.__version__, **summarize(rows, hardware)}
    print(f"{'cell':24} {'side':7} {'step s':>8} {'tokens/s':>10} {'MFU':>6}  kernel")
    for c in body["cells"]:
        for side in ("bookft", "torch"):
            if side in c:
                s = c[side]
                mfu = f"{s['mfu']:.1%}" if s["mfu"] is not None else "-"
                print(f"{c['model'] + '@' + str(c['seq']):24} {side:7} {s['step_s']:8.3f} {s['tokens_per_s']:10.0f} "
                      f"{mfu:>6}  {s['kernel']}")
    for r in body["kernels"]:
        print(f"kernel {r['kernel']:20} S={r['seq']}: " + (f"{r['fwd_bwd_s'] * 1e3:.1f} ms fwd+bwd, "
              f"{r['tflops']:.0f} TFLOP/s, max |err| at 2K {r['max_abs_err_2k']:.2g}" if "error" not in r
              else r["error"]))
    print("longest (1 row, tokens):", body["longest"], "| errors:", len(body["errors"]))
    where = {"results": Path(args.results)} if args.results else {}
    print("wrote", write_result(result_path("gpu_compare", args.size, hardware, **where), header, body))


if __name__ == "__main__":
    main()
