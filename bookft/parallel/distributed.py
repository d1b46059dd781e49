"""Multi-host start-up: `jax.distributed.initialize()` when the job spans several processes.

JAX's multi-controller runtime finds its peers by itself on TPU pod slices (the TPU metadata
server), under SLURM, and from the usual coordinator variables on GPU clusters
(`JAX_COORDINATOR_ADDRESS` or `COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`).
`parallel.distributed: true|false` forces the choice; the default (null) initialises when the
environment says the job has more than one process. Every host then runs the same program and
`bookft.train.data` builds only the rows of its own devices.
"""

from __future__ import annotations

import os

from bookft.errors import ConfigError

_done = False


def wants_distributed(env=os.environ) -> bool:
    if env.get("JAX_COORDINATOR_ADDRESS") or env.get("COORDINATOR_ADDRESS"):
        return True
    if int(env.get("JAX_NUM_PROCESSES", "1") or 1) > 1 or int(env.get("SLURM_NTASKS", "1") or 1) > 1:
        return True
    hosts = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
    return len(hosts) > 1 or bool(env.get("MEGASCALE_COORDINATOR_ADDRESS"))


def maybe_initialize(distributed: bool | None, env=os.environ) -> bool:
    """Call jax.distributed.initialize() once if asked or detected; True when it ran."""
    global _done
    if _done:
        return True
    if distributed is False or (distributed is None and not wants_distributed(env)):
        return False
    import jax

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

