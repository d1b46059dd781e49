"""Analytic FLOPs and a roofline step-time estimate for a planned train step.

Assumptions (printed with every estimate):
- compute: the model FLOPs of bookft.model.flops_per_token (6N + causal attention) plus the
  forward pass recomputed by remat (full: +1/3, save_dots: +~1/6 for the non-matmul part, which we
  round to +0; offload: +0), at the chip's peak dense bf16 FLOP/s, i.e. an upper bound (MFU = 100%);
- communication over ICI at the chip's one-direction bandwidth, fully overlapped with compute:
  FSDP weight all-gathers (forward, backward, remat) and gradient reduce-scatter, plus the
  attention strategy's own traffic (ring: K/V around the ring forward, K/V + dK/dV backward;
  all-gather: the same volume as one gather/scatter; ulysses: four all-to-alls each way);
- step time = max(compute, communication); HBM bandwidth is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from bookft.model import flops_per_token
from bookft.model.config import ModelConfig

REMAT_EXTRA_FORWARD = {"none": 0.0, "save_dots": 0.0, "full": 1.0, "offload": 0.0, "offload_input": 1.0}


@dataclass
class Estimate:
    model_flops: float
    hardware_flops: float
    compute_s: float
    comm_s: float
    step_s: float
    mfu_at_estimate: float
    assumptions: str


def _bytes(dtype: str) -> int:
    return 2 if dtype == "bfloat16" else 4


def attention_comm_bytes(mc: ModelConfig, strategy: str, seq_len: int, cp: int, remat: str) -> float:
    """Bytes each device sends for attention in one forward+backward of all layers."""
    if cp <= 1 or strategy == "local":
        return 0.0
    b = _bytes(mc.compute_dtype)
    kv_shard = seq_len / cp * mc.num_kv_heads * mc.dim_per_head * b * 2  # K and V of one shard
    fwd_passes = 1 + REMAT_EXTRA_FORWARD[remat]
    if strategy in ("ring", "allgather"):
        per_layer = kv_shard * (cp - 1) * (fwd_passes + 3)  # bwd: K,V plus fp32 dK,dV travel
    elif strategy == "ulysses":
        q_shard = seq_len / cp * mc.num_heads * mc.dim_per_head * b
        per_layer = (2 * q_shard + kv_shard) * (cp - 1) / cp * (fwd_passes + 2)
    else:  # usp: between the two; count as ring over sqrt(cp)
        per_layer = kv_shard * (cp ** 0.5 - 1) * (fwd_passes + 3)
    return per_layer * mc.num_layers


def estimate(mc: ModelConfig, *, strategy: str, remat: str, seq_len: int, tokens_per_step: int,
             n_devices: int, cp: int, shard_degree: int, param_bytes_total: float, flops_per_device: float,
             ici_bandwidth: float) -> Estimate:
    """`shard_degree`: how many devices share each parameter (FSDP over fsdp + context axes)."""
    model = flops_per_token(mc, seq_len) * tokens_per_step
    hardware = model * (1 + REMAT_EXTRA_FORWARD[remat] / 3)
    compute = hardware / (n_devices * flops_per_device)
    weights = param_bytes_total * _bytes(mc.compute_dtype) / 4  # fp32 master, gathered in compute dtype
    gathers = 2 + REMAT_EXTRA_FORWARD[remat]
    fsdp = (weights * gathers + param_bytes_total) * (shard_degree - 1) / max(shard_degree, 1)
    comm = (fsdp + attention_comm_bytes(mc, strategy, seq_len, cp, remat)) / ici_bandwidth
    step = max(compute, comm)
    text = ("roofline: model FLOPs (6N + causal attention) plus remat recompute at peak bf16 FLOP/s; "
            "FSDP gathers/reduce-scatters and attention traffic over ICI at one-direction chip bandwidth, "
            "fully overlapped; step = max(compute, communication); HBM bandwidth not modelled")
    return Estimate(model, hardware, compute, comm, step, model / (step * n_devices * flops_per_device), text)
