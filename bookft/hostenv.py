"""Quiet libtpu on a host without TPU chips (set before jax loads; called from bookft/__init__.py).

With libtpu installed (the extra `bookft plan` needs to compile for TPU topologies), jax loads it
on such a host and libtpu prints its start-up errors ("could not determine TPU accelerator type",
an INVALID_ARGUMENT trace) before falling back: on every command, not only `plan`. libtpu reads
the accelerator type and worker host names from the environment before it asks the TPU metadata
server, so on a host with no TPU device files bookft gives it a valid placeholder (a one-host v5p
slice, localhost); `plan` names its topology explicitly, so AOT compiles are unchanged. A host
with TPU chips (/dev/accel* or /dev/vfio) and anything the user set are left alone.
"""

from __future__ import annotations

import glob
import os


def has_tpu_devices() -> bool:
    return bool(glob.glob("/dev/accel*")) or os.path.isdir("/dev/vfio")


def quiet_libtpu_on_cpu_host(env=os.environ) -> bool:
    """Set the placeholders when no TPU is attached; True when they were set."""
    if has_tpu_devices() or env.get("TPU_ACCELERATOR_TYPE") or env.get("TPU_WORKER_HOSTNAMES"):
        return False
    env["TPU_ACCELERATOR_TYPE"] = "v5p-8"
    env["TPU_WORKER_HOSTNAMES"] = "localhost"
    return True
