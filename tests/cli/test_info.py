"""popvision-lite info: summary numbers come from the profile; bad files exit 2 with a clear message."""

from __future__ import annotations

import json

import numpy as np
import pytest

from popvision_lite.analysis.run_totals import run_totals
from popvision_lite.cli import main
from popvision_lite.profile.reader import open_profile
from popvision_lite.testing.synthetic import write_synthetic


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_synthetic(tmp_path_factory.mktemp("info") / "run.pvl", num_ipus=2, tiles_per_ipu=32,
                           num_steps=150, over_capacity_tiles=2, num_layers=2)


def test_info_json_matches_profile(path, capsys):
    assert main(["info", str(path), "--json", "--top", "3"]) == 0
    s = json.loads(capsys.readouterr().out)
    with open_profile(path) as p:
        steps = p.stored_table("steps")
        assert s["steps"] == len(steps) == 150
        assert s["total_cycles"] == steps["end_cycle"].iloc[-1] - steps["start_cycle"].iloc[0]
        assert sum(k["steps"] for k in s["step_kinds"].values()) == 150
        tot = p.stored_table("memory_by_tile")["total"].to_numpy()
        assert s["memory"]["max_tile_bytes"] == tot.max() and s["memory"]["max_tile"] == int(np.argmax(tot))
        assert s["memory"]["tiles_over_capacity"] == 2
        rt = run_totals(p)  # the one definition: cycles per step, share of the IPU time of both IPUs
        assert [o["name"] for o in s["top_ops"]] == [rt.op_names[i] for i in np.argsort(-rt.op_cycles)[:3]]
        assert s["ipu_time"]["cycles"] == 2 * s["step_cycles"] == sum(s["ipu_time"]["parts"].values())
        assert s["ipus"]["text"] == "1 replica x 2 IPUs = 2 IPUs"
        assert s["target"]["num_tiles"] == 64


def test_info_text(path, capsys):
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert str(path) in out and "2 tile(s) over capacity" in out and "top ops by cycles" in out


def test_info_bad_file(tmp_path, capsys):
    bad = tmp_path / "x.pvl"
    bad.write_text("nope")
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "not a popvision-lite profile" in err
