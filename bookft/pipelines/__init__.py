"""pipelines: scheduled, incremental corpus refreshes with atomic publish (definitions in pipelines/*.yaml).

Public API: `run_pipeline(path) -> (exit code, run record)`, `load_pipeline(path)`, `parse_cron(expr)`,
`Lease` (pin a corpus version while reading it), exit codes `EXIT_*`.
"""

from bookft.pipelines.config import PipelineConfig, load_pipeline
from bookft.pipelines.cron import parse_cron
from bookft.pipelines.lock import Lease, RunLock
from bookft.pipelines.runner import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_LOCKED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_POST_FAILED,
    run_pipeline,
)

__all__ = ["PipelineConfig", "load_pipeline", "parse_cron", "Lease", "RunLock", "run_pipeline", "EXIT_OK",
           "EXIT_FAILED", "EXIT_CONFIG", "EXIT_LOCKED", "EXIT_PARTIAL", "EXIT_POST_FAILED"]
