"""pipelines: scheduled, incremental corpus refreshes with atomic publish (definitions in pipelines/*.yaml).

Public API: `run_pipeline(path) -> (exit code, run record)`, `load_pipeline(path)`, `parse_cron(expr)`,
`Lease` (pin a corpus version while reading it), exit codes `EXIT_*`.
"""

from bookft._lazy import lazy

# public name -> defining module, imported on first use (bookft/_lazy.py)
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.pipelines.config": ["PipelineConfig", "load_pipeline"],
    "bookft.pipelines.cron": ["parse_cron"],
    "bookft.pipelines.lock": ["Lease", "RunLock"],
    "bookft.pipelines.runner": ["EXIT_CONFIG", "EXIT_FAILED", "EXIT_LOCKED", "EXIT_OK", "EXIT_PARTIAL",
                                 "EXIT_POST_FAILED", "run_pipeline"],
})
