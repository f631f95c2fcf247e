"""Export plots (PNG with chosen size/DPI, SVG), tables (CSV) and whole-profile reports.

* :func:`export_plot(item, path, width=None, height=None, dpi=96)` writes a PNG or SVG of one
  pyqtgraph item (what a view's ``plot_items()`` returns) through ``pyqtgraph.exporters``.  A plot
  drawn next to a ColorBarItem in the same GraphicsLayout is exported together with its colour bar.
* :func:`export_table(df_or_model, path)` writes a DataFrame (or a ``DataFrameModel``) as CSV.
* :func:`view_tables(view)` finds the tables a view shows; :func:`view_plot_items(view)` its plots.
* :class:`ReportExporter` writes every view of one document (PNGs + CSVs) and ``summary.md`` +
  ``index.html`` into one folder: rendering happens on the GUI thread in one small slice per item
  (the window stays responsive), with progress and cancel.

Every file is written atomically: temp file in the same folder, then ``os.replace``.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd
import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers the exporters)
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QObject, QTimer, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QTableView, QWidget

from popvision_lite.atomic_io import write_bytes_atomic
from popvision_lite.errors import ConfigError, ProfileError

PLOT_SUFFIXES = (".png", ".svg")
MAX_PIXELS = 16384  # per side; Qt refuses bigger QImages on some platforms


# ----------------------------------------------------------------------------- plots
def export_target(item):
    """The item to export for ``item``: its GraphicsLayout when a ColorBarItem sits beside it there."""
    parent = item.parentItem() if hasattr(item, "parentItem") else None
    if isinstance(parent, pg.GraphicsLayout) and isinstance(item, pg.PlotItem):
        if any(isinstance(it, pg.ColorBarItem) for it in parent.items):
            return parent
    return item


def _check_size(width, height):
    for name, v in (("width", width), ("height", height)):
        if v is not None and not (16 <= int(v) <= MAX_PIXELS):
            raise ConfigError(f"{name} {v} px is out of range; choose 16 .. {MAX_PIXELS} pixels")


def render_image(item, width: int | None = None, height: int | None = None, dpi: float = 96.0) -> QImage:
    """A QImage of ``item`` ``width`` x ``height`` pixels (aspect kept, centred, when both are given)."""
    _check_size(width, height)
    if not dpi or dpi <= 0:
        raise ConfigError(f"dpi {dpi} must be positive")
    item = export_target(item)
    if item.scene() is None or not item.scene().views():
        raise ConfigError("the plot is not shown in a view, so it cannot be exported")
    exp = pg.exporters.ImageExporter(item)
    rect = exp.getSourceRect()
    if rect.width() < 1 or rect.height() < 1:
        raise ConfigError("the plot has no size yet (its view was never shown); show the view first")
    bg = exp.params["background"]
    if bg.alpha() == 0:  # transparent PNGs look blank in most viewers: use the plot background
        from popvision_lite.gui import theme

        exp.params["background"] = pg.mkColor(theme.colors()["plot_bg"])
    if width is not None:
        exp.params["width"] = int(width)  # height follows the aspect ratio ...
    if height is not None:  # ... unless given too: then the plot is centred in width x height
        if width is None:
            exp.params["height"] = int(height)
        else:
            exp.params.param("height").setValue(int(height), blockSignal=exp.heightChanged)
    img = exp.export(toBytes=True)
    dpm = int(round(dpi / 0.0254))
    img.setDotsPerMeterX(dpm)
    img.setDotsPerMeterY(dpm)
    return img


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
    try:
        data = pg.exporters.SVGExporter(item).export(toBytes=True)
        if isinstance(data, str):
            data = data.encode("utf-8")
        data = bytes(data)
    except Exception:  # pyqtgraph's SVG writer has rough edges (images, some paths): let Qt draw it
        data = _qt_svg(item)
    write_bytes_atomic(path, data)
    return len(data)


def _qt_svg(item) -> bytes:
    """SVG of ``item``'s area of its scene drawn by QSvgGenerator (vector shapes, embedded images)."""
    from PySide6.QtCore import QRectF, QSize
    from PySide6.QtGui import QPainter
    from PySide6.QtSvg import QSvgGenerator

    rect = item.sceneBoundingRect()
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buf)
    gen.setSize(QSize(int(rect.width()), int(rect.height())))
    gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
    gen.setTitle("popvision-lite plot")
    # the view's DPI, not QSvgGenerator's 72: items drawn through QPicture (axes, text) are scaled by the
    # ratio of the two, so axes and curves came out at different sizes in the SVG
    gen.setResolution(round(item.scene().views()[0].logicalDpiY()))
    painter = QPainter(gen)
    # export mode, as pyqtgraph's exporters set it: scatter plots then draw each symbol as a vector path
    # instead of fragments of their cached symbol atlas, which Qt embeds as one whole PNG per point
    # (the roofline SVG of a 4-IPU BERT was 18 MB of 615 copies of the atlas)
    opts = {"antialias": True, "background": None, "painter": painter, "resolutionScale": 1.0}
    exporting = [it for it in item.scene().items() if hasattr(it, "setExportMode")]
    try:
        for it in exporting:
            it.setExportMode(True, opts)
        item.scene().render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
    finally:
        for it in exporting:
            it.setExportMode(False)
        painter.end()
    buf.close()
    return bytes(ba)


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


# ----------------------------------------------------------------------------- tables
def export_table(data, path) -> int:
    """Write a DataFrame (or a DataFrameModel's frame) as CSV atomically; returns the row count."""
    from popvision_lite.profile.csv_export import write_frame_csv

    df = data.df if hasattr(data, "df") and not isinstance(data, pd.DataFrame) else data
    if not isinstance(df, pd.DataFrame):
        raise ConfigError(f"cannot export {type(data).__name__} as CSV")
    return write_frame_csv(df, path)  # atomic; cells a spreadsheet would run as formulas neutralised


def _slug(text: str) -> str:
    s = "".join(ch.lower() if ch.isalnum() else "_" for ch in str(text)).strip("_")
    while "__" in s:
        s = s.replace("__", "_")
    return s or "table"


def view_tables(view) -> dict[str, pd.DataFrame]:
    """Tables shown by ``view``: its ``tables()`` if it has one, else every DataFrameModel table in it."""
    if callable(getattr(view, "tables", None)):  # the export protocol: a method, not a widget attribute
        return dict(view.tables())
    from popvision_lite.gui.table_model import DataFrameModel

    out: dict[str, pd.DataFrame] = {}
    if not isinstance(view, QWidget):
        return out
    for i, tv in enumerate(view.findChildren(QTableView)):
        m = tv.model()
        while hasattr(m, "sourceModel") and m.sourceModel() is not None:
            m = m.sourceModel()
        if m is None:
            continue
        df = m.df if isinstance(m, DataFrameModel) else getattr(m, "df", None)
        if not isinstance(df, pd.DataFrame):
            df = _model_frame(m)
        if df is None or not len(df.columns):
            continue
        name = _slug(tv.objectName() or (tv.toolTip() or "").split(";")[0][:40] or f"table{i}")
        while name in out:
            name += "_2"
        out[name] = df
    return out


def _model_frame(model, max_rows: int = 1_000_000):
    """A DataFrame of what any flat Qt table model displays (headers as columns)."""
    from PySide6.QtCore import Qt

    rows, cols = model.rowCount(), model.columnCount()
    if cols == 0:
        return None
    headers = [str(model.headerData(c, Qt.Horizontal, Qt.DisplayRole)) for c in range(cols)]
    data = [[model.data(model.index(r, c), Qt.DisplayRole) for c in range(cols)] for r in range(min(rows, max_rows))]
    return pd.DataFrame(data, columns=headers)


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


# ----------------------------------------------------------------------------- report
def summary_markdown(profile) -> str:
    from popvision_lite.analysis.summary import format_bytes, format_seconds, summarize

    s = summarize(profile)
    t = s.target
    lines = [f"# Profile report: {Path(str(profile.path)).name}", "",
             f"* target: {t.name}, {t.num_ipus} IPU(s) x {t.tiles_per_ipu} tiles, {t.clock_hz / 1e9:.3f} GHz",
             f"* model: {s.model} {s.config}",
             f"* fits: {'yes' if s.fits else 'NO - ' + str(s.peak.over_capacity_tiles) + ' tiles over capacity'}",
             f"* total: {s.total_cycles:,} cycles = {format_seconds(s.total_seconds)} in {s.num_steps:,} BSP steps",
             "* phases: " + ", ".join(f"{k} {v:,} cycles ({100 * s.phase_share[k]:.1f}%)"
                                      for k, v in s.phase_cycles.items()),
             f"* peak tile memory: {format_bytes(s.peak.bytes)} on tile {s.peak.tile_in_ipu} of IPU {s.peak.ipu} "
             f"({100 * s.peak.fraction:.1f}% of {format_bytes(s.peak.capacity)})",
             f"* peak not-always-live on a tile: {format_bytes(s.peak_not_always_live)} "
             f"(liveness step {s.peak_not_always_live_lstep})", "", "## Top ops by cycles", "",
             "| op | type | cycles | share |", "|---|---|---|---|"]
    for r in s.top_ops.itertuples(index=False):
        lines.append(f"| {r.name} | {r.type} | {int(r.cycles):,} | {100 * r.share:.1f}% |")
    lines += _verdict_markdown(profile)
    return "\n".join(lines) + "\n"


def _verdict_markdown(profile) -> list[str]:
    """The IPU-or-GPU verdict section of the report (empty, with the reason, when it cannot be made)."""
    from popvision_lite.analysis.verdict import verdict
    from popvision_lite.errors import PopvisionError

    try:
        v = verdict(profile)
    except PopvisionError as e:
        return ["", "## Verdict: IPU or GPU?", "", f"n/a: {e}"]
    out = ["", "## Verdict: IPU or GPU?", "", f"**{v.headline()}**", "", "| | IPU | GPU |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in v.rows()]
    return out + [""] + [f"* {n}" for n in v.notes]


def _index_html(title: str, markdown: str, images: list[tuple[str, str]], csvs: list[str]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>", f"<pre>{html.escape(markdown)}</pre>"]
    for caption, name in images:
        body.append(f"<figure><img src='{html.escape(name)}' style='max-width:100%'>"
                    f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    if csvs:
        body.append("<h2>Tables (CSV)</h2><ul>" + "".join(
            f"<li><a href='{html.escape(c)}'>{html.escape(c)}</a></li>" for c in csvs) + "</ul>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + html.escape(title)
            + "</title></head><body>" + "\n".join(body) + "</body></html>\n")


class ReportExporter(QObject):
    """Export every view of ``doc_widget`` into ``folder``: a main-window DocumentWidget, or anything with
    ``keys()``, ``show_view(key)`` and ``report_markdown()`` (the compare window).

    ``start()`` runs it in slices on the event loop; ``run()`` runs it to the end (tests, CLI).
    Signals: progress(fraction, message), finished(dict manifest), failed(exception), cancelled().
    """

    progress = Signal(float, str)
    finished = Signal(object)
    failed = Signal(object)
    cancelled = Signal()

    def __init__(self, doc_widget, folder, width: int = 1200, dpi: float = 96.0, parent=None):
        super().__init__(parent)
        self.doc_widget = doc_widget
        self.folder = Path(folder)
        self.width, self.dpi = width, dpi
        self._cancel = False
        self._jobs: list = []
        self.manifest = {"folder": str(self.folder), "images": [], "csv": [], "errors": []}
        self._images: list[tuple[str, str]] = []

    def cancel(self) -> None:
        self._cancel = True

    def _plan(self) -> None:
        if self.folder.exists() and not self.folder.is_dir():
            raise ProfileError(self.folder, "exists and is not a folder")
        self.folder.mkdir(parents=True, exist_ok=True)
        keys = self.doc_widget.keys()
        self._jobs = [("view", k) for k in keys] + [("summary", None)]

    def _do(self, job) -> None:
        kind, key = job
        if kind == "summary":
            dw = self.doc_widget
            if hasattr(dw, "report_markdown"):  # e.g. the compare window
                md, title = dw.report_markdown(), dw.windowTitle()
            else:
                md, title = summary_markdown(dw.document.profile), f"popvision-lite report: {dw.document.title}"
            write_bytes_atomic(self.folder / "summary.md", md.encode("utf-8"))
            page = _index_html(title, md, self._images, self.manifest["csv"])
            write_bytes_atomic(self.folder / "index.html", page.encode("utf-8"))
            self.manifest["summary"] = str(self.folder / "summary.md")
            self.manifest["index"] = str(self.folder / "index.html")
            return
        view = self.doc_widget.show_view(key)
        QApplication.processEvents()
        for name, item in items_exportable(view_plot_items(view)).items():
            fname = f"{key}_{_slug(name)}.png"
            try:
                export_png(item, self.folder / fname, width=self.width, dpi=self.dpi)
            except Exception as e:  # one bad plot must not lose the rest of the report
                self.manifest["errors"].append(f"{key}/{name}: {e}")
                continue
            self._images.append((f"{key}: {name}", fname))
            self.manifest["images"].append(str(self.folder / fname))
        for name, df in view_tables(view).items():
            fname = f"{key}_{name}.csv"
            export_table(df, self.folder / fname)
            self.manifest["csv"].append(fname)

    def run(self) -> dict:
        self._plan()
        n = len(self._jobs)
        for i, job in enumerate(self._jobs):
            if self._cancel:
                raise RuntimeError("cancelled")
            self.progress.emit(i / n, f"{job[1] or 'summary'}")
            self._do(job)
        self.progress.emit(1.0, "done")
        return self.manifest

    def start(self) -> None:
        try:
            self._plan()
        except Exception as e:
            self.failed.emit(e)
            return
        self._n = len(self._jobs)
        QTimer.singleShot(0, self._step)

    def _step(self) -> None:
        if self._cancel:
            self.cancelled.emit()
            return
        if not self._jobs:
            self.progress.emit(1.0, "done")
            self.finished.emit(self.manifest)
            return
        job = self._jobs.pop(0)
        self.progress.emit((self._n - len(self._jobs) - 1) / self._n, f"exporting {job[1] or 'summary'}")
        try:
            self._do(job)
        except Exception as e:
            self.failed.emit(e)
            return
        QTimer.singleShot(0, self._step)


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
