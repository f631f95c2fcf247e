"""The fit advisor's search on a small model, run once per test session (tests/sweep/test_fit.py reads its
advice): a one-layer GPT (hidden 128, a 14,000-token vocabulary, sequence 192, Adam) on the tests' 92-tile device
(tests/support/devices, decision 0395) whose LM head and Adam state are too many bytes for one IPU, searched up to
2 IPUs with real emulation on a local Dask cluster of one worker (tests/sweep/conftest.py's, shared with the
folder's one-worker sweep tests).

On the tests' device each emulation costs less than half of what the shipped chip's does (0.35-0.45 s against
0.8-1.2 s), and the model is scaled so the search keeps its shape: the run as given is over on one IPU (118 % of a
tile), two IPUs of tensor parallelism fit on either axis with every setting as given, one IPU fits with the LM
head's vocabulary serialised, and the search emulates 8 candidates (decision 0477).  The search's worker must know
the device's id as the test process does: its cluster registers the device in each worker (a Dask worker plugin,
:func:`device_plugin`), and the search's answer, ``best.toml``, runs through ``emulate --config`` in the test
process."""

from __future__ import annotations

from tests.support import devices as test_devices

SMALL = {"model": "gpt2-small", "device": test_devices.ID, "layers": 1, "hidden": 128, "heads": 4, "seq": 192,
         "batch": 1, "vocab": 14000, "optimizer": "adam"}
MAX_IPUS = 2


def device_plugin(path: str):
    """A Dask WorkerPlugin that registers the device spec file at ``path`` in each worker (and in a worker the
    nanny starts again after a crash)."""
    from distributed import WorkerPlugin

    class RegisterTestDevice(WorkerPlugin):
        name = "popvision-tests-register-device"

        def setup(self, worker):
            from popvision_lite import devices

            devices.register_device(path)

    return RegisterTestDevice()


def small_fit(folder, client=None):
    """The search into ``folder``, on ``client`` (its workers must know the tests' device: :func:`device_plugin`),
    or on a local cluster of one worker that it starts, registers the device in, and closes."""
    from popvision_lite.sweep.fit import fit_advice

    test_devices.register()          # the test process resolves the id too (tests/conftest.py has done so already)
    if client is not None:
        return fit_advice(dict(SMALL), max_ipus=MAX_IPUS, out=folder, client=client)
    from distributed import Client

    from popvision_lite.sweep import engine

    cluster = engine.local_cluster(1)
    own = Client(cluster)
    try:
        own.register_plugin(device_plugin(str(test_devices.PATH)))
        return fit_advice(dict(SMALL), max_ipus=MAX_IPUS, out=folder, client=own)
    finally:
        own.close()
        cluster.close()
