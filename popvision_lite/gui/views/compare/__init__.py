"""Compare-mode pages: two runs A and B side by side (built by gui/compare_window.py), one module each.

Every page takes a :class:`popvision_lite.analysis.compare.Comparison` and exposes
``plot_items()`` (for export) and ``tables()`` (name -> DataFrame, for CSV export).

* :class:`CompareSummaryPage` - headline table (A, B, delta, B/A), the notes, a B/A ratio chart;
* :class:`CompareMemoryPage` - both tile maps (``TileMapItem``) with one shared ColorBarItem and linked axes, a tile
  cursor drawn in both, and a difference mode (B - A per tile, diverging colour map centred on 0);
  when the tile layouts differ, per-IPU bars and the note saying why tiles are not compared;
* :class:`CompareLivenessPage` - both not-always-live curves overlaid with a step cursor;
* :class:`CompareTimelinePage` - both runs' steps on one time axis, one lane per IPU of each run;
* :class:`CompareRooflinePage` - both runs' ops on one roofline with both targets' roofs;
* :class:`CompareStepsPage` - time per BSP phase of both runs + the matched step table;
* :class:`CompareOpsPage` - ops matched by name with A, B, delta and ratio.
"""

from popvision_lite.gui.views.compare.liveness import CompareLivenessPage
from popvision_lite.gui.views.compare.memory import CompareMemoryPage, per_ipu_display
from popvision_lite.gui.views.compare.ops import CompareOpsPage
from popvision_lite.gui.views.compare.roofline import CompareRooflinePage
from popvision_lite.gui.views.compare.steps import CompareStepsPage
from popvision_lite.gui.views.compare.summary import CompareSummaryPage
from popvision_lite.gui.views.compare.timeline import CompareTimelinePage

__all__ = ["CompareLivenessPage", "CompareMemoryPage", "CompareOpsPage", "CompareRooflinePage", "CompareStepsPage",
           "CompareSummaryPage", "CompareTimelinePage", "per_ipu_display"]
