"""``run_totals`` reads a profile's tables as numpy columns (decision 0471): the same totals from a profile whose
tables are DataFrames (a file read back) and from one whose tables are typed columns (``profile.columns.Columns``,
what the emulator's ProfileData holds and ``emulate``'s end-of-run lines read), and ``RunTotals.phases`` is
``RunTotals.phase_columns`` as a DataFrame."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from popvision_lite.analysis.run_totals import PHASE_TOTAL_COLUMNS, PhaseColumns, run_totals
from popvision_lite.profile.columns import Columns
from popvision_lite.profile.reader import open_profile

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


class _AsColumns:
    """An open profile whose every table is handed out as typed columns."""

    def __init__(self, p):
        self._p, self.target, self.run, self.memory, self.path = p, p.target, p.run, p.memory, p.path

    def stored_table(self, name):
        df = self._p.stored_table(name)
        return None if df is None else Columns.typed(name, df)


@pytest.mark.parametrize("name", ["bert_mini_4ipu_pipeline.pvl", "bert_large_1ipu_oom.pvl", "mlp_mk2.pvl"])
def test_the_totals_of_a_profile_held_as_columns_are_those_of_its_frames(name):
    with open_profile(SAMPLES / name) as p:
        frames, cols = run_totals(p), run_totals(_AsColumns(p))
        for f in dataclasses.fields(frames):
            a, b = getattr(frames, f.name), getattr(cols, f.name)
            if isinstance(a, np.ndarray):
                assert a.dtype == b.dtype and np.array_equal(a, b), f.name
            else:
                assert a == b, f.name
        assert frames.headline() == cols.headline()
        pd.testing.assert_frame_equal(frames.phases, cols.phases, check_dtype=False, check_exact=True)
        ph = frames.phases  # the frame: the phases table, then the added columns, each the column of phase_columns
        assert list(ph.columns) == list(frames.phase_columns.columns)
        assert list(ph.columns[-len(PHASE_TOTAL_COLUMNS) - 1:]) == [*PHASE_TOTAL_COLUMNS, "share_of_step"]
        assert len(ph) == len(frames.phase_columns) == len(p.stored_table("phases"))
        for c in ph.columns:
            assert np.array_equal(ph[c].to_numpy(), frames.phase_columns[c]), c
        assert frames.phases is ph  # built once


def test_phase_columns_are_equal_only_with_the_same_values():
    a = PhaseColumns({"name": np.array(["fill", "drain"], object), "wall_cycles": np.array([3, 4])}, 2, None, 7)
    same = PhaseColumns({"name": np.array(["fill", "drain"], object), "wall_cycles": np.array([3, 4])}, 2, None, 7)
    other = PhaseColumns({"name": np.array(["fill", "drain"], object), "wall_cycles": np.array([3, 5])}, 2, None, 7)
    renamed = PhaseColumns({"name": np.array(["fill", "drain"], object), "cycles": np.array([3, 4])}, 2, None, 7)
    assert a == same and a != other and a != renamed
