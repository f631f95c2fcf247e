"""Fixtures of the GUI tests: a small synthetic profile, isolated QSettings, a main window (empty or with
the profile open) and a Document without a window.  Every test in this folder is marked ``gui``
(``pytest -m "not gui"`` runs the rest)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    ours: dict[Path, bool] = {}  # each test file resolved once, not each of its tests (2,400 resolves: ~0.3 s)
    for item in items:  # the hook sees every collected test: mark only this folder's
        path = Path(item.path)
        if path not in ours:
            ours[path] = HERE in path.resolve().parents
        if ours[path]:
            item.add_marker(pytest.mark.gui)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Nothing a test showed is painted again once its function has returned (:func:`stop_painting`)."""
    try:
        return (yield)
    finally:
        stop_painting(item)


def stop_painting(item) -> None:
    """Turn off updates of every widget ``item`` registered (``qtbot.addWidget``).  pytest-qt processes the
    pending events after a test's call and again before it closes the test's widgets, and those events were
    mostly repaints of windows the test had finished reading (a view resized, zoomed or refreshed on its last
    line).  A test that needs its widgets drawn has them drawn inside the test (``qtbot.wait``, an export), as
    before; fixtures tear down as before, with their widgets still alive, only not painted."""
    import shiboken6

    for ref, _ in getattr(item, "qt_widgets", ()):
        widget = ref()
        if widget is not None and shiboken6.isValid(widget):
            widget.setUpdatesEnabled(False)


@pytest.fixture(autouse=True)
def _gc_on_gui_thread(qapp):
    """The app's garbage-collection rule (popvision_lite.gui.gui_thread_gc) in every GUI test, also those that
    build widgets without create_app."""
    from popvision_lite.gui import gui_thread_gc

    gui_thread_gc.install()


@pytest.fixture(scope="module", autouse=True)
def _older_objects_frozen():
    """Every object alive when a module's tests start is left out of the cyclic garbage collector's passes until
    the module ends (``gc.freeze``; ``gc.unfreeze`` hands them back, garbage included, to the oldest generation).
    A full collection walks every tracked object, and in a long pytest process those are mostly the earlier
    tests' (imports, reports, session fixtures): a headless export collects fully once (``gui.app.delete_now``),
    the GUI-thread collector now and then, so each cost ~0.2 s here against ~0.02 s in the app alone.  What a
    test creates is collected as before, so the leak tests still see their objects go."""
    import gc

    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def small_profile(tmp_path_factory):
    """2 IPUs x 96 tiles, some tiles over capacity (so the heatmap overlay has something to show)."""
    from popvision_lite.testing.synthetic import write_synthetic

    path = tmp_path_factory.mktemp("profiles") / "small.pvl"
    write_synthetic(path, num_ipus=2, tiles_per_ipu=96, num_steps=120, seed=3, over_capacity_tiles=3)
    return path


@pytest.fixture
def settings(tmp_path):
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)


@pytest.fixture
def window(qtbot, settings):
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.main_window import MainWindow

    create_app()
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.cancel_tasks()
    qtbot.waitUntil(lambda: not win.busy(), timeout=10000)


@pytest.fixture
def opened(qtbot, window, small_profile):
    """The window with ``small_profile`` open; returns (window, DocumentWidget)."""
    window.open_paths([small_profile])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=15000)
    return window, window.doc_tabs.widget(0)


@pytest.fixture
def document(qtbot, small_profile):
    """A Document over ``small_profile`` opened directly (no window, no loader thread)."""
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.profile.reader import open_profile

    create_app()
    doc = Document(open_profile(small_profile), small_profile)
    yield doc
    doc.close()


@pytest.fixture
def fresh_analyses(monkeypatch):
    """An empty analysis store (gui/state/analysis_store.py) in place of the process's, for a test that proves
    how an analysis is computed (off the GUI thread, ...): what earlier tests computed on the same file would
    otherwise be reused."""
    from popvision_lite.gui.state import analysis_store

    store = analysis_store.AnalysisStore()
    monkeypatch.setattr(analysis_store, "STORE", store)
    return store


@pytest.fixture
def dialogs(monkeypatch):
    """The (parent, title, text) of every message box the app shows (none is modal in the tests)."""
    from tests.support.qt import capture_message_boxes

    return capture_message_boxes(monkeypatch)



@pytest.fixture(scope="session")
def tp_profile(tmp_path_factory):
    """A tensor-parallel run in small: GPT-3-small (2 layers) sharded over 2 IPUs x 2 replicas, Adam state off chip
    and sharded over the replicas (RTS), timing only: the profile stores one IPU of the group.  On the tests'
    device with fewer tiles (decision 0395): what the views say of a tensor-parallel group, the optimizer state
    per IPU and the run totals do not depend on 1,472 tiles (0.45 s of emulation against 0.95 s on the shipped
    chip, and every view draws 92 tiles an IPU)."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model
    from tests.support.devices import ID as SMALL_DEVICE  # registered by tests/conftest.py

    path = tmp_path_factory.mktemp("tp") / "tp.pvl"
    cfg = make_config("gpt3-small", layers=2, batch=1, seq=64, ipus=4, replicas=2, tensor_parallel=2, grad_accum=4,
                      recompute=True, optimizer="adam", optimizer_state="offchip", rts=True)
    run_model(cfg, SMALL_DEVICE, timing_only=True, profile_path=path)
    return path
