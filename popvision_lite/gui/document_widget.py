"""One document's tab in the main window: the registered views (``gui/views/__init__.py: VIEW_REGISTRY``) as
inner tabs, each built the first time it is shown; a view whose module is missing is left out and one
that fails to build shows why instead of taking the window down (docs/decisions/0017)."""

from __future__ import annotations

import importlib.util
import traceback
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from popvision_lite.errors import PopvisionError
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.text import plain_label
from popvision_lite.gui.views import VIEW_REGISTRY, ViewNotAvailable


def _view_available(factory) -> bool:
    module = getattr(factory, "module", None)
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class DocumentWidget(QWidget):
    """One document's tab: the registered views as inner tabs, each built on first show."""

    def __init__(self, document: Document, parent=None):
        super().__init__(parent)
        self.document = document
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self._entries: list[tuple[str, str, Callable]] = []
        self._views: dict[str, QWidget] = {}
        seen = set()
        for key, title, factory in VIEW_REGISTRY:
            if key in seen or not _view_available(factory):
                continue
            seen.add(key)
            holder = QWidget()
            QVBoxLayout(holder).setContentsMargins(0, 0, 0, 0)
            idx = self.tabs.addTab(holder, title)
            n = len(self._entries) + 1
            if n <= 9:
                self.tabs.setTabToolTip(idx, f"{title} (Ctrl+{n})")
            self._entries.append((key, title, factory))
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tabs)
        self.tabs.currentChanged.connect(self._ensure_built)
        if self._entries:
            self._ensure_built(0)

    def keys(self) -> list[str]:
        return [k for k, _, _ in self._entries]

    def _ensure_built(self, index: int) -> QWidget | None:
        if index < 0 or index >= len(self._entries):
            return None
        key, title, factory = self._entries[index]
        if key in self._views:
            return self._views[key]
        holder = self.tabs.widget(index)
        try:
            view = factory(self.document)
        except ViewNotAvailable:
            view = plain_label(f"The {title} view is not available in this build.")
        except Exception as exc:  # a broken view must not take the window down
            if not isinstance(exc, PopvisionError):  # a damaged profile is said on the tab; a bug also here
                traceback.print_exc()
            view = plain_label(f"The {title} view failed to build:\n{type(exc).__name__}: {exc}")
            view.setWordWrap(True)
            view.setAlignment(Qt.AlignCenter)
        holder.layout().addWidget(view)
        self._views[key] = view
        return view

    def view(self, key: str) -> QWidget | None:
        """The view registered as ``key`` (built now if it was not yet), or None."""
        for i, (k, _, _) in enumerate(self._entries):
            if k == key:
                return self._ensure_built(i)
        return None

    def show_view(self, key: str) -> QWidget | None:
        for i, (k, _, _) in enumerate(self._entries):
            if k == key:
                self.tabs.setCurrentIndex(i)
                return self._ensure_built(i)
        return None

    def built_views(self) -> dict[str, QWidget]:
        return dict(self._views)
