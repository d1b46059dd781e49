"""Start N local processes of one bookft command as one multi-controller JAX job (testing, one host).

`bookft launch --processes 2 [--devices-per-process 4] -- train -c run.yaml` runs
`python -m bookft.cli train -c run.yaml` N times with the variables `jax.distributed` reads
(JAX_COORDINATOR_ADDRESS on 127.0.0.1 and a free port, JAX_NUM_PROCESSES, JAX_PROCESS_ID) and, for
simulated CPU devices, XLA's device count per process (a run config's `parallel.cpu_devices`, the
whole job's count, takes precedence: bookft.parallel.distributed.start gives each process its share
and picks gloo collectives). On a TPU pod slice there is nothing to launch: the same command runs on every host
and JAX finds its peers itself (README, "Multi-host training").

Design choices:
- Each child is its own process group, so a stuck child (a collective waiting for a peer that
  died) is killed with everything it started.
- The job fails fast: when one process exits non-zero (or is killed), the others are stopped
  (SIGTERM, then SIGKILL after `grace_s`) and its status is returned; a job that runs past
  `timeout_s` is killed whole (status 124).
- `logs`: each process's output also goes to LOGS/process-I.log, else it shares the launcher's.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_env(index: int, processes: int, port: int, devices_per_process: int | None = None,
                base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of process `index` of a local job of `processes` (coordinator 127.0.0.1:port)."""
    env = dict(os.environ if base is None else base)
    env.update(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES=str(processes),
               JAX_PROCESS_ID=str(index))
    if devices_per_process:
        flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
        env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices_per_process}"])
        env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def spawn(args: list[str], index: int, processes: int, port: int, devices_per_process: int | None = None, *,
          base_env: dict[str, str] | None = None, log: Path | None = None, **popen) -> subprocess.Popen:
    """Process `index` of the job: `python -m bookft.cli ARGS` in its own process group."""
    env = process_env(index, processes, port, devices_per_process, base_env)
    out = open(log, "w") if log is not None else None  # noqa: SIM115 (the child holds it)
    try:
        return subprocess.Popen([sys.executable, "-m", "bookft.cli", *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT if out else None, start_new_session=True, **popen)
    finally:
        if out is not None:
            out.close()


def stop(procs: list[subprocess.Popen], grace_s: float = 10.0) -> None:
    """SIGTERM each running process group, then SIGKILL what is left after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        t0 = time.monotonic()
        while any(p.poll() is None for p in alive) and time.monotonic() - t0 < wait:
            time.sleep(0.1)


def wait_all(procs: list[subprocess.Popen], *, timeout_s: float | None = None, grace_s: float = 10.0) -> int:
    """0 when every process exits 0; else the first failure's status (the rest are stopped)."""
    t0 = time.monotonic()
    try:
        while True:
            codes = [p.poll() for p in procs]
            bad = [c for c in codes if c not in (None, 0)]
            if bad:
                stop(procs, grace_s)
                return 128 - bad[0] if bad[0] < 0 else bad[0]  # killed by signal N: 128 + N
            if all(c == 0 for c in codes):
                return 0
            if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                stop(procs, grace_s)
                return 124
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop(procs, grace_s)
        return 130


def launch_local(args: list[str], processes: int, devices_per_process: int | None = None, *,
                 logs: Path | None = None, timeout_s: float | None = None) -> int:
    """Run `bookft ARGS` as a job of `processes` local processes; the job's exit status."""
    port = free_port()
    if logs is not None:
        Path(logs).mkdir(parents=True, exist_ok=True)
    procs = [spawn(args, i, processes, port, devices_per_process,
                   log=Path(logs) / f"process-{i}.log" if logs is not None else None) for i in range(processes)]
    old = signal.signal(signal.SIGTERM, lambda *_: stop(procs))  # a stopped launcher stops its job
    try:
        return wait_all(procs, timeout_s=timeout_s)
    finally:
        signal.signal(signal.SIGTERM, old)
