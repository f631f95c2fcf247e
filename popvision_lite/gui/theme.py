"""Light and dark themes for widgets *and* plots, and every palette the views draw with.

pyqtgraph reads its background/foreground config only when a plot is created, so
:func:`apply_theme` also restyles every existing plot (background, axes, labels, titles,
legends).  Views that draw with theme-dependent colours can read :func:`current` or
:func:`colors` and listen to :data:`notifier.changed`.

Palettes (one colour per thing, the same in every view, compare page and export): step kinds
(:data:`STEP_KIND_COLORS`, the Execution lanes, the compare timeline), the phases they add up to
(:data:`PHASE_COLORS`, Summary and compare), Poplar memory categories (:data:`CATEGORY_COLORS`), runs A
and B of a comparison, roofline levels and GPUs, program kinds, finding severities, sweep devices.
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

# ---------------------------------------------------------------------------------------------- palettes
# compute green, exchange blue (inter-IPU purple), sync red, stream orange: the Summary's parts and every
# timeline of steps use the same four hues; host (the per-step host terms: the IPUs wait for the host) brown-grey
PHASE_COLORS = {"compute": "#2ca02c", "exchange": "#1f77b4", "sync": "#d62728", "stream": "#ff7f0e",
                "host": "#8c6d5a"}
STEP_KIND_COLORS = {
    "compute": PHASE_COLORS["compute"],
    "sync": PHASE_COLORS["sync"],
    "exchange_internal": PHASE_COLORS["exchange"],
    "exchange_global": "#9467bd",
    "stream_copy": PHASE_COLORS["stream"],
}
STEP_KIND_LABELS = {
    "compute": "compute",
    "sync": "sync",
    "exchange_internal": "exchange (on IPU)",
    "exchange_global": "exchange (inter-IPU)",
    "stream_copy": "stream copy",
}
# 17 distinguishable colours for the Poplar memory categories (tab20 without the pale greys)
CATEGORY_COLORS = [
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd",
    "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#bcbd22", "#dbdb8d", "#17becf",
]
RUN_A_COLOR, RUN_B_COLOR = "#1f77b4", "#ff7f0e"  # the two runs of a comparison
IPU_COLOR = "#1f77b4"  # the IPU's roofline
GPU_COLORS = {"a100-80gb": "#ff7f0e", "h100-sxm": "#2ca02c", "h200": "#9467bd", "v100": "#8c564b"}
LEVEL_COLORS = {"compute": "#d62728", "sram": "#1f77b4", "exchange": "#17becf", "ipu_link": "#e377c2",
                "ddr": "#7f7f7f"}  # what bounds a roofline point
PROGRAM_KIND_COLORS = {"Execute": "#1f77b4", "Copy": "#d67a00", "Sync": "#7f7f7f", "StreamCopy": "#9467bd",
                       "Repeat": "#2ca02c", "Sequence": None}
SEVERITY_COLORS = {"error": "#d62728", "warning": "#d67a00", "info": "#1f77b4"}
DEVICE_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#e377c2"]  # sweep plots
HIGHLIGHT_RGBA = (255, 200, 0, 90)  # steps of the selected op across the lanes
# tiles waiting at a sync, at fine zoom: light grey on the light theme, dark grey on the dark one (a light
# grey glared on the dark background)
WAIT_COLORS = {"light": "#c8c8c8", "dark": "#4a4a4a"}
# busy colour map ends (idle, fully busy) per theme: light theme pale grey -> deep blue; dark theme
# near-black (just above the plot background, so tiles with steps stay distinct from 'no step')
# -> bright sky blue, so idle areas recede and busy ones stand out on either background
BUSY_ENDS = {"light": ((236, 236, 236), (24, 62, 130)), "dark": ((30, 32, 38), (120, 200, 255))}


class _Notifier(QObject):
    changed = Signal(str)


notifier = _Notifier()


def current() -> str:
    return _current


def colors(name: str | None = None) -> dict[str, str]:
    return THEMES[name or _current]


def wait_color(name: str | None = None) -> str:
    return WAIT_COLORS[name or _current]


def busy_lut(name: str | None = None):
    """Idle -> busy colours of theme ``name`` in entries 0..254 of a (256, 4) uint8 lookup table; 255 = no
    step (transparent)."""
    import numpy as np

    lo, hi = (np.array(c, dtype=np.float64) for c in BUSY_ENDS[name or _current])
    t = np.linspace(0, 1, 255)[:, None] ** 0.8
    lut = np.zeros((256, 4), dtype=np.uint8)
    lut[:255, :3] = (lo + (hi - lo) * t).astype(np.uint8)
    lut[:255, 3] = 255
    return lut


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
    down, which can crash the process (seen in a long pytest-qt session).  Closed windows need no restyle.

    The garbage collector is off while the lists are taken: Qt hands over raw widget pointers that are wrapped
    one by one, and a collection triggered by that wrapping can destroy a closed window further down the
    list (a Python-owned window in a reference cycle) - a segfault here in a full test-suite run."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        plots = [w for top in app.topLevelWidgets() if top.isVisible()
                 for w in top.findChildren(QGraphicsView) if isinstance(w, pg.GraphicsView)]
    finally:
        if enabled:
            gc.enable()
    yield from plots


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
