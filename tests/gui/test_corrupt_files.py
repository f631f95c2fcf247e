"""The app opening corrupted profiles (from bench/fuzz_profiles' mutations): the error dialog (patched)
names the file, the window stays alive and usable.  Files whose header is intact but whose bulk data is
damaged open, and then every view is shown: no exception may escape into the Qt event loop (pytest-qt
fails the test on one), and the damage is reported (dialog or the view's message), never a crash."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the bench package lives at the repo root
from bench import fuzz_profiles as fz  # noqa: E402

pytestmark = pytest.mark.gui
# mutation kinds whose seeded cases fail at open (header / structure damage)
OPEN_KINDS = ("truncate", "drop", "header", "other_format", "array_shape", "rename")


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("guifuzz")
    base = fz.make_base(folder)
    cases = fz.make_cases(base, folder / "cases", 60, seed=5)
    return base, cases




def _settle(qtbot, window):
    qtbot.waitUntil(lambda: not window.busy(), timeout=20000)


def test_corrupt_files_show_the_error_dialog_and_window_survives(qtbot, window, fuzz_dir, dialogs, small_profile):
    _, cases = fuzz_dir
    picked = []
    for kind in OPEN_KINDS:  # the first case of each kind that the reader refuses
        for c in cases:
            if c["kind"] == kind and c["path"] and fz.classify(c["path"])[0] == "profile_error":
                picked.append(c)
                break
    assert len(picked) >= 5
    for c in picked:
        n = len(dialogs)
        window.open_paths([c["path"]])
        _settle(qtbot, window)
        if window.doc_tabs.count():  # header intact: the damage shows when the views read
            _visit_all_views(qtbot, window)
            window.close_tab(0)
            continue
        assert len(dialogs) == n + 1, c
        _, title, message = dialogs[-1][:3]
        assert Path(c["path"]).name in message, message
        assert "Traceback" not in message and "bug in popvision-lite" not in message, message
        assert window.isVisible()
    # still usable afterwards
    window.open_paths([small_profile])
    qtbot.waitUntil(lambda: window.doc_tabs.count() >= 1, timeout=20000)


def _visit_all_views(qtbot, window):
    dw = window.current_document_widget()
    for key in dw.keys():
        window.show_view(key)
        qtbot.wait(30)
        _settle(qtbot, window)
    assert window.isVisible()


def _scribble_chunk(path: Path, dataset: str) -> None:
    import h5py

    with h5py.File(path, "r") as h:
        off = h[dataset].id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as fh:
        fh.seek(off)
        fh.write(b"\xff" * 64)


@pytest.mark.parametrize("dataset", ["arrays/step_tile_cycles", "arrays/liveness_tile_bytes"])
def test_damaged_bulk_data_opens_and_every_view_survives(qtbot, window, fuzz_dir, dialogs, tmp_path, dataset):
    """Header and tables intact, one compressed chunk of bulk data destroyed: the profile opens; showing
    every view reports the damage (naming the file) instead of raising."""
    import popvision_lite as pvl
    from popvision_lite.errors import ProfileError

    base, _ = fuzz_dir
    f = tmp_path / "damaged.pvl"
    shutil.copy(base, f)
    _scribble_chunk(f, dataset)
    with pvl.open(f) as p:  # the reader does see the damage
        with pytest.raises(ProfileError):
            if "liveness" in dataset:
                p.liveness.tile_bytes()
            else:
                p.step_tiles.window(0, 10)
    window.open_paths([f])
    _settle(qtbot, window)
    if window.doc_tabs.count() == 0:  # refused at open: a dialog naming the file
        assert dialogs and "damaged.pvl" in dialogs[-1][2]
        return
    _visit_all_views(qtbot, window)
    dw = window.current_document_widget()
    texts = [m[2] for m in dialogs]
    for view in dw.built_views().values():
        if hasattr(view, "text") and callable(view.text):
            texts.append(view.text())
    assert window.isVisible()
    assert any("damaged.pvl" in t for t in texts), texts  # reported, in a dialog or in place of the view
