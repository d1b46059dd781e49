"""bookft: fine-tune open language models on book-length material with context parallelism."""

__version__ = "0.1.0"
