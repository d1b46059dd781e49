"""`bookft export`: a checkpoint (HF folder or train run directory) -> an HF folder.

Design choices:
- An HF folder (has config.json) is loaded with load_hf; anything else is a train run (or one of
  its checkpoints), read by `bookft.train.checkpoint.load_params(path) -> (model, run_config)`.
  It lives in train/, not model/: the model package knows nothing of train checkpoints.
- LoRA is merged on save (save_hf); tokenizer files come from --tokenizer, else the source HF
  folder, else the run's `model.hf_path`.
- The output folder must not already hold a model unless overwrite=True; it may not be the source.
"""

from __future__ import annotations

from pathlib import Path

from bookft.errors import BookftError, ModelError
from bookft.model.hf_io import load_hf, save_hf


def export_checkpoint(checkpoint: str | Path, out: str | Path, *, dtype: str | None = None,
                      tokenizer_dir: str | Path | None = None, overwrite: bool = False) -> Path:
    """Write `checkpoint` as an HF folder at `out`; returns `out`."""
    src, out = Path(checkpoint), Path(out)
    if not src.exists():
        raise ModelError(f"{src}: no such checkpoint (expected an HF folder or a `bookft train` run dir)")
    if out.resolve() == src.resolve():
        raise ModelError(f"--out {out} is the source folder; choose another directory")
    if (out / "config.json").exists() and not overwrite:
        raise ModelError(f"{out}: already holds a model (config.json); pass --overwrite to replace it")
    if (src / "config.json").is_file():
        model, config = load_hf(src)
        tokenizer_dir = tokenizer_dir or src
    else:
        from bookft.train.checkpoint import load_params

        try:
            model, run_config = load_params(src)
        except BookftError:
            raise
        except Exception as e:  # orbax/IO trouble: say where
            raise ModelError(f"{src}: could not restore the train checkpoint ({type(e).__name__}: {e})") from None
        config = model.config
        tokenizer_dir = tokenizer_dir or getattr(run_config.model, "hf_path", None)
    if config.short_conv:
        raise ModelError(f"{src}: this model has bookft's short convolution (model.short_conv="
                         f"{config.short_conv}), which transformers' {config.model_type} does not have; "
                         "it would load without it and give wrong outputs. Evaluate it with bookft "
                         "(bookft eval niah --checkpoint), or train with model.short_conv=0 to export.")
    if any(config.layer_windows):
        raise ModelError(f"{src}: this model has sliding-window layers (model.sliding_window="
                         f"{config.sliding_window}, layer_types {list(config.layer_types)}), which transformers' "
                         f"{config.model_type} would load as full attention and give wrong outputs. Evaluate it "
                         "with bookft (bookft eval niah --checkpoint), or train without model.sliding_window.")
    return save_hf(model, config, out, tokenizer_dir=tokenizer_dir, dtype=dtype)
