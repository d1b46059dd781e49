"""Multi-host start-up: `jax.distributed.initialize()` when the job spans several processes.

JAX's multi-controller runtime finds its peers by itself on TPU pod slices (the TPU metadata
server), under SLURM, and from the usual coordinator variables on GPU clusters
(`JAX_COORDINATOR_ADDRESS` or `COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`).
`parallel.distributed: true|false` forces the choice; the default (null) initialises when the
environment says the job has more than one process. Every host then runs the same program and
`bookft.train.data` builds only the rows of its own devices.

Design choices:
- `start(parallel_cfg)` is the one entry point, before anything touches a device: the simulated
  CPU devices (`parallel.cpu_devices` counts the whole job's, so one config gives the same mesh in
  one process or N: each process takes exactly its share, whatever XLA_FLAGS says), gloo
  collectives for a CPU job (XLA's CPU client has no cross-process collectives without them), then
  `jax.distributed.initialize()`.
- `check_agreement(facts)`: every process publishes what it will run (the flattened run config, the
  corpus version) by an all-gather (public `multihost_utils.process_allgather`) and compares with
  process 0; a host that differs is named with the keys and both values, on every host, before
  anything compiles. A process that never arrives is bounded by `bookft launch --timeout` (or the
  scheduler's), not here: the public all-gather has no deadline.
- Only public JAX names: the TPU slice's host list comes from the VM's metadata server over HTTP
  (the attribute JAX's cluster detection reads), not from JAX's private cluster module.
"""

from __future__ import annotations

import json
import os
import socket

from bookft.errors import ConfigError

_done = False
METADATA_URL = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/worker-network-endpoints"


def wants_distributed(env=os.environ) -> bool:
    if env.get("JAX_COORDINATOR_ADDRESS") or env.get("COORDINATOR_ADDRESS"):
        return True
    if int(env.get("JAX_NUM_PROCESSES", "1") or 1) > 1 or int(env.get("SLURM_NTASKS", "1") or 1) > 1:
        return True
    hosts = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
    return len(hosts) > 1 or bool(env.get("MEGASCALE_COORDINATOR_ADDRESS")) or _tpu_vm_hosts(env) > 1


def _tpu_vm_hosts(env) -> int:
    """The hosts of this Cloud TPU VM slice as the GCE metadata server lists them (the attribute
    JAX's own cluster detection reads); 0 off a TPU host or when the server does not say. Not
    exercised here: no TPU slice in CI."""
    from bookft.hostenv import has_tpu_devices

    if not has_tpu_devices() or env.get("TPU_SKIP_MDS_QUERY") is not None:
        return 0
    import urllib.request

    req = urllib.request.Request(METADATA_URL, headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:  # the VM's own metadata server, not the internet
            text = r.read().decode()
    except Exception:
        return 0
    return len([w for w in text.split(",") if w.strip()])


def maybe_initialize(distributed: bool | None, env=os.environ) -> bool:
    """Call jax.distributed.initialize() once if asked or detected; True when it ran."""
    global _done
    if _done:
        return True
    if distributed is False or (distributed is None and not wants_distributed(env)):
        return False
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU only; accelerators ignore it
    kwargs = {}
    addr = env.get("JAX_COORDINATOR_ADDRESS") or env.get("COORDINATOR_ADDRESS")
    if addr:
        kwargs["coordinator_address"] = addr
        if env.get("JAX_NUM_PROCESSES"):
            kwargs["num_processes"] = int(env["JAX_NUM_PROCESSES"])
        if env.get("JAX_PROCESS_ID"):
            kwargs["process_id"] = int(env["JAX_PROCESS_ID"])
    try:
        jax.distributed.initialize(**kwargs)
    except Exception as e:
        raise ConfigError(f"parallel.distributed: jax.distributed.initialize() failed ({e}); check the "
                          "coordinator variables (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID)") from e
    _done = True
    return True



def processes_hint(env=os.environ) -> int:
    """The job's process count as the environment states it (1 when it does not say)."""
    return max(int(env.get("JAX_NUM_PROCESSES", "1") or 1), 1)


def start(cfg, env=os.environ) -> int:
    """Devices and the multi-controller runtime for a ParallelConfig, before jax's backend starts;
    the index of this process."""
    if cfg.cpu_devices:  # the job's simulated CPU devices, shared out over its processes
        from bookft.parallel.mesh import ensure_cpu_devices

        n = processes_hint(env) if cfg.distributed is not False else 1
        if cfg.cpu_devices % n:
            raise ConfigError(f"parallel.cpu_devices={cfg.cpu_devices} does not split over the job's {n} "
                              "processes; use a multiple of JAX_NUM_PROCESSES")
        ensure_cpu_devices(cfg.cpu_devices // n, exact=n > 1)  # a job's processes hold equal shares
    maybe_initialize(cfg.distributed, env)
    import jax

    return jax.process_index()


def check_agreement(facts: dict[str, str], *, what: str = "the run") -> None:
    """Raise ConfigError on every process when any process's `facts` (plain strings by key) differ
    from process 0's, naming the process, its host and each differing key with both values."""
    import jax

    if jax.process_count() == 1:
        return
    got = _gather_json({"host": socket.gethostname(), "facts": facts})
    ref = got[0]["facts"]
    for p in range(1, len(got)):
        mine = got[p]["facts"]
        diff = [k for k in sorted(set(ref) | set(mine)) if ref.get(k) != mine.get(k)]
        if diff:
            shown = "; ".join(f"{k}: {_short(mine.get(k))} on process {p}, {_short(ref.get(k))} on process 0"
                              for k in diff[:5])
            more = f" (and {len(diff) - 5} more)" if len(diff) > 5 else ""
            raise ConfigError(f"hosts disagree on {what}: process {p} (host {got[p]['host']}) differs from "
                              f"process 0 (host {got[0]['host']}): {shown}{more}; every host must run the "
                              "same command with the same config and corpus version")


def _gather_json(value) -> list:
    """Every process's `value` (JSON), in process order: two public all-gathers
    (`multihost_utils.process_allgather`), the byte lengths, then the padded bytes."""
    import numpy as np
    from jax.experimental import multihost_utils

    data = np.frombuffer(json.dumps(value).encode(), np.uint8)
    lengths = np.asarray(multihost_utils.process_allgather(np.asarray(len(data), np.int32))).reshape(-1)
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[: len(data)] = data
    rows = np.asarray(multihost_utils.process_allgather(padded)).reshape(len(lengths), -1)
    return [json.loads(bytes(row[:n]).decode()) for row, n in zip(rows, lengths, strict=True)]


def any_process(value: int) -> int:
    """The largest of `value` over the job's processes (a tiny all-gather; `value` itself on one
    process): how the processes agree, at the same step, that one of them was signalled."""
    import jax

    if jax.process_count() == 1:
        return value
    import numpy as np
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.asarray(value, np.int32))))


def _short(v, n: int = 80) -> str:
    s = "(missing)" if v is None else str(v)
    return s if len(s) <= n else s[: n - 3] + "..."
