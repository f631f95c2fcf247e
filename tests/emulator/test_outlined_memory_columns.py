"""An outlined, recomputed ResNet run adds the other blocks' memory and its saved inputs' liveness from the
profile tables as the builder holds them (typed numpy columns, decision 0471): ``emulated._saved_on_liveness``
reads the programs table's columns, so the run builds no DataFrame and imports no pandas (~0.18 s CPU of the
ResNet-50 replica row before)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUN = """
import json, sys
from popvision_lite.emulator.models import emulated
from popvision_lite.emulator.models.config import make_config
from tests.support import devices

cfg = make_config("resnet-tiny", layers=50, hidden=8, image=32, batch=2, recompute=True, outline=True)
res = emulated.run_model(cfg, devices.register().id, timing_only=True)
heavy = "pandas" in sys.modules
names = [str(n) for n in res.profile_data.table("variables")["name"]]
saved = sum(n.endswith("[saved for an outlined block]") for n in names)
print("RESULT", json.dumps([heavy, saved, len(res.profile_data.table("variable_intervals") or [])]))
"""


def test_an_outlined_run_places_its_saved_inputs_without_pandas():
    out = subprocess.run([sys.executable, "-c", RUN], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    heavy, saved, _ = json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT ")).split(" ", 1)[1])
    # the saved inputs were placed on their liveness steps (the path that reads the programs table ran) ...
    assert saved > 10, out
    # ... and nothing imported pandas
    assert heavy is False, out


def test_the_saved_inputs_are_placed_the_same_on_columns_and_on_dataframes():
    """``_saved_on_liveness`` on the builder's typed columns gives the liveness table and per-step figures that
    it gives on DataFrames of the same tables (the stored dtypes, the same integers)."""
    from types import SimpleNamespace as NS

    import numpy as np
    import pandas as pd

    from popvision_lite.emulator.models import emulated
    from popvision_lite.profile.columns import Columns

    T = 3
    progs = {"prog_id": [0, 1, 2, 3, 4], "parent_id": [-1, 0, 0, 0, 0], "lstep": [-1, 0, 1, 2, 3]}
    steps = {"lstep": [0, 1, 2, 3], "prog_id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"],
             "total_bytes": [0] * 4, "max_tile_bytes": [0] * 4, "max_tile": [0] * 4}
    ltb = np.array([[5, 0, 9], [1, 2, 0], [0, 7, 1], [8, 1, 2]], np.uint32)

    def tensor(per_tile):
        a = np.array(per_tile, np.int64)
        return NS(mapping=NS(elements_per_tile=lambda _T: a), itemsize=2)

    be = NS(saved_spans=[(1, 2), (3, 3)], saved_copies=[tensor([2, 1, 0]), tensor([0, 0, 4])],
            ctx=NS(programs=[0, 1, 2, 3]))

    class Held(NS):  # tables as ProfileData holds them (ProfileData.table)
        def table(self, name):
            return getattr(self, name)

    full_cols = {c: progs.get(c, [0] * 5) for c in Columns.empty("programs").columns}
    as_cols = Held(programs=Columns.typed("programs", full_cols), liveness_tile_bytes=ltb.copy(),
                   liveness_steps=Columns.typed("liveness_steps", steps))
    as_frames = NS(programs=pd.DataFrame(progs), liveness_tile_bytes=ltb.copy(), liveness_steps=pd.DataFrame(steps))
    got = emulated._saved_on_liveness(be, as_cols, T)
    want = emulated._saved_on_liveness(be, as_frames, T)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1] == [(0, 2), (2, 3)]
    np.testing.assert_array_equal(as_cols.liveness_tile_bytes, as_frames.liveness_tile_bytes)
    assert isinstance(as_cols.liveness_steps, Columns)  # kept as columns
    for c in ("total_bytes", "max_tile_bytes", "max_tile"):
        np.testing.assert_array_equal(as_cols.liveness_steps[c], as_frames.liveness_steps[c].to_numpy())
    # the saved inputs' bytes are in the per-step figures: step 0 holds the first one (3 B a tile x 2)
    assert as_cols.liveness_steps["total_bytes"].tolist() == [14 + 6, 3 + 6, 8 + 6 + 8, 11 + 8]
