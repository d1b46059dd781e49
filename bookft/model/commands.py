"""`bookft export`: thin CLI over bookft.model.export.export_checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def export_command(
    checkpoint: Annotated[Path, typer.Argument(help="HF model folder or `bookft train` run dir (or RUN_DIR/checkpoints/STEP).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output HF folder (config.json + safetensors + tokenizer).")],
    dtype: Annotated[str | None, typer.Option(help="float32 | bfloat16 (default: the parameter dtype).")] = None,
    tokenizer: Annotated[Path | None, typer.Option(help="Folder to copy tokenizer files from.")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a model already in --out.")] = False,
) -> None:
    """Export a checkpoint as a Hugging Face folder that transformers loads (LoRA merged)."""
    from rich.console import Console
    from rich.table import Table

    from bookft.errors import ModelError
    from bookft.model.export import export_checkpoint

    if dtype not in (None, "float32", "bfloat16"):
        raise ModelError(f"--dtype {dtype!r}: expected float32 or bfloat16")
    console = Console()
    with console.status(f"exporting {checkpoint} -> {out}"):
        path = export_checkpoint(checkpoint, out, dtype=dtype, tokenizer_dir=tokenizer, overwrite=overwrite)
    table = Table(title=f"exported to {path}")
    table.add_column("file")
    table.add_column("size", justify="right")
    for f in sorted(path.iterdir()):
        if f.is_file():
            table.add_row(f.name, f"{f.stat().st_size / 1e6:.2f} MB")
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
