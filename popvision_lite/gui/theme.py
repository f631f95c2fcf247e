"""Light and dark themes for widgets *and* plots.

pyqtgraph reads its background/foreground config only when a plot is created, so
:func:`apply_theme` also restyles every existing plot (background, axes, labels, titles,
legends).  Views that draw with theme-dependent colours can read :func:`current` or
:func:`colors` and listen to :data:`notifier.changed`.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QGraphicsView

THEMES = {
    "light": {
        "window": "#f4f4f4", "base": "#ffffff", "alt": "#ececec", "text": "#1a1a1a",
        "button": "#e8e8e8", "highlight": "#2f6fbf", "highlight_text": "#ffffff",
        "plot_bg": "#ffffff", "plot_fg": "#202020", "muted": "#6b6b6b",
        "capacity": "#d62728", "over": "#ff00ff", "select": "#00a0ff", "accent": "#1f77b4",
        "good": "#2ca02c", "bad": "#d62728",
    },
    "dark": {
        "window": "#2b2b2b", "base": "#1e1e1e", "alt": "#333333", "text": "#e6e6e6",
        "button": "#3a3a3a", "highlight": "#3d7fd9", "highlight_text": "#ffffff",
        "plot_bg": "#161616", "plot_fg": "#dcdcdc", "muted": "#9a9a9a",
        "capacity": "#ff5555", "over": "#ff40ff", "select": "#40c8ff", "accent": "#5fa8e8",
        "good": "#4cc34c", "bad": "#ff5555",
    },
}

_current = "light"


class _Notifier(QObject):
    changed = Signal(str)


notifier = _Notifier()


def current() -> str:
    return _current


def colors(name: str | None = None) -> dict[str, str]:
    return THEMES[name or _current]


def init_pyqtgraph() -> None:
    """Global pyqtgraph options the app relies on (row-major images, antialiasing)."""
    pg.setConfigOptions(imageAxisOrder="row-major", antialias=True)
    c = colors()
    pg.setConfigOption("background", c["plot_bg"])
    pg.setConfigOption("foreground", c["plot_fg"])


def _palette(c: dict[str, str]) -> QPalette:
    p = QPalette()
    q = QColor
    roles = {
        QPalette.Window: c["window"], QPalette.WindowText: c["text"], QPalette.Base: c["base"],
        QPalette.AlternateBase: c["alt"], QPalette.ToolTipBase: c["base"], QPalette.ToolTipText: c["text"],
        QPalette.Text: c["text"], QPalette.Button: c["button"], QPalette.ButtonText: c["text"],
        QPalette.Highlight: c["highlight"], QPalette.HighlightedText: c["highlight_text"],
        QPalette.PlaceholderText: c["muted"], QPalette.Link: c["accent"],
    }
    for role, col in roles.items():
        p.setColor(role, q(col))
    p.setColor(QPalette.Disabled, QPalette.Text, q(c["muted"]))
    p.setColor(QPalette.Disabled, QPalette.WindowText, q(c["muted"]))
    p.setColor(QPalette.Disabled, QPalette.ButtonText, q(c["muted"]))
    return p


def restyle_plot(widget) -> None:
    """Apply the current theme to one pyqtgraph GraphicsView and the plots inside it."""
    c = colors()
    fg = pg.mkColor(c["plot_fg"])
    widget.setBackground(c["plot_bg"])
    scene = widget.scene()
    if scene is None:
        return
    for item in scene.items():
        if isinstance(item, pg.AxisItem):
            item.setPen(fg)
            item.setTextPen(fg)
            if item.label is not None and item.labelText:
                item.setLabel(item.labelText, units=item.labelUnits, unitPrefix=item.labelUnitPrefix,
                              color=c["plot_fg"])
        elif isinstance(item, pg.LabelItem):
            item.setText(item.text, color=c["plot_fg"])
        elif isinstance(item, pg.LegendItem):
            item.setLabelTextColor(fg)
            item.setBrush(pg.mkBrush(QColor(c["plot_bg"]).darker(105) if _current == "light"
                                     else QColor(c["plot_bg"]).lighter(130)))


def _shown_plots(app: QApplication):
    """Plot widgets inside visible top-level windows (hidden tabs included).

    Not ``app.allWidgets()``: that wraps every widget alive, also closed windows still being torn
    down, and crashed once in a long pytest-qt session.  Closed windows need no restyle."""
    for top in app.topLevelWidgets():
        if top.isVisible():
            for w in top.findChildren(QGraphicsView):
                if isinstance(w, pg.GraphicsView):
                    yield w


def apply_theme(name: str, app: QApplication | None = None) -> None:
    """Switch the whole app (widgets and every plot) to theme ``name`` ("light" or "dark")."""
    global _current
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r}; choose one of {sorted(THEMES)}")
    _current = name
    app = app or QApplication.instance()
    init_pyqtgraph()
    if app is not None:
        app.setStyle("Fusion")
        app.setPalette(_palette(colors()))
        for w in _shown_plots(app):
            restyle_plot(w)
    notifier.changed.emit(name)
