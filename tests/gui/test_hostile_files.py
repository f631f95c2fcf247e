"""The app with hostile-but-valid profiles (issue 19): a duplicate program id, a parent cycle, prog_id
2^31-1, a 1 MiB op name, external storage, a damaged Blosc header, a FIFO.  Each gives a dialog (or the
affected view says what is wrong) naming the file; nothing raises in a Qt slot (pytest-qt fails on that),
nothing hangs, and the window stays usable and quits on Ctrl+Q."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import fuzz_hostile as fh  # noqa: E402
from bench import fuzz_profiles as fz  # noqa: E402

pytestmark = pytest.mark.gui



def _programs(base, dst, fn):
    dst.write_bytes(base.read_bytes())
    with fz._h5(dst) as h:
        v = h["tables/programs/prog_id"][()].astype(np.int64)
        p = h["tables/programs/parent_id"][()].astype(np.int64)
        fn(v, p)
        fh._replace(h, "tables/programs/prog_id", data=v)
        fh._replace(h, "tables/programs/parent_id", data=p)
    return dst


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("guihostile")
    base = fz.make_base(folder)
    files = {
        "dup_id": _programs(base, folder / "dup_id.pvl", lambda v, p: v.__setitem__(3, 2)),
        "cycle": _programs(base, folder / "cycle.pvl", lambda v, p: (p.__setitem__(2, 3), p.__setitem__(3, 2))),
        "huge_id": _programs(base, folder / "huge_id.pvl", lambda v, p: v.__setitem__(len(v) - 1, 2 ** 31 - 1)),
    }
    long_name = folder / "long_name.pvl"
    long_name.write_bytes(base.read_bytes())
    with fz._h5(long_name) as h:
        fh.set_category(h, "tables/ops/name.categories", 1, b"y" * (1 << 20))
    files["long_name"] = long_name
    files["external"] = folder / "external.pvl"
    fh.h_external_storage(random.Random(0), base, files["external"])
    blosc = folder / "blosc.pvl"
    blosc.write_bytes(base.read_bytes())
    import struct

    with fz._h5(blosc) as h:
        off = h["arrays/memory"].id.get_chunk_info(0).byte_offset
    with open(blosc, "r+b") as f:
        f.seek(off + 2)
        f.write(bytes([2]))
        f.seek(off + 4)
        f.write(struct.pack("<II", 64 << 20, 0))
        f.write(struct.pack("<I", (64 << 20) + 16))
    files["blosc"] = blosc
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "fifo.pvl")
        files["fifo"] = folder / "fifo.pvl"
    return files


def _settle(qtbot, window):
    qtbot.waitUntil(lambda: not window.busy(), timeout=20000)


def test_hostile_files_give_a_dialog_and_the_app_stays_usable(qtbot, window, hostile_files, dialogs,
                                                              small_profile):
    for key, path in hostile_files.items():
        n = len(dialogs)
        window.open_paths([path])
        _settle(qtbot, window)
        texts = [m[2] for m in dialogs[n:]]
        if window.doc_tabs.count():  # opened: the damage shows when a view reads the table
            dw = window.current_document_widget()
            for k in dw.keys():
                window.show_view(k)
                qtbot.wait(20)
                _settle(qtbot, window)
            for view in dw.built_views().values():
                if hasattr(view, "text") and callable(view.text):
                    texts.append(view.text())
            texts += [m[2] for m in dialogs[n:]]
            window.close_tab(0)
        assert any(path.name in t for t in texts), (key, texts)
        assert all("Traceback" not in t and "bug in popvision-lite" not in t for t in texts), (key, texts)
        assert all(len(t) < 20_000 for t in texts), key
        assert window.isVisible()
    window.open_paths([small_profile])  # still usable
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=20000)
    _settle(qtbot, window)
    window.show_view("memory")
    _settle(qtbot, window)
    window.act_quit.trigger()  # Ctrl+Q's action closes the window
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=10000)
