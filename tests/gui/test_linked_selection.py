"""Selecting an op in the operations view highlights it everywhere: heatmap tiles (memory view),
timeline steps (execution view), its program nodes (program tree) and its roofline point."""

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.gui.state.document import Document
from tests.support.insights_profile import make_data, write_small

pytestmark = pytest.mark.gui


@pytest.fixture
def views(qtbot, tmp_path):
    from popvision_lite.gui.views import VIEW_REGISTRY

    d = Document(pvl.open(write_small(tmp_path / "small.pvl")))
    built = {}
    for key, _title, factory in VIEW_REGISTRY:
        if key in ("operations", "memory", "execution", "program_tree"):
            w = factory(d)
            qtbot.addWidget(w)
            built[key] = w
    yield d, built
    d.close()


def test_op_selection_reaches_every_view(views, qtbot):
    d, v = views
    data = make_data()
    op = 0
    v["operations"].select_op(op)
    qtbot.waitUntil(lambda: d.selection.state.op_id == op and d.selection.state.tiles != ())
    steps = np.flatnonzero(data.steps["op_id"].to_numpy() == op)
    act = (data.step_tile_cycles[steps] > 0) | (data.step_tile_bytes_in[steps] > 0) | (data.step_tile_bytes_out[steps] > 0)
    tiles = sorted(set(np.flatnonzero(act.any(axis=0)).tolist())
                   | set(data.vertices.loc[data.vertices["cs_id"] == 0, "tile"].tolist()))
    # heatmap: exactly the op's tiles
    assert sorted(v["memory"].highlight_tiles.tolist()) == tiles
    # timeline: exactly the op's steps
    assert v["execution"].highlight_steps.tolist() == steps.tolist()
    # program tree: the op's nodes
    assert v["program_tree"].selected_programs() == [3, 4]
