"""The cache of the tune flow's base evals: a key that names everything a base grid's figures depend on.

Design choices:
- The base grids are cached as `base_cache/<key>/<model>/<task>/results.json` (model: base,
  fewshot), the key a hash of the model folder's files (config, tokenizer, weights' size and first
  and last MiB), the grid settings, the run config as it is scored (every section but train, data,
  checkpoint and the device layout) and the held-out texts: a second run of the flow on the same
  model and settings (a benchmark's seeds, a new recipe, another machine's mesh) reuses them. The
  tokenizer files count: a transformers release that writes another tokenizer for the same GGUF keys
  its own grids. Each run draws its own heatmap and page from the cached figures, so its reports
  stand alone; the cache is a few KB per task.
- The prompts' wording is in the key too, as the source of the modules that write them (and of
  the split and the strict scorer): cached figures never stand for a prompt that has since been
  reworded. The few-shot module keys only the few-shot grids (`cache_key(..., fewshot=True)`): a
  base prompt never passes through it, so a change to the shots keeps the base grids.
- Base perplexity is cached the same way, one file per lengths and texts beside the grids
  (cache/<key>/ppl-base-<lengths>-<texts' hash>.json).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

UNSCORED_SECTIONS = ("name", "train", "data", "checkpoint", "parallel")  # run-config sections outside the key
# attention fields that lay the computation out over devices and blocks: every strategy and kernel
# computes the same attention (tests/attention), so a grid scored on one GPU keys like one on a CPU mesh
LAYOUT_FIELDS = ("strategy", "kernel", "block_q", "block_kv", "max_chunk", "load_balance")
# model fields that choose what is kept for the backward pass or how layers are looped: the same function
MODEL_LAYOUT_FIELDS = ("remat", "scan_layers", "mlp_chunk")
WRITER_FIELDS = ("transformers_version",)  # config.json fields that name the writer, not the model


def model_fingerprint(model_dir: Path, whole: bool = False) -> str:
    """A hash of an HF folder's config (less WRITER_FIELDS, so the same model imported under another
    transformers release keys the same cache), tokenizer and weights (size plus the first and last MiB;
    with `whole`, every byte: a fine-tune may leave both ends of the file as they were)."""
    h = hashlib.sha256()
    config = model_dir / "config.json"
    if config.is_file():
        fields = {k: v for k, v in json.loads(config.read_text()).items() if k not in WRITER_FIELDS}
        h.update(json.dumps(fields, sort_keys=True).encode())
    else:
        h.update(b"-")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        p = model_dir / name
        h.update(p.read_bytes() if p.is_file() else b"-")
    for p in sorted(model_dir.glob("*.safetensors")):
        size = p.stat().st_size
        with p.open("rb") as f:
            if whole:
                h.update(p.name.encode())
                while chunk := f.read(1 << 24):
                    h.update(chunk)
                continue
            h.update(f"{p.name}:{size}".encode() + f.read(1 << 20))
            f.seek(max(0, size - (1 << 20)))
            h.update(f.read(1 << 20))
    return h.hexdigest()


def scored_config(cfg) -> dict:
    """The run config as a grid sees it: every section but the training run's and the device layout,
    no model path (the model's files are hashed instead), no LoRA adapter (zero until trained, so the
    base model's outputs do not depend on it) and no layout (LAYOUT_FIELDS, MODEL_LAYOUT_FIELDS): a
    change of recipe or of machine keeps the base grids."""
    d = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in UNSCORED_SECTIONS}
    d["model"] = {k: v for k, v in d["model"].items() if k not in ("hf_path", "lora", *MODEL_LAYOUT_FIELDS)}
    d["attention"] = {k: v for k, v in d["attention"].items() if k not in LAYOUT_FIELDS}
    return d


def prompt_fingerprint(fewshot: bool = False) -> str:
    """The source of the modules that write the eval's prompts (task wording, families, their
    vocabulary, placement; with `fewshot`, the few-shot examples), draw the split's seeds and
    haystacks, and score strict: a change to any of them keys new grids rather than reusing figures
    scored on other text or by another rule."""
    from bookft.eval import protocol, split, strict
    from bookft.needles import eval_vocab, families, placement, task_types, tasks
    from bookft.needles import fewshot as shots

    h = hashlib.sha256()
    for module in (tasks, task_types, families, eval_vocab, placement, *([shots] if fewshot else []), split,
                   strict, protocol):
        h.update(Path(module.__file__).read_bytes())
    return h.hexdigest()[:16]


def cache_key(model_dir: Path, settings: dict, cfg, heldout: list[Path], fewshot: bool = False,
              whole: bool = False) -> str:
    """The key of the base model's grids and perplexity; with `fewshot`, of its few-shot grids; with
    `whole`, every byte of the weights is hashed (a tuned model's grids, kept for --resume)."""
    h = hashlib.sha256(model_fingerprint(model_dir, whole).encode())
    h.update(prompt_fingerprint(fewshot).encode())
    h.update(json.dumps(settings, sort_keys=True).encode())
    h.update(json.dumps(scored_config(cfg), sort_keys=True, default=str).encode())
    for p in heldout:
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def ppl_cache_file(cache: Path, key: str, texts: list[Path], lengths) -> Path:
    """cache/<key>/ppl-base-<lengths>-<hash of the texts>.json: base perplexity on these texts."""
    h = hashlib.sha256()
    for p in texts:
        h.update(hashlib.sha256(Path(p).read_bytes()).digest())
    return cache / key / f"ppl-base-{'-'.join(map(str, sorted(set(lengths))))}-{h.hexdigest()[:12]}.json"
