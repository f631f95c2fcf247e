"""Every table the notebook API hands out follows one set of pandas conventions (profile/public.py, decision 0250):
index named as its docstring says, ``<NA>`` instead of -1, quantities int64 / float64, snake_case names; the
tables that stand for repeated work carry their weight and add up to the Summary (analysis/run_totals.py)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popvision_lite as pvl
from popvision_lite.analysis.run_totals import run_totals
from popvision_lite.profile import public, schema
from popvision_lite.profile.reader import Profile

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
# integer columns that are ids or codes, not quantities: they keep the width the file stores
IDS = {"step", "op_id", "prog_id", "cs_id", "var_id", "lstep", "phase_id", "parent_id", "first_step", "last_step",
       "first_lstep", "last_lstep", "tile", "max_tile", "ipu", "tile_in_ipu", "kind", "point", "peak_tile"}
NULLABLE_INTS = {"Int8", "Int16", "Int32", "Int64"}


def _check_conventions(df: pd.DataFrame, what: str, index: str | None) -> None:
    assert isinstance(df, pd.DataFrame), what
    assert df.index.name == index, (what, df.index.name, index)
    if index is None:
        assert isinstance(df.index, pd.RangeIndex) and df.index.start == 0, what
    for col in [*df.columns, *([df.index.name] if index else [])]:
        assert isinstance(col, str) and SNAKE.match(col), (what, col)  # one naming style
    for col in df.columns:
        dt = df[col].dtype
        assert dt.kind != "u", (what, col, dt)  # no unsigned integer wraps on subtraction
        if dt.kind == "i" or str(dt) in NULLABLE_INTS:
            if col not in IDS:
                assert str(dt) in ("int64", "Int64"), (what, col, dt)  # quantities in int64
            vals = df[col].dropna().to_numpy()
            if col in IDS and vals.size:
                assert vals.min() >= 0, (what, col)  # "none" is <NA>, never a -1 sentinel
        if dt.kind == "O":  # text or lists; never numbers hidden in an object column
            assert not df[col].map(lambda v: isinstance(v, int | float) and not isinstance(v, bool)).any(), (what, col)


def _docstring_index(doc: str) -> str | None:
    m = re.search(r"index\s+=\s+``(\w+)``", doc)
    if m:
        return m.group(1)
    assert re.search(r"[Ii]ndex:\s+row\s+numbers", doc), doc
    return None


@pytest.mark.parametrize("sample", ["bert_mini_4ipu_pipeline.pvl", "bert_tiny_mk2.pvl"])
def test_every_profile_table_follows_the_conventions_its_docstring_states(sample):
    with pvl.open(SAMPLES / sample) as p:
        for name in (*schema.TABLE_COLUMNS, "tiles", "totals"):
            doc = getattr(Profile, name).__doc__
            want = _docstring_index(doc)
            assert want == public.INDEX.get(name), name
            _check_conventions(getattr(p, name), name, want)
        mem = p.memory.by_tile()
        assert _docstring_index(type(p.memory).by_tile.__doc__) == "tile"
        _check_conventions(mem, "memory_by_tile", "tile")
        assert list(mem.columns[:len(schema.MEMORY_CATEGORIES)]) == list(p.memory.category_columns)
        w = p.step_tiles.window(0, 5, tiles=range(4)).to_frame()
        _check_conventions(w, "window", None)
        for name in schema.TABLES:  # p.table(name) is the same table
            assert p.table(name).equals(getattr(p, name) if name != "memory_by_tile" else mem), name


def test_the_other_tables_of_the_api(tmp_path):
    with pvl.open(SAMPLES / "bert_tiny_mk2.pvl") as p:
        _check_conventions(pvl.insights(p).to_frame(), "insights", None)
    with pvl.compare(SAMPLES / "mlp_mk2.pvl", SAMPLES / "mlp_bow.pvl") as c:
        for what, df in (("headline", c.headline), ("facts", c.facts), ("op_table", c.op_table())):
            _check_conventions(df, what, None)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5,
         "args": {"External id": 1, "Input Dims": [[4, 8], [8, 2]], "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 2, "args": {"External id": 1}}]}))
    _check_conventions(pvl.torch_trace(trace), "torch_trace", None)


def test_a_sweep_table_keeps_whole_numbers_whole(tmp_path):
    """A failed point used to turn every number column into float (point 0.0, total_cycles 24511.0)."""
    from tests.support.sweep_table import write_sweep_table

    write_sweep_table(tmp_path, ["ipus", "batch", "recompute"], [
        dict(point="0", status="ok", ipus="1", batch="64", recompute="False", fits="True", chips="1",
             total_cycles="24511", peak_tile="67", samples_per_second="3.4e6", profile="a.pvl"),
        dict(point="1", status="failed", ipus="4", error="layers < stages")])
    df = pvl.open_sweep(tmp_path)
    _check_conventions(df, "open_sweep", None)
    for col in ("point", "ipus", "batch", "chips", "total_cycles", "peak_tile"):
        assert df[col].dtype == "Int64", col
    assert list(df["point"]) == [0, 1] and df["total_cycles"].iat[0] == 24511 and pd.isna(df["total_cycles"].iat[1])
    assert df["recompute"].dtype == "boolean" and df["samples_per_second"].dtype == np.float64


def test_none_is_na_where_the_file_stores_minus_one():
    with pvl.open(SAMPLES / "bert_mini_4ipu_pipeline.pvl") as p:
        stored, s = p.stored_table("steps"), p.steps
        for col in ("op_id", "ipu"):
            none = stored[col].to_numpy() < 0
            assert none.any() and s[col].isna().to_numpy().tolist() == none.tolist(), col
            np.testing.assert_array_equal(s[col].to_numpy()[~none].astype(np.int64), stored[col].to_numpy()[~none])
        roots = p.programs["parent_id"].isna()
        assert roots.sum() == (p.stored_table("programs")["parent_id"] < 0).sum() >= 1
        # joins by index: each step's op name
        named = s.join(p.ops[["name"]], on="op_id")
        assert named["name"].isna().sum() == int((stored["op_id"] < 0).sum())


def test_old_names_still_read_with_a_deprecation_warning():
    with pvl.open(SAMPLES / "bert_tiny_mk2.pvl") as p:
        mem, steps = p.memory.by_tile(), p.steps
        for df, old, new in ((mem, "capacity", "capacity_bytes"), (mem, "vertexCode", "vertex_code_bytes"),
                             (mem, "total", "total_bytes"), (steps, "busy_max", "busy_max_cycles")):
            with pytest.warns(DeprecationWarning, match=f"'{old}' is now '{new}'"):
                got = df[old]
            assert got.equals(df[new])
        with pytest.warns(DeprecationWarning, match="'step' is now the index"):
            assert list(steps["step"]) == list(steps.index)
        with pytest.warns(DeprecationWarning):
            assert (mem.sort_values("total_bytes").capacity == mem["capacity_bytes"].iat[0]).all()  # derived frame
        w = p.step_tiles.window(0, 3, tiles=[1, 2])
        with pytest.warns(DeprecationWarning, match="to_frame"):
            assert w.frame().equals(w.to_frame())
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the new names warn nothing
            mem["capacity_bytes"], steps.index, w.to_frame()


def test_window_frame_subtracts_without_wrapping():
    """bytes_in - bytes_out of the stored uint32 counts wrapped to ~4.29e9 where a tile sent more than it got."""
    with pvl.open(SAMPLES / "bert_tiny_mk2.pvl") as p:
        f = p.step_tiles.window(0, p.num_steps).to_frame()
    net = f["bytes_in"] - f["bytes_out"]
    assert net.dtype == np.int64 and net.min() < 0 and net.max() < 2**31


def test_weighted_steps_and_totals_add_up_to_the_summary(pod_profile):
    """At pod scale one stored steady-state pipeline cycle stands for all of them: ``runs`` says how many, the
    weighted steps add up per phase to the busy IPU time of ``p.totals``, and ``p.totals`` to the Summary."""
    from popvision_lite.analysis.summary import summarize
    from popvision_lite.cli.info import info_numbers as info

    with pvl.open(pod_profile) as p:
        steps, totals, ph = p.steps, p.totals, p.phases
        rt = run_totals(p)
        steady = ph[ph["kind"] == "steady"].iloc[0]
        rows = steps.loc[steady["first_step"]:steady["last_step"]]
        assert steady["runs_per_step"] == 14 and (rows["runs"] > 10).all()  # one stored run stands for 14
        assert (steps.loc[ph["first_step"].iat[0]:ph["last_step"].iat[0], "runs"] == 1).all()  # the fill runs once
        # per phase with stored steps: their weighted IPU cycles = the phase's busy IPU cycles in the totals
        for pid, r in ph.iterrows():
            if pd.isna(r["first_step"]):
                continue
            got = steps.loc[r["first_step"]:r["last_step"], "ipu_cycles"].sum()
            want = totals[(totals["phase_id"] == pid) & ~totals["waiting"]]["ipu_cycles"].sum()
            assert got == pytest.approx(want, rel=1e-9), r["name"]
        # the totals are the Summary's numbers, and info's
        shares = totals.groupby("part", observed=False)["share"].sum()
        for part, share in rt.part_share.items():
            assert shares[part] == pytest.approx(share, abs=1e-6), part  # (the Summary rounds to whole cycles)
        s = summarize(p)
        assert s.phase_share == pytest.approx(shares.to_dict(), abs=1e-6)
        kinds = totals.groupby("kind_name", observed=False)["ipu_cycles"].sum()
        for k, v in rt.kind_cycles.items():
            assert kinds[k] == pytest.approx(v, abs=1.0), k
        parts = info(p)["ipu_time"]["parts"]
        assert totals.groupby("part", observed=False)["ipu_cycles"].sum().round().astype(int).to_dict() == \
            pytest.approx(parts, abs=1)
        assert totals["ipu_cycles"].sum() == pytest.approx(rt.ipu_time_cycles, abs=1.0)
        # unweighted, the stored steps mislead: they undercount the step by the runs they stand for
        assert steps["seconds"].sum() < 0.5 * steps["ipu_seconds"].sum() / rt.stages


def test_single_run_profiles_weigh_one(pvl_sample=SAMPLES / "bert_tiny_mk2.pvl"):
    """A run of one micro-batch: each stored step runs once, and the stored steps are the totals of the phase
    they make up (the host's step time is a phase of its own, stored without steps)."""
    with pvl.open(pvl_sample) as p:
        s, ph, t = p.steps, p.phases, p.totals
        assert (s["runs"] == 1).all() and (s["ipu_cycles"] == s["cycles"]).all()
        by_kind = s.groupby("kind_name", observed=False)["ipu_cycles"].sum()
        stored = ph.index[ph["first_step"].notna()]
        tot = t[t["phase_id"].isin(stored) & ~t["waiting"]].groupby("kind_name", observed=False)["ipu_cycles"].sum()
        # the totals' kinds are the step kinds and "host" (a host term's rows, in no stored phase)
        assert tot.pop("host") == 0 and list(tot.index.astype(str)) == list(by_kind.index.astype(str))
        np.testing.assert_array_equal(by_kind.to_numpy(), tot.to_numpy())
        others = t[~t["phase_id"].isin(stored)]
        assert set(others["phase"]) == set(ph.loc[ph["first_step"].isna(), "name"])
