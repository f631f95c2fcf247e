"""Tests of popvision_lite/sweep: grids, the Dask engine on loopback workers, resume and failure isolation.
The point functions the workers import live in tests/support/sweep_points.py (module-level names)."""

import pytest


def _local_client(workers: int):
    from distributed import Client

    from popvision_lite.sweep import engine

    cluster = engine.local_cluster(workers)
    return cluster, Client(cluster)


@pytest.fixture(scope="package")
def one_worker_client():
    """A Client of the engine's own LocalCluster of one worker process on loopback, started at its first user and
    closed when the folder's last test has run: the cancel module runs on it (with a second worker while its tests
    run, ``client``), the fit search (``fit_small``, tests/sweep/test_fit.py) runs its emulations on it, then the
    modules whose ``CLUSTER_WORKERS`` is 1 (tests/sweep/test_sweep.py) run their sweeps on the same worker, instead
    of each starting a cluster or a worker process (a Python, ``distributed``, the emulator, its fork server) of its
    own.  Its workers know the tests' 92-tile device (a worker plugin), on which the fit search runs;
    a sweep of the bundled devices does not read it."""
    from tests.support import devices as test_devices
    from tests.support.fit_search import device_plugin

    cluster, c = _local_client(1)
    c.register_plugin(device_plugin(str(test_devices.PATH)))
    yield c
    c.close()
    cluster.close()


def _scale(c, n: int) -> None:
    """The folder's cluster grown or shrunk to ``n`` worker processes of the engine's worker spec (one thread, one
    sweep slot, quiet logs), returning once the scheduler and the cluster both have exactly ``n``."""
    import time

    c.cluster.scale(n)
    t0 = time.monotonic()
    while len(c.scheduler_info(n_workers=-1)["workers"]) != n or len(c.cluster.workers) != n:
        assert time.monotonic() - t0 < 600, f"the sweep folder's cluster did not reach {n} workers"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def client(request):
    """A Client of the folder's cluster (``one_worker_client``: the engine's own LocalCluster on loopback) with
    the module's ``CLUSTER_WORKERS`` worker processes (default 2).  A module whose tests need two points in flight
    at once (tests/sweep/test_cancel_and_clusters.py) gets a second worker for its own tests, retired at the
    module's end; the others (``CLUSTER_WORKERS = 1``) run on the one worker.  Each worker process is a Python,
    ``distributed``, a fork server with the emulator, and heartbeats: the folder starts two and one scheduler,
    instead of a cluster of its own per module."""
    workers = getattr(request.module, "CLUSTER_WORKERS", 2)
    c = request.getfixturevalue("one_worker_client")
    if workers == 1:
        yield c
        return
    _scale(c, workers)
    yield c
    _scale(c, 1)


@pytest.fixture(scope="package")
def fit_small(tmp_path_factory, one_worker_client):
    """The fit advisor's search on a small model (tests/support/fit_search.py), once, on the folder's one-worker
    cluster (this folder's tests are its only readers)."""
    from tests.support.fit_search import small_fit

    return small_fit(tmp_path_factory.mktemp("fit") / "search", client=one_worker_client)
