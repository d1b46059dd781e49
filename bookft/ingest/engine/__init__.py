"""engine: where the per-source extraction runs, and its cache.

pool.py (the local process pool, started early from the command line), ray_engine.py (the same
tasks on Ray Data), jobs.py (the tasks both map: a whole source, or a page range of a big PDF) and
cache.py (extraction and token caches keyed by content hash). Light on purpose: the command line
imports pool.py before anything heavy, and the forkserver preloads jobs.py.
"""
