"""One selection shared by every view of a document (op, program node, step range, tile set).

Views never talk to each other: they write here and listen to ``changed``.  Resolving
what a selection means (which tiles an op used, which steps a program issued) is pure
analysis code in ``popvision_lite.analysis.selection``; this object only holds state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from PySide6.QtCore import QObject, Signal


@dataclass(frozen=True)
class SelectionState:
    op_id: int | None = None
    prog_id: int | None = None
    step_range: tuple[int, int] | None = None  # [start, stop) BSP steps
    tiles: tuple[int, ...] = ()                # global tile ids
    lstep: int | None = None                   # liveness step
    source: str = ""                           # which view made it (views ignore their own echoes)


class SelectionModel(QObject):
    """Holds the current :class:`SelectionState`; emits ``changed(state)`` on every update."""

    changed = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._state = SelectionState()

    @property
    def state(self) -> SelectionState:
        return self._state

    def update(self, source: str = "", **fields) -> None:
        """Replace some fields (others keep their value) and notify listeners."""
        if "tiles" in fields and fields["tiles"] is not None:
            fields["tiles"] = tuple(int(t) for t in np.atleast_1d(fields["tiles"]))
        new = replace(self._state, source=source, **fields)
        if new != self._state:
            self._state = new
            self.changed.emit(new)

    def clear(self, source: str = "") -> None:
        self._state = SelectionState(source=source)
        self.changed.emit(self._state)
