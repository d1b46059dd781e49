"""filters: what is taken out of the text before it is tokenized.

secrets.py redacts secrets inside extraction (code by default, legal sources when asked);
dedup.py drops exact duplicates (text sha256, first occurrence wins) and, with neardup.py's
MinHash LSH, near-duplicates, in the build's dedup phase.
"""
