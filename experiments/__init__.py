"""One-off experiments, run as modules from the repository root: `python -m experiments.NAME` (README.md)."""
