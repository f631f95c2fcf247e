"""Keys, zoom, pan, markers and op search of the execution view (Perfetto / Tracy conventions).

W/S zoom at the cursor, A/D pan, F fits the selection, 0 resets, M marks, / searches (Enter / Shift+Enter
next / previous), ? shows help.  A mixin of :class:`~.view.ExecutionView`: it reads the view's ranges,
index and widgets.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt

from popvision_lite.analysis import execution as ex
from popvision_lite.units import format_seconds

ZOOM_STEP = 0.8      # W zooms to 80 % of the width, S to 1 / 0.8
PAN_STEP = 0.2       # A / D pan by 20 % of the width

HELP_TEXT = """<b>Execution view keys</b><br>
<table cellspacing=4>
<tr><td><b>W</b> / <b>S</b></td><td>zoom in / out at the cursor</td></tr>
<tr><td><b>A</b> / <b>D</b></td><td>pan left / right</td></tr>
<tr><td>Ctrl+wheel</td><td>zoom time at the cursor</td></tr>
<tr><td>wheel / Shift+wheel</td><td>scroll / zoom tiles (vertical)</td></tr>
<tr><td>drag</td><td>pan</td></tr>
<tr><td>Shift+drag</td><td>select a range (summary on the right)</td></tr>
<tr><td>click</td><td>step details; selects its op in other views</td></tr>
<tr><td>double-click</td><td>expand / collapse an IPU to its tiles</td></tr>
<tr><td><b>F</b></td><td>fit the selection (range, op or step)</td></tr>
<tr><td><b>0</b></td><td>reset the view</td></tr>
<tr><td><b>M</b></td><td>mark the cursor position</td></tr>
<tr><td><b>/</b></td><td>search ops; Enter / Shift+Enter next / previous</td></tr>
<tr><td><b>?</b></td><td>this help</td></tr>
</table>"""


class KeyFilter(QObject):
    def __init__(self, view):
        super().__init__(view)
        self.view = view

    def eventFilter(self, obj, event):
        if event.type() == QEvent.KeyPress and self.view.handle_key(event):
            return True
        return False


class Navigation:
    """Mixin: the keyboard and search half of the execution view."""

    # ------------------------------------------------------------------ keys
    def eventFilter(self, obj, event):  # the search box: Enter / Shift+Enter / Escape
        if obj is self.search_edit and event.type() == QEvent.KeyPress:
            if event.key() in (Qt.Key_Return, Qt.Key_Enter):
                self.jump_match(forward=not (event.modifiers() & Qt.ShiftModifier))
                return True
            if event.key() == Qt.Key_Escape:
                self.canvas.setFocus()
                return True
        return super().eventFilter(obj, event)

    def _cursor_or_centre(self) -> float:
        x0, x1 = self.x_range()
        if self._cursor_x is not None and x0 <= self._cursor_x <= x1:
            return self._cursor_x
        return (x0 + x1) / 2

    def zoom(self, factor: float, at: float | None = None):
        x0, x1 = self.x_range()
        c = self._cursor_or_centre() if at is None else at
        self.set_x_range(c - (c - x0) * factor, c + (x1 - c) * factor)

    def pan(self, fraction: float):
        x0, x1 = self.x_range()
        d = fraction * (x1 - x0)
        self.set_x_range(x0 + d, x1 + d)

    def handle_key(self, event) -> bool:
        key, text = event.key(), event.text()
        if key == Qt.Key_W:
            self.zoom(ZOOM_STEP)
        elif key == Qt.Key_S:
            self.zoom(1 / ZOOM_STEP)
        elif key == Qt.Key_A:
            self.pan(-PAN_STEP)
        elif key == Qt.Key_D:
            self.pan(PAN_STEP)
        elif key == Qt.Key_F:
            self.fit_selection()
        elif key == Qt.Key_0:
            self.reset_view()
        elif key == Qt.Key_M:
            self.add_marker(self._cursor_or_centre())
        elif text == "/" or key == Qt.Key_Slash:
            self.search_edit.setFocus()
            self.search_edit.selectAll()
        elif text == "?" or key == Qt.Key_Question:
            self.toggle_help()
        elif key == Qt.Key_Escape:
            self.help.hide()
        elif key in (Qt.Key_Return, Qt.Key_Enter) and len(self.matches):
            self.jump_match(forward=not (event.modifiers() & Qt.ShiftModifier))
        else:
            return False
        return True

    def toggle_help(self):
        self.help.setVisible(not self.help.isVisible())
        self.help.raise_()

    def add_marker(self, x: float):
        ln = pg.InfiniteLine(pos=x, angle=90, pen=pg.mkPen("#d62728", width=1, style=Qt.DashLine),
                             movable=True)
        self.tile_plot.addItem(ln)
        self.markers.append(ln)
        self.status.setText(f"marker at cycle {x:,.0f} ({format_seconds(x / self.clock_hz)})")

    def fit_selection(self):
        if self.region.isVisible():
            a, b = self.region.getRegion()
        elif len(self.highlight_steps):
            a = float(self.index.start[self.highlight_steps[0]])
            b = float(self.index.end[self.highlight_steps[-1]])
        elif self.current_step >= 0:
            a = float(self.index.start[self.current_step])
            b = float(self.index.end[self.current_step])
        else:
            return
        pad = 0.02 * max(b - a, 1)
        self.set_x_range(a - pad, b + pad)

    # ------------------------------------------------------------------ search
    def set_search(self, text: str):
        ops = ex.search_ops(self.profile, text)
        self.matches = ex.match_steps(self.index, ops)
        self.match_pos = -1
        self.highlight_steps = self.matches
        self.status.setText(f"search '{text}': {len(ops)} ops, {len(self.matches)} steps" if text else "")
        self._schedule()

    def jump_match(self, forward: bool = True) -> int:
        if len(self.matches) == 0:
            return -1
        cur = self.current_step if self.current_step >= 0 else (
            int(self.index.visible(*self.x_range())[0]) - (1 if forward else 0))
        s = ex.next_match(self.matches, cur, forward)
        self.current_step = s
        self.match_pos = int(np.searchsorted(self.matches, s))
        x0, x1 = self.x_range()
        width = x1 - x0
        a, b = float(self.index.start[s]), float(self.index.end[s])
        if b - a > 0.8 * width:
            width = (b - a) / 0.8
        c = (a + b) / 2
        self.set_x_range(c - width / 2, c + width / 2)
        self.show_step(s)
        self.status.setText(f"match {self.match_pos + 1}/{len(self.matches)}: step {s} "
                            f"{self.names.get(int(self.index.op_id[s]), '')}")
        return s
