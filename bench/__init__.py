"""Benchmarks: each sub-package with a __main__ is one benchmark; `python -m bench` runs all."""
