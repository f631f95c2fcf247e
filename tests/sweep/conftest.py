"""Tests of popvision_lite/sweep: grids, the Dask engine on loopback workers, resume and failure isolation.
The point functions the workers import live in tests/support/sweep_points.py (module-level names)."""

import pytest


@pytest.fixture(scope="module")
def client(request):
    """A Client of the engine's own LocalCluster on loopback, one per module: the module's ``CLUSTER_WORKERS``
    worker processes (default 2; a module whose tests need no two points in flight at once takes 1: each
    worker process is a Python, ``distributed``, a fork server with the emulator, and heartbeats)."""
    from distributed import Client

    from popvision_lite.sweep import engine

    cluster = engine.local_cluster(getattr(request.module, "CLUSTER_WORKERS", 2))
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()
