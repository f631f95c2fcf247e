"""The two UI stalls of issue 19: a tile click in Memory measured every variable row for column widths
(3.9 s per click with ~3,000 variables on a bert-large tile), and opening Roofline ran the analysis
(reading and validating the vertices table) on the GUI thread."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.gui

def test_tile_click_measures_a_bounded_number_of_rows(qtbot, document, monkeypatch):
    from popvision_lite.gui import table_model
    from popvision_lite.gui.views.memory import MemoryView
    from popvision_lite.gui.views.memory import widgets as memory_view
    from tests.support.qt import show_view

    view = show_view(qtbot, MemoryView(document))
    qtbot.waitUntil(lambda: view._prefetch.done, timeout=10000)
    n = 5000
    frame = pd.DataFrame({"name": [f"v{i}" for i in range(n)], "kind": "variable", "dtype": "float16",
                          "shape": "(128, 768)", "bytes_on_tile": np.arange(n, 0, -1), "bytes": n,
                          "always_live": False, "first_lstep": 0, "last_lstep": 1, "var_id": np.arange(n)})
    monkeypatch.setattr(view.tm, "variables_on", lambda tile: frame)
    calls = []
    real = table_model.DataFrameModel.data
    monkeypatch.setattr(table_model.DataFrameModel, "data", lambda self, *a: (calls.append(1), real(self, *a))[1])
    view.select_tile(3)
    assert view.var_model.rowCount() == n
    # Qt asks a few roles per measured cell: bounded by the measured rows (Qt's default measures 1,000
    # rows, ~40,000 calls here; 3.4 s for ~3,000 variables of a bert-large tile), not by the 5,000 rows
    assert memory_view.RESIZE_ROWS <= 64
    assert len(calls) < n, len(calls)


def test_roofline_of_a_real_size_target_is_computed_off_the_gui_thread(qtbot, tmp_path):
    import popvision_lite as pvl
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.roofline import RooflineView
    from popvision_lite.testing.synthetic import write_synthetic

    create_app()
    p = tmp_path / "one_ipu.pvl"
    write_synthetic(p, num_ipus=1, tiles_per_ipu=1472, num_steps=40, seed=1, num_layers=1)
    with pvl.open(p) as prof:
        v = RooflineView(Document(prof))
        qtbot.addWidget(v)
        assert v.analysis is None  # constructing the view did not run the analysis
        qtbot.waitUntil(lambda: v.analysis is not None, timeout=20000)
