"""The command layer: one module per `bookft` command, each with `register(app)` (bookft/cli.py).

A command module parses flags, loads config and calls the library; it is the one place where
layers are composed (train + the eval probe, a train checkpoint + HF export), so no library module
has to import upward.
"""
