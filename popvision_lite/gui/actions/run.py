"""Run > New emulation… and Run > Re-run with…: what-if runs from the window (menu entries, the run on a worker and
the result opened; the dialogs are ``gui/actions/run_dialogs.py``, the settings, run config and emulator child
process ``gui/actions/emulation.py``).

"Re-run with…" takes the open profile's run config, changes one setting, runs it and opens the
result in compare mode against the original (A = original, B = re-run).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QDialog

from popvision_lite.analysis.compare import compare
from popvision_lite.analysis.summary import summarize
from popvision_lite.emulator.models.config import MODEL_NAMES
from popvision_lite.errors import ConfigError
from popvision_lite.gui.actions.emulation import (  # noqa: F401  (also the names tests use as run.X)
    NEW_EMULATION,
    change_setting,
    check_output,
    config_toml,
    default_output_folder,
    default_settings,
    free_path,
    parse_progress,
    rerun_path,
    run_emulation,
    settings_from_profile,
)
from popvision_lite.gui.actions.run_dialogs import EmulationDialog, RerunDialog
from popvision_lite.gui.compare_window import compare_documents, compare_key
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.state.loading import load_document_data
from popvision_lite.gui.text import show_error, show_info


# ----------------------------------------------------------------------------- running from the window
def start_emulation(mw, settings: dict, out, compare_with=None, argv=None, on_done=None):
    """Run on a worker (process inside); open the result, in compare mode against ``compare_with``."""
    out = str(out)

    def done(res):
        if res["returncode"] == 3:
            mw.statusBar().showMessage(f"{Path(out).name}: does not fit in tile memory (profile written)", 8000)
        if compare_with is None:
            mw.open_paths([out])
            if on_done:
                on_done(None)
            return
        open_against(mw, compare_with, out, on_done)

    return mw.run_task(run_emulation, settings, out, argv, title=f"Emulating {settings.get('model')} "
                       f"on {settings.get('device')} → {Path(out).name}", on_result=done)


def open_against(mw, doc_a, path_b, on_done=None):
    """Open ``path_b`` and show it in compare mode with the open document ``doc_a``."""
    # its Summary view's (made at open); without one, compare computes it on the worker as before
    summary_a = doc_a.cached("summary", summarize, doc_a.profile) if doc_a.has_cached("summary") else None

    def load_and_compare(task, path):  # worker thread: the window only draws
        profile, cache = load_document_data(task, path)
        try:
            task.progress(0.9, "comparing")
            cache[compare_key(path)] = compare(doc_a.profile, profile, doc_a.title, Path(path).name,
                                               summary_a=summary_a, summary_b=cache["summary"])
        except BaseException:
            profile.close()
            raise
        return profile, cache

    def loaded(res):
        profile, cache = res
        cmp = cache.pop(compare_key(str(path_b)))
        d = Document(profile, path_b)
        for k, v in cache.items():
            d.put_cached(k, v)
        doc_a.put_cached(compare_key(d.path), cmp)
        mw.add_document(d)
        win = compare_documents(mw, doc_a, d)
        if on_done:
            on_done(win)

    return mw.run_task(load_and_compare, str(path_b), title=f"Opening {Path(path_b).name}", on_result=loaded)


def starting_settings(document) -> dict | None:
    """The run settings New emulation… starts from: those of the open profile when it was emulated from a
    bundled workload or an ONNX file (its model, device, sizes and training options), else None (the
    defaults)."""
    if document is None:
        return None
    try:
        s = settings_from_profile(document.profile)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return s if s.get("onnx") or s.get("model") in MODEL_NAMES else None


def new_emulation_dialog(mw):
    folder = default_output_folder(mw.settings.value("last_dir", None))
    dlg = EmulationDialog(settings=starting_settings(mw.current_document()), out=str(free_path(folder, "run")),
                          parent=mw)
    if dlg.exec() != QDialog.Accepted:
        return None
    try:  # checked by the dialog before it closed; again here, as what runs is what these give
        check_output(dlg.output(), NEW_EMULATION)
        settings = dlg.checked_settings()
    except ConfigError as e:
        show_error(mw, "New emulation", str(e))
        return None
    return start_emulation(mw, settings, dlg.output())


def rerun_dialog(mw):
    doc = mw.current_document()
    if doc is None:
        show_info(mw, "Re-run with…", "Open a profile first.")
        return None
    base = settings_from_profile(doc.profile)
    dlg = RerunDialog(base, mw)
    if dlg.exec() != QDialog.Accepted:
        return None
    try:  # checked by the dialog before it closed
        new = dlg.checked_settings()
    except ConfigError as e:
        show_error(mw, "Re-run with…", str(e))
        return None
    name = dlg.setting()
    return start_emulation(mw, new, rerun_path(doc.path, name, new[name]), compare_with=doc)


def install(mw) -> None:
    r = mw.menus["run"]
    first = r.actions()[0] if r.actions() else None
    mw.act_new_emulation = mw._action(r, "&New emulation…", lambda: new_emulation_dialog(mw), "Ctrl+R",
                                      "Run a bundled model on the emulator (in a separate process)")
    mw.act_rerun = mw._action(r, "&Re-run with…", lambda: rerun_dialog(mw), "Ctrl+Shift+R",
                              "Re-run this profile's model with one setting changed, then compare")
    if first is not None:
        for a in (mw.act_new_emulation, mw.act_rerun):
            r.removeAction(a)
            r.insertAction(first, a)
        r.insertSeparator(first)
