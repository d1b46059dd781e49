"""eval: needle-in-a-haystack and RULER-style retrieval grids, scoring and reports.

Library entry: `run_niah(model, tokenizer, settings) -> results dict`, then
`write_report(results, out_dir)`; `compare_reports(a, b, out_dir)` draws two runs side by side.
"""

from bookft._lazy import lazy

# public name -> defining module, imported on first use (bookft/_lazy.py)
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.eval.config": ["EvalConfig"],
    "bookft.eval.report": ["compare_reports", "load_results", "print_summary", "write_report"],
    "bookft.eval.runner": ["effective_length", "run_niah"],
    "bookft.eval.scoring": ["string_match_all"],
    "bookft.needles.tokenizer": ["ModelTokenizer"],
})
