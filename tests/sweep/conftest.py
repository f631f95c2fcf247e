"""Tests of popvision_lite/sweep: grids, the Dask engine on loopback workers, resume and failure isolation.
The point functions the workers import live in tests/support/sweep_points.py (module-level names)."""
