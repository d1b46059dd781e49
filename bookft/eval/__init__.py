"""eval: needle-in-a-haystack and RULER-style retrieval grids, scoring and reports.

Library entry: `run_niah(model, tokenizer, settings) -> results dict`, then
`write_report(results, out_dir)`; `compare_reports(a, b, out_dir)` draws two runs side by side.
"""

from bookft._lazy import lazy

# Lazy (bookft/_lazy.py), measured: CPU seconds of a fresh interpreter, 2-core host at load 1.1-1.3, median of
# 5 interleaved rounds: `import bookft.eval.config` (a pipeline's eval step) 0.22 s; 0.82 s with plain
# imports here.
# public name -> defining module, imported on first use
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.eval.config": ["EvalConfig"],
    "bookft.eval.report": ["compare_reports", "load_results", "print_summary", "write_report"],
    "bookft.eval.runner": ["effective_length", "run_niah"],
    "bookft.eval.scoring": ["string_match_all"],
    "bookft.needles.tokenizer": ["ModelTokenizer"],
})
