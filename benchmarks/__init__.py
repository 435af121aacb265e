"""The cases that print the figures in BENCHMARKS.md: `python -m benchmarks --list`."""
