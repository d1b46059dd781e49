"""eval: needle-in-a-haystack and RULER-style retrieval grids, scoring and reports.

Library entry: `run_niah(model, tokenizer, settings) -> results dict`, then
`write_report(results, out_dir)`; `compare_reports(a, b, out_dir)` draws two runs side by side.
"""

from bookft.eval.config import EvalConfig
from bookft.eval.report import compare_reports, load_results, print_summary, write_report
from bookft.eval.runner import effective_length, run_niah
from bookft.eval.scoring import string_match_all
from bookft.eval.tokenizer import EvalTokenizer

__all__ = ["EvalConfig", "EvalTokenizer", "compare_reports", "effective_length", "load_results",
           "print_summary", "run_niah", "string_match_all", "write_report"]
