"""Test helpers shared across test folders: profile builders, compare run pairs, Qt helpers, sweep point
functions (module-level, so Dask workers and point processes can import them)."""
