"""Export of plots (PNG / SVG), tables (CSV) and reports, in the window and headless.

:mod:`.plots` (images of pyqtgraph items), :mod:`.tables` (CSV of a view's tables), :mod:`.report` (a
folder of everything).  The names below are the public API; the menu entries are in
``gui/actions/export.py``; ``popvision-lite export`` draws the window's views offscreen in ``gui/headless.py``.
"""

from popvision_lite.gui.export.plots import (
    MAX_PIXELS,
    PLOT_SUFFIXES,
    export_plot,
    export_png,
    export_svg,
    export_target,
    export_widget_png,
    items_exportable,
    pixel_stats,
    render_image,
    view_plot_items,
)
from popvision_lite.gui.export.report import ReportExporter, summary_markdown
from popvision_lite.gui.export.tables import export_table, slug, view_tables

__all__ = [
    "MAX_PIXELS", "PLOT_SUFFIXES", "ReportExporter", "export_plot", "export_png", "export_svg", "export_table",
    "export_target", "export_widget_png", "items_exportable", "pixel_stats", "render_image", "slug",
    "summary_markdown", "view_plot_items", "view_tables",
]
