"""`bookft export` and `bookft import`: thin CLI over bookft.train.export and bookft.model.importer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def _files_table(title: str, path: Path):
    from rich.table import Table

    table = Table(title=title)
    table.add_column("file")
    table.add_column("size", justify="right")
    for f in sorted(path.iterdir()):
        if f.is_file():
            table.add_row(f.name, f"{f.stat().st_size / 1e6:.2f} MB")
    return table


def export_command(
    checkpoint: Annotated[Path, typer.Argument(help="HF model folder or `bookft train` run dir (or RUN_DIR/checkpoints/STEP).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output HF folder (config.json + safetensors + tokenizer).")],
    dtype: Annotated[str | None, typer.Option(help="float32 | bfloat16 (default: the parameter dtype).")] = None,
    tokenizer: Annotated[Path | None, typer.Option(help="Folder to copy tokenizer files from.")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a model already in --out.")] = False,
) -> None:
    """Export a checkpoint as a Hugging Face folder that transformers loads (LoRA merged)."""
    from rich.console import Console

    from bookft.errors import ModelError
    from bookft.train.export import export_checkpoint

    if dtype not in (None, "float32", "bfloat16"):
        raise ModelError(f"--dtype {dtype!r}: expected float32 or bfloat16")
    console = Console()
    with console.status(f"exporting {checkpoint} -> {out}"):
        path = export_checkpoint(checkpoint, out, dtype=dtype, tokenizer_dir=tokenizer, overwrite=overwrite)
    console.print(_files_table(f"exported to {path}", path))


def import_command(
    src: Annotated[Path, typer.Argument(help="A .gguf file (or a folder holding one), or an HF model folder transformers reads.")],
    out: Annotated[Path, typer.Argument(help="Output HF folder (config.json + safetensors + tokenizer with its chat template).")],
    dtype: Annotated[str, typer.Option(help="float32 | bfloat16: the dtype of the written weights.")] = "float32",
    overwrite: Annotated[bool, typer.Option(help="Replace a model already in OUT.")] = False,
) -> None:
    """Import a GGUF file or a transformers checkpoint as an HF folder that bookft and transformers load."""
    from rich.console import Console

    from bookft.model.importer import import_model

    console = Console()
    with console.status(f"importing {src} -> {out}"):
        report = import_model(src, out, dtype=dtype, overwrite=overwrite)
    console.print(_files_table(f"imported to {report.out}", report.out))
    quant = ", ".join(f"{k} x{v}" for k, v in sorted(report.quantization.items()))
    console.print(f"{report.model_type}, {report.parameters / 1e6:.1f}M parameters in {report.dtype}"
                  + (f", dequantized from {quant}" if quant else "")
                  + f"; chat template: {'yes' if report.chat_template else 'no'}; {report.seconds:.1f} s")


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
    app.command("import")(import_command)
