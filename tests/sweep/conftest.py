"""Tests of popvision_lite/sweep: grids, the Dask engine on loopback workers, resume and failure isolation.
The point functions the workers import live in tests/support/sweep_points.py (module-level names)."""

import pytest


@pytest.fixture(scope="module")
def client():
    """A Client of the engine's own LocalCluster: 2 worker processes on loopback (one per module)."""
    from distributed import Client

    from popvision_lite.sweep import engine

    cluster = engine.local_cluster(2)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()
