"""The process's analysis store (gui/state/analysis_store.py, decision 0456): a second document on the same,
unchanged file reuses the first one's analyses; a file rewritten - in place, even with its old times put back -
is analysed afresh; only plain data is shared (never a value that reads its profile later); the store is
bounded."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


@pytest.fixture
def store(fresh_analyses):
    return fresh_analyses


def _doc(path):
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.profile.reader import open_profile

    create_app()
    return Document(open_profile(path), path)


def _counting(calls, fn):
    def f(*a):
        calls.append(a)
        return fn(*a)
    return f


def test_a_second_document_on_the_same_file_reuses_the_analyses(store, tmp_path):
    from popvision_lite.analysis.summary import summarize

    path = tmp_path / "run.pvl"
    shutil.copyfile(SAMPLES / "mlp_bow.pvl", path)
    calls = []
    a = _doc(path)
    first = a.cached("summary", _counting(calls, summarize), a.profile)
    a.close()
    b = _doc(path)
    try:
        assert b.has_cached("summary") and b.cached("summary", _counting(calls, summarize), b.profile) is first
        assert len(calls) == 1
        # a key that is not plain data (it reads its profile later) is computed per document
        assert not b.has_cached("tile_memory")
    finally:
        b.close()


@pytest.mark.parametrize("keep_times", [False, True])
def test_a_file_rewritten_in_place_is_analysed_afresh(store, tmp_path, keep_times):
    from popvision_lite.analysis.summary import summarize

    path = tmp_path / "run.pvl"
    shutil.copyfile(SAMPLES / "mlp_bow.pvl", path)
    a = _doc(path)
    old = a.cached("summary", summarize, a.profile)
    a.close()
    st = os.stat(path)
    with open(path, "r+b") as f:   # the same inode: another run's bytes written over it
        f.write((SAMPLES / "bert_tiny_mk2.pvl").read_bytes())
        f.truncate()
    if keep_times:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_ino == st.st_ino
    b = _doc(path)
    try:
        assert not b.has_cached("summary")
        new = b.cached("summary", summarize, b.profile)
        assert (new.model, new.total_cycles) == (b.profile.run["model"], summarize(b.profile).total_cycles)
        assert (new.model, new.total_cycles) != (old.model, old.total_cycles)
    finally:
        b.close()


def test_the_store_keeps_the_most_recent_files_within_its_budget():
    from popvision_lite.gui.state.analysis_store import MISSING, AnalysisStore

    s = AnalysisStore(max_profiles=2, max_file_bytes=1000)
    f1, f2, f3 = ((0, i, 300, 0, 0, "x") for i in range(3))
    s.put(f1, "summary", 1)
    s.put(f2, "summary", 2)
    assert s.get(f1, "summary") == 1      # f1 used last: f2 is the oldest now
    s.put(f3, "summary", 3)
    assert s.files() == [f1, f3] and s.get(f2, "summary") is MISSING
    s.put((0, 9, 900, 0, 0, "x"), "summary", 4)  # 900 + 300 bytes is over the budget: only it stays
    assert len(s.files()) == 1
    s.put((0, 10, 5000, 0, 0, "x"), "summary", 5)  # larger than the whole budget: not kept
    assert s.files() == []
    s.put(None, "summary", 6)                       # a run in memory: never shared
    s.put(f1, "tile_memory", 7)                     # not plain data: never shared
    assert s.files() == []


def _reaches(value, targets: tuple[type, ...], limit: int = 200_000) -> bool:
    """Whether an object of one of ``targets`` is reachable from ``value`` (modules and classes not followed)."""
    import types

    seen, todo = set(), [value]
    while todo and len(seen) < limit:
        o = todo.pop()
        if id(o) in seen or isinstance(o, types.ModuleType | type):
            continue
        seen.add(id(o))
        if isinstance(o, targets):
            return True
        todo.extend(gc.get_referents(o))
    return False


@pytest.mark.parametrize("sample", ["bert_large_1ipu_oom.pvl", "bert_mini_4ipu_pipeline.pvl"])
def test_what_is_shared_never_reads_its_profile_later(store, qtbot, sample):
    """Every view built on a document: each value the store keeps holds no Profile and no HDF5 object, so it
    stays whole after its document closes."""
    import h5py

    from popvision_lite.gui.document_widget import DocumentWidget
    from popvision_lite.profile.reader import Profile

    doc = _doc(SAMPLES / sample)
    # built, not shown: what the views compute is the claim, and each computes it when built (shown, every view
    # was laid out and painted for nobody)
    dw = DocumentWidget(doc)
    qtbot.addWidget(dw)
    for k in dw.keys():
        dw.show_view(k)
    qtbot.waitUntil(lambda: dw.view("roofline").is_ready(), timeout=30000)
    keys = set(store._by_file[doc.identity])
    assert {"summary", "ops_table", "execution.step_index"} <= {k if isinstance(k, str) else k[0] for k in keys}
    for key in keys:
        assert not _reaches(store._by_file[doc.identity][key], (Profile, h5py.File, h5py.Dataset)), key
    dw.close()
    doc.close()


def test_a_wrapped_profile_shares_nothing(store):
    """A stand-in that changes what its profile reads (tests/gui/test_execution_view.py's shifted steps) passes
    the file's attributes on, its identity among them: it must not reuse, or leave, the file's analyses."""
    from popvision_lite.gui.state.document import Document
    from popvision_lite.profile.reader import open_profile

    class Wrapper:
        def __init__(self, p):
            self._p = p

        def __getattr__(self, name):
            return getattr(self._p, name)

    with open_profile(SAMPLES / "mlp_bow.pvl") as p:
        assert Wrapper(p).identity == p.identity is not None
        doc = Document(Wrapper(p))
        doc.cached("summary", lambda: "shifted")
        assert doc.identity is None and store.files() == []
        assert Document(p).identity == p.identity and not Document(p).has_cached("summary")
