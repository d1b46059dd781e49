"""Accelerator facts: HBM per chip and peak dense bf16 FLOP/s, one table for MFU and planning.

Figures are the vendors' published per-chip numbers (Google Cloud TPU system architecture pages;
NVIDIA data sheets). v5p HBM is what libtpu itself reports (95.73 GB) rather than the 95 GiB in
the brochure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chip:
    name: str
    hbm_bytes: float
    peak_bf16_flops: float
    hbm_bandwidth: float  # bytes/s
    ici_bandwidth: float  # bytes/s per chip, all links, one direction (roofline estimates)


CHIPS: dict[str, Chip] = {
    "v4": Chip("TPU v4", 32 * 2**30, 275e12, 1.2e12, 2.7e11),
    "v5e": Chip("TPU v5e", 16 * 2**30, 197e12, 8.2e11, 2.0e11),
    "v5p": Chip("TPU v5p", 95.73e9, 459e12, 2.765e12, 6.0e11),
    "v6e": Chip("TPU v6e (Trillium)", 32 * 2**30, 918e12, 1.64e12, 4.0e11),
    "v7": Chip("TPU v7 (Ironwood)", 192 * 2**30, 2307e12, 7.37e12, 1.2e12),
    "h100": Chip("NVIDIA H100 SXM", 80 * 2**30, 989e12, 3.35e12, 4.5e11),
    "h200": Chip("NVIDIA H200", 141e9, 989e12, 4.8e12, 4.5e11),
}


def chip_for_device(device) -> Chip | None:
    """The table entry for a jax device (None on CPU or unknown kinds)."""
    kind = getattr(device, "device_kind", "").lower()
    if "v5p" in kind or kind.startswith("tpu v5") and "lite" not in kind:
        return CHIPS["v5p"]
    for key, words in (("v5e", ("v5 lite", "v5e")), ("v6e", ("v6", "trillium")), ("v7", ("v7", "ironwood")),
                       ("v4", ("v4",)), ("h200", ("h200",)), ("h100", ("h100",))):
        if any(w in kind for w in words):
            return CHIPS[key]
    return None


def peak_memory_bytes(device) -> int | None:
    try:
        stats = device.memory_stats()
    except Exception:
        return None
    if not stats:
        return None
    return stats.get("peak_bytes_in_use") or stats.get("bytes_in_use")
