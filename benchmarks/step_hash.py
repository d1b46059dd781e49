"""Print the SHA-256 of the lowered (StableHLO) train step that `bookft plan` compiles.

The refactor invariant: the program `bookft plan -c PRESET -t TOPOLOGY` lowers must not change
when code moves. Lowering only (no XLA compile): about a minute for the 8B preset on 2 cores.

    python -m benchmarks.step_hash [-c configs/llama-3.1-8b-v5p-1m.yaml] [-t v5p-128] [--seq-len N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time


def lowered_text(config: str, topology: str, seq_len: int, strategy: str | None, remat: str | None) -> str:
    from bookft.plan.build import lower_step
    from bookft.plan.topology import parse_topology, topology_devices
    from bookft.train.config import load_run_config

    cfg = load_run_config(config)
    topo = parse_topology(topology)
    lowered = lower_step(cfg, topology_devices(topo), seq_len=seq_len, strategy=strategy or cfg.attention.strategy,
                         remat=remat or cfg.model.remat)
    return lowered.as_text()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--config", default="configs/llama-3.1-8b-v5p-1m.yaml")
    ap.add_argument("-t", "--topology", default="v5p-128")
    ap.add_argument("--seq-len", type=int, default=1_048_576)
    ap.add_argument("--strategy", default=None)
    ap.add_argument("--remat", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    text = lowered_text(args.config, args.topology, args.seq_len, args.strategy, args.remat)
    print(json.dumps({"config": args.config, "topology": args.topology, "seq_len": args.seq_len,
                      "sha256": hashlib.sha256(text.encode()).hexdigest(), "chars": len(text),
                      "lower_s": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
