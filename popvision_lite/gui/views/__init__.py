"""The views shown for each open document, in display order.

``VIEW_REGISTRY`` is a list of ``(key, title, factory)``; ``factory(document) -> QWidget``.
The main window builds one tab per entry inside each document tab, in this order.

Adding a view: create ``gui/views/<key>_view.py`` (or a package ``gui/views/<key>/`` when the view has
several jobs, as execution/ and roofline/ do) with ``class XView(QWidget)`` taking ``XView(document)``,
then add (or keep) one line below.  Entries use :func:`lazy` so that a
view module is imported only when a document is opened; if the module does not exist
yet the view is simply left out, and if it raises while being built the tab shows the
error instead of taking the window down.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


class ViewNotAvailable(Exception):
    """The module of a registered view does not exist (yet)."""


def lazy(module: str, cls: str) -> Callable:
    """A factory that imports ``module`` on first use and builds ``cls(document)``."""

    def factory(document):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                raise ViewNotAvailable(module) from exc
            raise
        return getattr(mod, cls)(document)

    factory.module = module  # type: ignore[attr-defined]
    factory.cls = cls  # type: ignore[attr-defined]
    return factory


_P = "popvision_lite.gui.views."

VIEW_REGISTRY: list[tuple[str, str, Callable]] = [
    ("summary", "Summary", lazy(_P + "summary_view", "SummaryView")),
    ("insights", "Insights", lazy(_P + "insights_view", "InsightsView")),
    ("memory", "Memory", lazy(_P + "memory", "MemoryView")),
    ("liveness", "Liveness", lazy(_P + "liveness_view", "LivenessView")),
    ("program_tree", "Program tree", lazy(_P + "program_tree_view", "ProgramTreeView")),
    ("operations", "Operations", lazy(_P + "operations_view", "OperationsView")),
    ("execution", "Execution", lazy(_P + "execution", "ExecutionView")),
    ("roofline", "Roofline", lazy(_P + "roofline", "RooflineView")),
]
