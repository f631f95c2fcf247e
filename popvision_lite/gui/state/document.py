"""One open profile in the window: the profile, its selection and cached analysis results."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from popvision_lite.gui.state import analysis_store
from popvision_lite.gui.state.selection import SelectionModel


class Document(QObject):
    """Holds ``profile`` (a ``popvision_lite.profile.reader.Profile``), ``path``, ``title``,
    one :class:`SelectionModel` shared by all its views, and a cache of analysis results.

    Views compute through :meth:`cached` so two views asking for the same analysis (or a
    view rebuilt after a theme change) pay once::

        summary = document.cached("summary", summarize, document.profile)

    Results that are plain data (``analysis_store.SHARED``) are also kept per profile file in the process's
    :data:`analysis_store.STORE`, so another document on the same file (unchanged) reuses them.
    """

    closing = Signal()
    # the GPU (spec id) and GPU count the verdict is shown for; the Summary's verdict panel sets it and the
    # Roofline's verdict line follows it, so the two never state different comparisons
    verdict_choice_changed = Signal(str, int)

    def __init__(self, profile, path: str | Path | None = None, title: str | None = None,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.profile = profile
        self.path = Path(path if path is not None else getattr(profile, "path", "profile"))
        self.title = title or self.path.name
        self.selection = SelectionModel(self)
        self._cache: dict[Any, Any] = {}
        self.identity = analysis_store.identity_of(profile)  # the file's, for the process's analysis store
        self._lock = threading.Lock()  # the loader may prefill the cache from a worker thread
        self.verdict_choice: tuple[str, int] | None = None
        self.verdict_precision: str | None = None   # the precision the verdict's GPUs train in (None: the run's)

    def set_verdict_choice(self, gpu: str, count: int, precision: str | None = None) -> None:
        if self.verdict_choice != (gpu, int(count)) or self.verdict_precision != precision:
            self.verdict_choice = (gpu, int(count))
            self.verdict_precision = precision
            self.verdict_choice_changed.emit(gpu, int(count))

    def cached(self, key, fn: Callable[..., Any], *args, **kwargs):
        """Return the cached value for ``key``, computing ``fn(*args, **kwargs)`` on first use (unless the
        process's analysis store has it for this file)."""
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        value = analysis_store.STORE.computed(self.identity, key, fn, *args, **kwargs)
        with self._lock:
            return self._cache.setdefault(key, value)

    def has_cached(self, key) -> bool:
        with self._lock:
            if key in self._cache:
                return True
        value = analysis_store.STORE.get(self.identity, key)
        if value is analysis_store.MISSING:
            return False
        with self._lock:
            self._cache.setdefault(key, value)
        return True

    def put_cached(self, key, value) -> None:
        with self._lock:
            self._cache[key] = value
        analysis_store.STORE.put(self.identity, key, value)

    def close(self) -> None:
        self.closing.emit()
        self._cache.clear()
        close = getattr(self.profile, "close", None)
        if close is not None:
            close()
