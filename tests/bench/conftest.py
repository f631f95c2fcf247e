"""Tests of the bench/ scripts at tiny sizes: the runner and its report, the scale benchmark, the
verdict workloads and seeded subsets of the fuzzers (no timing is asserted)."""
