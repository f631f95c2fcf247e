"""``Navigation``: keys, zoom, pan and markers of the execution view (Perfetto / Tracy conventions).

W/S zoom at the cursor, A/D pan, F fits the selection, 0 resets, M marks, / searches (Enter / Shift+Enter
next / previous), ? shows help.  A helper object the view owns, with explicit inputs: the ViewBox whose x
range it moves (the lanes are x-linked to it), the plot that holds the markers, the clock, and the view's
commands that a key runs (fit, reset, search, help, jump to the next match).  It is the event filter of the
view's canvas.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt, Signal

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


KEY_COMMANDS = {Qt.Key_F: "fit", Qt.Key_0: "reset", Qt.Key_Escape: "escape"}


class Navigation(QObject):
    """Moves the x range of ``vb`` by keys; ``commands`` maps "fit", "reset", "search", "help", "escape" to
    callables of no argument and "jump" to one of ``forward`` returning the step jumped to (-1: no match)."""

    message = Signal(str)   # a status line (where a marker was put)

    def __init__(self, vb: pg.ViewBox, marker_plot: pg.PlotItem, clock_hz: float, commands: dict, parent=None):
        super().__init__(parent)
        self.vb = vb
        self.marker_plot = marker_plot
        self.clock_hz = float(clock_hz)
        self.commands = commands
        self.cursor_x: float | None = None   # cycle under the mouse, when over the lanes
        self.markers: list[pg.InfiniteLine] = []

    def eventFilter(self, obj, event):  # noqa: N802 - Qt's name
        return event.type() == QEvent.KeyPress and self.handle_key(event)

    def x_range(self) -> tuple[float, float]:
        (x0, x1), _ = self.vb.viewRange()
        return float(x0), float(x1)

    def set_x_range(self, x0: float, x1: float) -> None:
        self.vb.setXRange(x0, x1, padding=0)

    def cursor_or_centre(self) -> float:
        x0, x1 = self.x_range()
        if self.cursor_x is not None and x0 <= self.cursor_x <= x1:
            return self.cursor_x
        return (x0 + x1) / 2

    def zoom(self, factor: float, at: float | None = None) -> None:
        """Scale the x range by ``factor`` about ``at`` (default: the cursor, else the centre)."""
        x0, x1 = self.x_range()
        c = self.cursor_or_centre() if at is None else at
        self.set_x_range(c - (c - x0) * factor, c + (x1 - c) * factor)

    def pan(self, fraction: float) -> None:
        """Move the x range by ``fraction`` of its width (negative: left)."""
        x0, x1 = self.x_range()
        d = fraction * (x1 - x0)
        self.set_x_range(x0 + d, x1 + d)

    def add_marker(self, x: float) -> None:
        """A movable dashed line at cycle ``x`` (``message`` says where)."""
        ln = pg.InfiniteLine(pos=x, angle=90, pen=pg.mkPen("#d62728", width=1, style=Qt.DashLine), movable=True)
        self.marker_plot.addItem(ln)
        self.markers.append(ln)
        self.message.emit(f"marker at cycle {x:,.0f} ({format_seconds(x / self.clock_hz)})")

    def handle_key(self, event) -> bool:
        """Run the key's action; False when the key is not one of the view's."""
        key, text = event.key(), event.text()
        if key == Qt.Key_W:
            self.zoom(ZOOM_STEP)
        elif key == Qt.Key_S:
            self.zoom(1 / ZOOM_STEP)
        elif key == Qt.Key_A:
            self.pan(-PAN_STEP)
        elif key == Qt.Key_D:
            self.pan(PAN_STEP)
        elif key in KEY_COMMANDS:
            self.commands[KEY_COMMANDS[key]]()
        elif key == Qt.Key_M:
            self.add_marker(self.cursor_or_centre())
        elif text == "/" or key == Qt.Key_Slash:
            self.commands["search"]()
        elif text == "?" or key == Qt.Key_Question:
            self.commands["help"]()
        elif key in (Qt.Key_Return, Qt.Key_Enter):
            return self.commands["jump"](not (event.modifiers() & Qt.ShiftModifier)) >= 0
        else:
            return False
        return True
