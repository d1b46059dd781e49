"""bookft: fine-tune open language models on book-length material with context parallelism."""

from bookft.hostenv import quiet_libtpu_on_cpu_host

__version__ = "0.1.0"

quiet_libtpu_on_cpu_host()  # before anything imports jax (bookft/hostenv.py)
