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
