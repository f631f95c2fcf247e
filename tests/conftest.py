"""Root of the test suite (one folder per package: cli/, emulator/, profile/, analysis/, gui/, sweep/,
plus bench/ and project/).  Fixtures every folder may use live here; each folder's conftest.py adds its own.
Helpers that are not fixtures are in tests/support/."""

import os
import sys

import pytest

# GUI tests run offscreen unless a real display was asked for explicitly.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _compile_the_project() -> None:
    """Byte-compile the project's own packages once, before the session imports them (decision 0470).  With
    ``PYTHONDONTWRITEBYTECODE`` set (this project's dev machines set it, and ``.ci/run`` inherits it) no import
    writes a ``.pyc``, so every Python process the tests start (CLI runs, sweep and Dask workers, the notebook's
    interpreter, killed writers, bench scripts) compiled the package's modules from source again.  Reading
    cached bytecode is not affected by that variable, and ``compileall`` writes it regardless, as ``bench/speed.py``
    does; an up-to-date ``.pyc`` is left as it is.  ``__pycache__`` is git-ignored."""
    import compileall
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for package in ("popvision_lite", "bench", "resources"):
        if (root / package).is_dir():
            compileall.compile_dir(str(root / package), quiet=1)


_compile_the_project()

from tests.support import devices as test_devices  # noqa: E402
from tests.support.compare_runs import run_pairs, tile_mismatch  # noqa: E402, F401  (fixtures: analysis and gui)

# The tests' device with fewer tiles (tests/support/devices, decision 0395): its id resolves in this process as
# a bundled one does, for the tests whose behaviour does not depend on the shipped chip's 1,472 tiles.
SMALL_DEVICE = test_devices.register().id

# Every wait of a Qt test ends as soon as its event happens; its timeout only stops a test that would hang.
# A timeout of a few seconds is a guess about the machine's speed, which a loaded machine (the suite beside
# other CPU-bound processes on 2 cores) can miss.  So every qtbot wait gets at least WAIT_BOUND_MS, whatever
# the test wrote; a passing test waits exactly as long as before.
WAIT_BOUND_MS = 300_000


def _generous_qt_waits() -> None:
    try:
        from pytestqt.qtbot import QtBot
    except ImportError:  # no pytest-qt: no Qt tests
        return
    import functools

    for name in ("waitUntil", "waitSignal", "waitSignals", "waitCallback", "waitExposed", "waitActive"):
        real = getattr(QtBot, name)
        if getattr(real, "_generous", False):
            continue

        @functools.wraps(real)
        def wait(self, *args, _real=real, timeout=5000, **kwargs):
            if timeout is not None and 0 < timeout < WAIT_BOUND_MS:
                timeout = WAIT_BOUND_MS
            return _real(self, *args, timeout=timeout, **kwargs)

        wait._generous = True
        setattr(QtBot, name, wait)


_generous_qt_waits()


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """No automatic garbage collection while the tests are collected: importing ~300 test modules (and rewriting
    their asserts on a first run) makes ~200,000 objects that live until the process ends and little cyclic
    garbage, so the collector's passes over them found nothing to free; :func:`pytest_collection_finish` collects
    once before it freezes them (decision 0497)."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    finally:
        if was:
            gc.enable()


def pytest_collection_finish(session):
    """Leave what the session holds once its tests are collected (the imports, the collected items, ~200,000
    objects) out of the cyclic garbage collector's passes for the rest of the session (``gc.freeze``, after one
    collection so that no garbage is frozen).  Every full collection walks every tracked object: the emulator's
    ``release_graphs``, the GUI's exports and the collector's own oldest-generation passes make ~120 of them in a
    whole run (~0.1 s of each walked these objects).  They live until the process ends, so freezing them keeps
    nothing alive that would have been freed; what the tests create is collected as before.  The GUI folder's
    per-module freeze (tests/gui/conftest.py) hands everything back to the collector when its first module ends
    (``gc.unfreeze``); the first test after the GUI folder freezes again (:func:`pytest_runtest_setup`)."""
    _freeze_what_lives()


def _freeze_what_lives() -> None:
    import gc

    gc.collect()
    gc.freeze()


_after_gui = [False, False]  # (a GUI test ran, the freeze after the GUI folder done)


def pytest_runtest_setup(item):
    """The first test after the GUI folder's tests freezes what the session holds again: the GUI folder's
    per-module ``gc.unfreeze`` handed the collection-time objects back, and the Qt and pyqtgraph imports joined them.
    Its modules' fixtures are torn down by then, and it collects before it freezes, so what is frozen lives on: the session's
    fixtures and imports (decision 0497)."""
    in_gui = item.nodeid.startswith("tests/gui/")
    if in_gui:
        _after_gui[0] = True
    elif _after_gui[0] and not _after_gui[1]:
        _after_gui[1] = True
        _freeze_what_lives()


@pytest.fixture(autouse=True)
def _collect_due_garbage():
    """Once a test has started the GUI, automatic garbage collection is off (popvision_lite.gui.gui_thread_gc)
    and a GUI-thread timer collects; tests that do not run the event loop get the due collections here."""
    yield
    collector = sys.modules.get("popvision_lite.gui.gui_thread_gc")
    if collector is not None:
        collector.collect_due()


@pytest.fixture(autouse=True)
def _library_logger_as_imported():
    """A command run in process (``main(argv)``) points the ``popvision_lite`` logger at stderr with its flags'
    level (cli/logs.py); the next test gets the logger as a program that imports the package finds it."""
    yield
    import logging

    log = logging.getLogger("popvision_lite")
    for h in list(log.handlers):
        if getattr(h, "_popvision_cli_handler", False):
            log.removeHandler(h)
    log.setLevel(logging.NOTSET)


@pytest.fixture(scope="session")
def pod_profile(tmp_path_factory):
    """A pod-scale run in small: BERT-tiny (4 layers) pipelined over 2 stages x 2 replicas, 16 micro-batches a
    step (so the steady state runs 14 times and the profile stores one of them), timing only, on the tests'
    device with fewer tiles (decision 0395: a pipelined run's behaviour does not depend on 1,472 tiles)."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model

    path = tmp_path_factory.mktemp("pod") / "pod.pvl"
    # a 2,048-token vocabulary: the embedding and head of 30,522 would not fit the test device's first IPU
    cfg = make_config("bert-tiny", layers=4, batch=4, seq=64, ipus=4, replicas=2, pipeline_stages=2, grad_accum=16,
                      recompute=True, vocab=2048)
    run_model(cfg, SMALL_DEVICE, timing_only=True, profile_path=path)
    return path


# the config of ``resnet50_deep`` but for ``recompute`` and ``outline``: ResNet-tiny's widths (hidden 4, image 32)
RESNET50_DEEP = dict(layers=50, batch=4)
COMPOSED = dict(grad_accum=2, optimizer="momentum")  # ``resnet50_deep``'s composed steps


@pytest.fixture(scope="session")
def resnet50_deep():
    """``get(outline, recompute, graph_functions=True, composed=False)``: a timing-only training step of ResNet-50's
    depth at ResNet-tiny's widths (hidden 4, image 32) and micro-batch 4 on the tests' device with fewer tiles, each
    build emulated at most once per session.  ResNet-50 is the shallowest depth with identical blocks (16 blocks of
    8 kinds; ResNet-14's 4 and ResNet-26's 8 blocks are each of another kind), so ``outline`` True builds one program
    per block kind and calls it per block, False builds every block; ``graph_functions`` False builds every batch
    norm in place instead of calling one graph function per operand signature (as ``emulate`` does).  ``composed``
    True is the same build in a step that accumulates 2 micro-batches under momentum (``COMPOSED``: the training
    composition, its training state per IPU); asked before its plain build, it is that build's reused graph (the
    composition alone, as ``run_model`` reuses a kept graph), so it costs no build of its own.  Read by the
    outlining tests (tests/emulator/models/test_resnet.py: the outlining test reads the recomputed builds
    without graph functions, composed), the GPU pass of outlined and recomputed runs
    (tests/analysis/test_verdict_pipeline.py) and the op list from the build (tests/test_gpu_op_profile.py); each
    build held through the session is ~10-30 MB resident."""
    from popvision_lite.emulator.models import emulated, resnet
    from popvision_lite.emulator.models.config import make_config

    runs = {}

    def get(outline: bool, recompute: bool, graph_functions: bool = True, composed: bool = False):
        key = outline, recompute, graph_functions, composed
        if key not in runs:
            kw = dict(RESNET50_DEEP, recompute=recompute, outline=outline)
            # the graph a run keeps is reused by the next run of its config, which does not hold this switch:
            # each build starts and ends with no whole graph kept
            emulated._GRAPH_CACHE.clear()
            saved, resnet.GRAPH_FUNCTIONS = resnet.GRAPH_FUNCTIONS, graph_functions
            try:
                if not composed or key[:3] + (False,) not in runs:
                    runs[key[:3] + (False,)] = emulated.run_model(make_config("resnet-tiny", **kw), SMALL_DEVICE,
                                                                  timing_only=True)
                if composed:  # right after the plain build: its kept graph; else a build of its own
                    runs[key] = emulated.run_model(make_config("resnet-tiny", **kw, **COMPOSED), SMALL_DEVICE,
                                                   timing_only=True)
            finally:
                resnet.GRAPH_FUNCTIONS = saved
                emulated._GRAPH_CACHE.clear()
        return runs[key]

    return get


@pytest.fixture(scope="session")
def pod16_bert_large(tmp_path_factory):
    """The MLPerf v1.1 IPU-POD16 BERT-Large submission emulated once per session, as both its readers run it:
    ``profile``, the file of ``popvision-lite emulate --config sample_configs/mlperf_v1.1_pod16_bert_large.toml
    --timing-only`` (bench/doc_numbers.py: the numbers the README and docs quote), and ``prediction``, the
    validation report's row of the same submission (``mlperf_validation.predict`` of gc-v1.1-pod16-bert-closed:
    the residual table).  The row runs right after the command, so it reuses the replica graph the command
    built (a run that changes nothing but what the composition applies, as the report's rows do); both
    graphs are freed before the session goes on."""
    from types import SimpleNamespace

    from bench.doc_numbers import emulate_pod16_bert
    from popvision_lite import mlperf_validation as mv
    from popvision_lite.emulator.models.emulated import release_graphs

    profile = emulate_pod16_bert(tmp_path_factory.mktemp("pod16_bert") / "pod16.pvl")
    case = next(c for c in mv.build_cases(mv.measured_rows(None), overrides=mv.row_configs())
                if c.id == "gc-v1.1-pod16-bert-closed")
    prediction = mv.predict(case)
    release_graphs()
    return SimpleNamespace(profile=profile, case=case, prediction=prediction)
