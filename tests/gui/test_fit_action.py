"""Find a configuration that fits… (gui/actions/fit.py): the Summary of a run that does not fit says what binds it
and offers the search; the search runs off the GUI thread with its progress and time left in the status bar and
Cancel; its answer opens the fitting configuration's emulation.  The search itself (real emulation) is
tests/sweep/test_fit.py's (the session's ``fit_small``); here ``fit_advice`` is a stand-in that reports progress and
hands back an answer of the same types (``advice``: two fitting options whose emulations are copies of bundled
samples that fit), so the tests follow the window's wiring without a search."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialog

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"
OOM = SAMPLES / "bert_large_1ipu_oom.pvl"


@pytest.fixture(scope="module")
def advice(tmp_path_factory):
    """A fit advisor's answer for OOM as ``sweep.fit.fit_advice`` returns one (sweep/fit_result.py): the cheapest
    option first, a second one without a price; each option's profile is its own copy of a sample that fits."""
    import shutil

    from popvision_lite.sweep.fit_result import FitAdvice, Option

    folder = tmp_path_factory.mktemp("fit")
    options = []
    for i, (sample, chips, cost) in enumerate([("mlp_mk2", 2, 1.25), ("bert_tiny_mk2", 4, float("nan"))]):
        profile = folder / f"point_{i}.pvl"
        shutil.copyfile(SAMPLES / f"{sample}.pvl", profile)
        placement = f"1 replica x {chips} stages = {chips} IPUs"
        options.append(Option(text=f"{placement}, recompute", placement=placement, settings="recompute",
                              run_config={"model": "bert-large", "device": "ipu-mk2", "timing_only": True},
                              chips=chips, samples_per_second=100.0 / chips, seconds_per_sample=chips / 100.0,
                              cost_per_million_usd=cost, cost_note="", peak_tile_memory_pct=80.0 + i,
                              profile=str(profile), changes={"pipeline_stages": chips, "recompute": True}))
    return FitAdvice(model="bert-large", device="ipu-mk2", max_ipus=2, global_batch=8, base_fits=False,
                     base_binding=None, best=options[0], options=options, trials=[], folder=str(folder),
                     emulations=2)


def _doc(path):
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.profile.reader import open_profile

    create_app()
    return Document(open_profile(path), path)


def test_the_summary_says_what_binds_and_offers_the_search(qtbot):
    from popvision_lite.analysis.fit_constraint import binding_constraint
    from popvision_lite.gui.views.summary_view import SummaryView
    from tests.support.qt import show_view

    doc = _doc(OOM)
    try:
        view = show_view(qtbot, SummaryView(doc))
        head = binding_constraint(doc.profile).headline()
        assert "Why it does not fit" in view.info.text() and "total bytes" in view.info.text()
        assert head.split(":")[0] in view.info.text()
        assert view.fit_button.isVisible() and view.fit_button.text() == "Find a configuration that fits…"
        assert f"popvision-lite fit {OOM}" in view.verdict.body.text()   # the verdict's no-fit headline names it
    finally:
        doc.close()
    fits = _doc(SAMPLES / "bert_tiny_mk2.pvl")
    try:
        view = show_view(qtbot, SummaryView(fits))
        assert not view.fit_button.isVisible() and "Why it does not fit" not in view.info.text()
    finally:
        fits.close()


def _search_fake(advice, gate: threading.Event | None = None):
    """A stand-in for sweep.fit.fit_advice that reports progress, waits for ``gate`` (or Cancel) and returns
    ``advice``."""
    def fake(base, progress=None, should_cancel=None, **options):
        assert Path(str(base)) == OOM and options["max_ipus"] == 16 and options["out"]
        progress(0.5, "3 of ~6 emulations (round of 2: 1/2), about 10 s left")
        while gate is not None and not gate.is_set():
            if should_cancel():
                return dataclasses.replace(advice, cancelled=True)
            gate.wait(0.02)
        return advice
    return fake


def test_the_search_runs_off_the_gui_thread_and_opens_its_answer(qtbot, window, advice, monkeypatch, tmp_path):
    from popvision_lite.gui.actions import fit as fit_action
    from popvision_lite.sweep import fit as fit_module

    gate = threading.Event()
    monkeypatch.setattr(fit_module, "fit_advice", _search_fake(advice, gate))
    monkeypatch.setattr(fit_action.FitDialog, "exec", lambda self: (self.max_ipus.setValue(16),
                                                                    self.folder.setText(str(tmp_path / "f")),
                                                                    QDialog.Accepted)[-1])
    window.open_paths([OOM])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=30000)
    summary = window.current_document_widget().view("summary")
    summary.fit_button.click()                   # the Summary's button is the window's Run menu action
    qtbot.waitUntil(lambda: "about 10 s left" in window.status_label.text(), timeout=30000)
    assert window.progress.value() == 500 and window.busy()
    gate.set()
    qtbot.waitUntil(lambda: getattr(window, "_fit_result", None) is not None, timeout=30000)
    dlg = window._fit_result
    qtbot.addWidget(dlg)
    assert dlg.model.rowCount() == len(advice.options) and advice.best.text in dlg.details.toPlainText()
    assert dlg.open_option(0) == advice.best.profile
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 2, timeout=30000)
    assert window.current_document().profile.run["fits"]
    assert Path(window.current_document().path) == Path(advice.best.profile)   # the cheapest option's emulation


def test_cancel_stops_the_search(qtbot, window, advice, monkeypatch, tmp_path):
    from popvision_lite.gui.actions import fit as fit_action
    from popvision_lite.sweep import fit as fit_module

    monkeypatch.setattr(fit_module, "fit_advice", _search_fake(advice, threading.Event()))
    window.open_paths([OOM])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=30000)
    cancelled = []
    w = fit_action.start_fit(window, window.current_document(), {"max_ipus": 16, "out": str(tmp_path / "f")})
    w.signals.cancelled.connect(lambda: cancelled.append(True))
    qtbot.waitUntil(lambda: "left" in window.status_label.text(), timeout=30000)
    window.cancel_tasks()
    qtbot.waitUntil(lambda: bool(cancelled) and not window.busy(), timeout=30000)
    assert getattr(window, "_fit_result", None) is None


def test_a_run_that_fits_is_not_searched(qtbot, window, dialogs):
    window.open_paths([SAMPLES / "bert_tiny_mk2.pvl"])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=30000)
    # the Summary's verdict may still run on a worker thread: idle first, so "busy" below can only be a search
    qtbot.waitUntil(lambda: not window.busy(), timeout=30000)
    window.act_fit.trigger()
    assert dialogs and "fits in tile memory already" in dialogs[-1][2] and not window.busy()


def test_the_result_dialog_says_why_when_nothing_fits(qtbot, advice):
    from popvision_lite.analysis.fit_constraint import binding_constraint
    from popvision_lite.gui.actions.fit import FitResultDialog
    from popvision_lite.profile.reader import open_profile

    with open_profile(OOM) as p:
        b = binding_constraint(p)
    none = dataclasses.replace(advice, best=None, options=[], leanest=[("1 replica x 1 stage = 1 IPU", b)])
    dlg = FitResultDialog(none)
    qtbot.addWidget(dlg)
    assert dlg.model.rowCount() == 0 and not dlg.open_button.isEnabled()
    assert "Nothing fits up to 2 IPUs" in dlg.details.toPlainText() and b.headline() in dlg.details.toPlainText()


@pytest.mark.parametrize("name", ["run.pvl"])
def test_the_default_folder_is_next_to_the_profile_and_never_taken(tmp_path, name):
    from popvision_lite.gui.actions.fit import default_folder

    p = tmp_path / name
    assert default_folder(p) == tmp_path / "run_fit"
    (tmp_path / "run_fit").mkdir()
    assert default_folder(p) == tmp_path / "run_fit_2"
    assert default_folder(OOM).parent != SAMPLES   # never into the bundled samples
