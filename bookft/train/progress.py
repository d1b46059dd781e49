"""A rich progress line for training: step, loss, tokens/s, step time."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class TrainProgress:
    def __init__(self, console, total: int):
        self.progress = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console)
        self.total = total
        self.probe = ""  # the last needle probe (train.probe_every), shown until the next one

    def __enter__(self):
        self.progress.__enter__()
        self.task = self.progress.add_task("train", total=self.total, info="compiling...")
        return self

    def update(self, step: int, total: int, row: dict) -> None:
        info = (f"loss {row['loss']:.4f}  |g| {row['grad_norm']:.3f}  lr {row['lr']:.2e}  "
                f"{row['tokens_per_s']:,.0f} tok/s  {row['step_time_s']:.2f}s/step  L={row['seq_len']}")
        probes = {k[6:]: v for k, v in row.items() if k.startswith("probe/") and k != "probe/min"}
        if probes:
            self.probe = "  probe " + " ".join(f"{n}:{v:.2f}" for n, v in probes.items())
        info += self.probe
        self.progress.update(self.task, completed=step, total=total, info=info)

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)
