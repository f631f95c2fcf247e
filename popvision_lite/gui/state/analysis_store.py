"""The analyses of profiles this process has open or opened lately, kept across documents (decision 0456).

A :class:`~popvision_lite.gui.state.document.Document` caches what its views compute (``Document.cached``);
this store keeps the pure-data part of those results per profile FILE, so that opening the same file again (a
second tab, compare mode, Re-run into the same file, a headless export after the window's) reuses the summary,
verdict, roofline, operations table, ... instead of reading the tables and computing them again.

A file is known by ``Profile.identity`` (profile/reader.py): the device, inode, size and change times of the
file the reader has open, and a digest of its first and last 64 KiB.  A file rewritten (in place or renamed
over) is another identity, so its analyses are computed afresh; a profile without one (a run still in memory)
is never shared.  Only results that are plain data are shared (:data:`SHARED`): never one that reads its
profile later (``TileMemory``, ``ProgramTree``), which would outlive that profile's file handle.

Bounded: the analyses of the :data:`MAX_PROFILES` most recently used files, and of files of at most
:data:`MAX_FILE_BYTES` together (a file's size stands for the size of its analyses, which are per operation
and per step, far smaller than its step x tile arrays); the least recently used go first, and a file larger
than the whole budget is not kept (its open document still caches its own).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

# the keys (or first item of a tuple key) whose values are plain data computed from the profile file and the
# key alone: summaries, tables and verdicts; checked by tests/gui/test_analysis_store.py.  Not "roofline": a
# Roofline view built over an analysis already made draws it before its first show, and its splitter then
# gives the table more width (tests/gui/test_roofline_view.py::test_labels_never_cover_points; decision 0456)
SHARED = frozenset({
    "summary", "verdict", "binding_constraint", "ops_table", "insights",
    "execution.run_totals", "execution.phase_spans", "execution.step_index", "execution.op_names",
    "liveness_curve", "liveness_ipu_spans", "always_live_variables", "liveness_tile",
})
MAX_PROFILES = 32
MAX_FILE_BYTES = 1 << 30

_MISSING = object()


def identity_of(profile) -> tuple | None:
    """The file identity of ``profile`` when it is a profile file the reader has open, else None: a run in
    memory, or a wrapper that changes what its profile reads (and would pass the file's identity on through
    attribute delegation), never shares."""
    from popvision_lite.profile.reader import Profile

    return profile.identity if type(profile) is Profile else None


def shareable(key) -> bool:
    head = key[0] if isinstance(key, tuple) and key else key
    return isinstance(head, str) and head in SHARED


class AnalysisStore:
    """identity -> {key: value}, least recently used first."""

    def __init__(self, max_profiles: int = MAX_PROFILES, max_file_bytes: int = MAX_FILE_BYTES):
        self.max_profiles, self.max_file_bytes = max_profiles, max_file_bytes
        self._by_file: OrderedDict[tuple, dict] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, identity, key, default=_MISSING) -> Any:
        """The stored value, or ``default`` (:data:`MISSING` unless given)."""
        if identity is None or not shareable(key):
            return default
        with self._lock:
            values = self._by_file.get(identity)
            if values is None or key not in values:
                return default
            self._by_file.move_to_end(identity)
            return values[key]

    def computed(self, identity, key, fn, *args, **kwargs) -> Any:
        """The stored value, else ``fn(*args, **kwargs)``, stored (where the file and key are shared)."""
        value = self.get(identity, key)
        if value is _MISSING:
            value = fn(*args, **kwargs)
            self.put(identity, key, value)
        return value

    def put(self, identity, key, value) -> None:
        if identity is None or not shareable(key):
            return
        with self._lock:
            self._by_file.setdefault(identity, {})[key] = value
            self._by_file.move_to_end(identity)
            self._trim()

    def _trim(self) -> None:
        size = sum(_file_bytes(i) for i in self._by_file)
        while self._by_file and (len(self._by_file) > self.max_profiles or size > self.max_file_bytes):
            oldest, _ = self._by_file.popitem(last=False)
            size -= _file_bytes(oldest)

    def files(self) -> list[tuple]:
        with self._lock:
            return list(self._by_file)

    def clear(self) -> None:
        with self._lock:
            self._by_file.clear()


def _file_bytes(identity: tuple) -> int:
    return int(identity[2])  # Profile.identity: (device, inode, size, ...)


MISSING = _MISSING
STORE = AnalysisStore()   # the process's
