"""Benchmarks: each bench/*.py script prints its numbers side by side; ``python -m bench`` runs them all."""
