"""Plots as images: PNG at a chosen size and DPI, SVG; the plots a view exposes (``plot_items()``).

* :func:`export_plot(item, path, width=None, height=None, dpi=96)` writes a PNG or SVG of one
  pyqtgraph item (what a view's ``plot_items()`` returns) through ``pyqtgraph.exporters``.  A plot
  drawn next to a ColorBarItem in the same GraphicsLayout is exported together with its colour bar.
* :func:`view_plot_items(view)`, :func:`items_exportable(items)`: what of a view can be exported now.

Every file is written atomically (``popvision_lite.atomic_io``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers the exporters)
from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QWidget

from popvision_lite.atomic_io import write_bytes_atomic
from popvision_lite.errors import ConfigError, ProfileError
from popvision_lite.gui import theme
from popvision_lite.gui.export.svg_portable import portable_svg
from popvision_lite.gui.plot_cache import drawn_afresh

PLOT_SUFFIXES = (".png", ".svg")
MAX_PIXELS = 16384  # per side; Qt refuses bigger QImages on some platforms


# ----------------------------------------------------------------------------- plots
def export_target(item):
    """The item to export for ``item``: its GraphicsLayout when a ColorBarItem sits beside it there (in one of
    its rows).  A plot in a layout whose colour bar belongs to another row (the Execution view's per-step
    chart under the tile lanes) is exported alone."""
    parent = item.parentItem() if hasattr(item, "parentItem") else None
    if isinstance(parent, pg.GraphicsLayout) and isinstance(item, pg.PlotItem):
        rows = {r for r, _c in parent.items.get(item, [])}
        if any(isinstance(it, pg.ColorBarItem) and rows & {r for r, _c in cells} for it, cells in parent.items.items()):
            return parent
    return item


def _check_size(width, height):
    for name, v in (("width", width), ("height", height)):
        if v is not None and not (16 <= int(v) <= MAX_PIXELS):
            raise ConfigError(f"{name} {v} px is out of range; choose 16 .. {MAX_PIXELS} pixels")


class Region:
    """Several items of one GraphicsLayout exported as one picture: the rectangle that holds them all (the
    Execution view's per-step chart with the imbalance strip that carries its time axis and the legend that
    names its colours).  Has what the exports use of an item: ``scene()``, ``sceneBoundingRect()``."""

    def __init__(self, items):
        self.items = [export_target(it) for it in items]
        if not self.items:
            raise ConfigError("nothing to export: the region has no items")

    def scene(self):
        return self.items[0].scene()

    def sceneBoundingRect(self):  # noqa: N802 - Qt's name, as the exports call it on items
        rect = self.items[0].sceneBoundingRect()
        for it in self.items[1:]:
            rect = rect.united(it.sceneBoundingRect())
        return rect

    def layout(self):
        """The layout holding the items (what the exporter walks to put items in export mode)."""
        parent = self.items[0].parentItem()
        return parent if parent is not None else self.items[0]


def _image_exporter(item):
    """pyqtgraph's ImageExporter of ``item``; of a :class:`Region`: of its layout, limited to the region."""
    if not isinstance(item, Region):
        return pg.exporters.ImageExporter(item)
    exp = pg.exporters.ImageExporter(item.layout())
    rect = item.sceneBoundingRect()
    view = item.scene().views()[0]
    exp.getSourceRect = lambda: rect
    exp.getTargetRect = lambda: view.mapFromScene(rect).boundingRect()
    exp.params["width"] = int(round(rect.width()))  # the height follows the region's aspect ratio
    return exp


def render_image(item, width: int | None = None, height: int | None = None, dpi: float = 96.0) -> QImage:
    """A QImage of ``item`` (a plot item or a :class:`Region`) ``width`` x ``height`` pixels.  With one of
    them the other follows the plot's aspect ratio; with both, a plot of another shape is drawn as large as
    fits, centred on the plot background (Qt drew it from the top-left corner, over the rest of the scene)."""
    _check_size(width, height)
    if not dpi or dpi <= 0:
        raise ConfigError(f"dpi {dpi} must be positive")
    item = export_target(item)
    if item.scene() is None or not item.scene().views():
        raise ConfigError("the plot is not shown in a view, so it cannot be exported")
    exp = _image_exporter(item)
    rect = exp.getSourceRect()
    if rect.width() < 1 or rect.height() < 1:
        raise ConfigError("the plot has no size yet (its view was never shown); show the view first")
    bg = exp.params["background"]
    if bg.alpha() == 0:  # transparent PNGs look blank in most viewers: use the plot background
        bg = exp.params["background"] = pg.mkColor(theme.colors()["plot_bg"])
    canvas = None
    if width is not None and height is not None and abs(rect.height() * width / rect.width() - height) >= 2:
        canvas = (int(width), int(height))  # another shape: as large as fits, then centred
        fit = min(width / rect.width(), height / rect.height())
        width, height = max(1, int(round(rect.width() * fit))), max(1, int(round(rect.height() * fit)))
    if width is not None:
        exp.params["width"] = int(width)  # the height follows the aspect ratio ...
    if height is not None:  # ... unless given too (the same shape, to the pixel)
        if width is None:
            exp.params["height"] = int(height)
        else:
            exp.params.param("height").setValue(int(height), blockSignal=exp.heightChanged)
    scale = exp.params["width"] / rect.width()
    with _legends_scaled(item, scale), drawn_afresh(item.scene()):
        img = exp.export(toBytes=True)
    if canvas is not None:
        img = _centred(img, canvas, bg)
    dpm = int(round(dpi / 0.0254))
    img.setDotsPerMeterX(dpm)
    img.setDotsPerMeterY(dpm)
    return img


def _centred(img: QImage, size: tuple[int, int], background) -> QImage:
    from PySide6.QtGui import QPainter

    out = QImage(size[0], size[1], QImage.Format_ARGB32)
    out.fill(background)
    p = QPainter(out)
    p.drawImage((size[0] - img.width()) // 2, (size[1] - img.height()) // 2, img)
    p.end()
    return out


@contextlib.contextmanager
def _legends_scaled(item, scale: float):
    """Legends ignore the view's transformations (pyqtgraph keeps them at screen size while zooming), so an
    export at twice the pixels drew everything twice as large except the legend.  While ``item`` is
    rendered its legends are scaled by ``scale`` too: the exporter's painter scales their positions
    (anchored to the plot in its pixels), this scales their own size, so they keep their place."""
    legends = []
    if abs(scale - 1.0) > 1e-3 and item.scene() is not None:
        legends = [it for it in item.scene().items(item.sceneBoundingRect())
                   if isinstance(it, pg.LegendItem) and it.isVisible()]
    old = [(lg, lg.scale()) for lg in legends]
    try:
        for lg, s in old:
            lg.setScale(s * scale)
        yield
    finally:
        for lg, s in old:
            lg.setScale(s)


def image_png_bytes(img: QImage) -> bytes:
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.WriteOnly)
    if not img.save(buf, "PNG"):
        raise ConfigError("Qt could not encode the image as PNG")
    buf.close()
    return bytes(ba)


def export_png(item, path, width: int | None = None, height: int | None = None, dpi: float = 96.0):
    img = render_image(item, width, height, dpi)
    write_bytes_atomic(path, image_png_bytes(img))
    return img.width(), img.height()


def export_svg(item, path) -> int:
    item = export_target(item)
    if item.scene() is None or not item.scene().views():
        raise ConfigError("the plot is not shown in a view, so it cannot be exported")
    with drawn_afresh(item.scene()):
        data = _svg_bytes(item)
    write_bytes_atomic(path, data)
    return len(data)


def _svg_bytes(item) -> bytes:
    if isinstance(item, Region):
        return _qt_svg(item)
    try:
        data = pg.exporters.SVGExporter(item).export(toBytes=True)
        if isinstance(data, str):
            data = data.encode("utf-8")
        data = portable_svg(bytes(data), theme.colors()["plot_bg"])
    except Exception:  # pyqtgraph's SVG writer has rough edges (images, some paths): let Qt draw it
        data = _qt_svg(item)
    return data


def _qt_svg(item) -> bytes:
    """SVG of ``item``'s area of its scene drawn by QSvgGenerator (vector shapes, embedded images)."""
    from PySide6.QtCore import QRectF, QSize
    from PySide6.QtGui import QPainter
    from PySide6.QtSvg import QSvgGenerator

    rect = item.sceneBoundingRect()
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.WriteOnly)
    gen = QSvgGenerator(QSvgGenerator.SvgVersion.Svg11)  # SVG 1.1: clip paths (a plot clips its items)
    gen.setOutputDevice(buf)
    gen.setSize(QSize(int(rect.width()), int(rect.height())))
    gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
    gen.setTitle("popvision-lite plot")
    # the view's DPI, not QSvgGenerator's 72: items drawn through QPicture (axes, text) are scaled by the
    # ratio of the two, which would draw axes and curves at different sizes in the SVG
    gen.setResolution(round(item.scene().views()[0].logicalDpiY()))
    painter = QPainter(gen)
    # export mode, as pyqtgraph's exporters set it: scatter plots then draw each symbol as a vector path
    # instead of fragments of their cached symbol atlas, which Qt embeds as one whole PNG per point
    # (without it the roofline SVG of a 4-IPU BERT is 18 MB: 615 copies of the atlas)
    opts = {"antialias": True, "background": None, "painter": painter, "resolutionScale": 1.0}
    exporting = [it for it in item.scene().items() if hasattr(it, "setExportMode")]
    try:
        with drawn_afresh(item.scene()):
            for it in exporting:
                it.setExportMode(True, opts)
            item.scene().render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
    finally:
        for it in exporting:
            it.setExportMode(False)
        painter.end()
    buf.close()
    return portable_svg(bytes(ba), theme.colors()["plot_bg"])


def export_plot(item, path, width: int | None = None, height: int | None = None, dpi: float = 96.0):
    """PNG or SVG by the file suffix; returns (width, height) for PNG, bytes written for SVG."""
    suffix = Path(path).suffix.lower()
    if suffix == ".png":
        return export_png(item, path, width, height, dpi)
    if suffix == ".svg":
        return export_svg(item, path)
    raise ConfigError(f"{path}: cannot export a plot as '{suffix or 'no suffix'}'; use .png or .svg")


def export_widget_png(widget: QWidget, path, width: int | None = None, height: int | None = None):
    """PNG of a whole widget as drawn (for tables and text panels, which have no plot item)."""
    _check_size(width, height)
    if width or height:
        widget.resize(int(width or widget.width()), int(height or widget.height()))
        QApplication.processEvents()
    pm = widget.grab()
    write_bytes_atomic(path, image_png_bytes(pm.toImage()))
    return pm.width(), pm.height()


def view_plot_items(view) -> dict:
    """``view.plot_items()`` when the view has plots, else {}."""
    if view is None or not hasattr(view, "plot_items"):
        return {}
    try:
        return dict(view.plot_items())
    except Exception:  # a view in a broken state must not stop an export of the others
        return {}


def items_exportable(items: dict) -> dict:
    """Only items that are in a scene with a view and have a non-empty size."""
    out = {}
    for k, it in items.items():
        it2 = export_target(it)
        try:
            if it2.scene() is None or not it2.scene().views():
                continue
            r = it2.sceneBoundingRect()
            if r.width() >= 16 and r.height() >= 16:
                out[k] = it
        except RuntimeError:  # deleted C++ object
            continue
    return out


def pixel_stats(path) -> tuple[int, int, float]:
    """(width, height, variance of grey values) of an image file: a blank image has variance 0."""
    img = QImage(str(path))
    if img.isNull():
        raise ProfileError(path, "is not an image Qt can read")
    img = img.convertToFormat(QImage.Format_Grayscale8)
    w, h = img.width(), img.height()
    arr = np.frombuffer(img.constBits(), dtype=np.uint8, count=img.bytesPerLine() * h)
    arr = arr.reshape(h, img.bytesPerLine())[:, :w]
    return w, h, float(arr.var())
