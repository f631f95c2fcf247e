"""popvision-lite sweep: grids, the Dask engine (1 worker process on loopback), rows, failure isolation,
resume, cancellation, the results table and bad input.  Points in flight on two workers at once are
tests/sweep/test_cancel_and_clusters.py's (its module cluster has two)."""

from __future__ import annotations

import math
import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popvision_lite as pvl
from popvision_lite.cli import main
from popvision_lite.emulator.models.config import ModelConfig
from popvision_lite.errors import ConfigError, ProfileError
from popvision_lite.sweep import engine
from popvision_lite.sweep import grid as g
from popvision_lite.sweep.results import pareto_front
from tests.support import sweep_points as sweep_fixtures  # noqa: E402

TINY = {"hidden": 32, "layers": 2}
# no test here needs two points in flight at once (test_cancel_and_clusters.py's cancel does, on two workers): one
# worker process, its fork server and its heartbeats instead of two
CLUSTER_WORKERS = 1


def _points(grid, model="mlp", args=TINY):
    base = g.Base(model=model, model_args=dict(args))
    grid = g.check_grid(grid, "test")
    return g.expand(base, grid), list(grid)


def _sweep(client, folder, grid, **kw):
    pts, names = _points(grid)
    return pts, engine.run_sweep(pts, folder, grid_names=names, client=client, **kw)


# ----------------------------------------------------------------------------- grids
def test_grid_fields_are_read_from_the_config_definitions(monkeypatch):
    fields = set(g.grid_fields())
    assert ModelConfig.field_names() <= fields and {"device", "timing_only"} <= fields
    assert "output" not in fields and "model_args" not in fields
    assert {"replicas", "grad_accum", "optimizer_state"} <= fields  # the at-scale fields (issue 13) sweep too
    with pytest.raises(ConfigError, match="field 'tile_colour'"):
        g.check_grid({"tile_colour": [1, 2]}, "t")
    # a field given a definition in the run config is sweepable at once, with no list to update here
    from popvision_lite.emulator.run_config import FIELDS, RunConfigField

    monkeypatch.setitem(FIELDS, "tile_colour", RunConfigField("tile_colour", "int"))
    assert g.check_grid({"tile_colour": [1, 2]}, "t") == {"tile_colour": [1, 2]}


def test_grid_values_parse_like_toml_and_expand_to_the_product():
    grid = g.parse_grid_args(["batch=8,16", "device=ipu-mk2,bow", "recompute=true,false", "lr=0.5",
                              "layer_split=[1,2],[3,0]"])
    assert grid == {"batch": [8, 16], "device": ["ipu-mk2", "bow"], "recompute": [True, False], "lr": [0.5],
                    "layer_split": [[1, 2], [3, 0]]}
    pts, _ = _points({"batch": [8, 16], "device": ["ipu-mk2", "bow"]})
    assert [(p.spec["args"]["batch"], p.spec["device"]) for p in pts] == [
        (8, "ipu-mk2"), (8, "ipu-bow"), (16, "ipu-mk2"), (16, "ipu-bow")]
    assert len({p.config_hash for p in pts}) == 4
    # the hash is of what is emulated: the same point from another grid order has the same hash
    again, _ = _points({"device": ["ipu-bow"], "batch": [16]})
    assert again[0].config_hash == pts[3].config_hash


@pytest.mark.parametrize("argv, needle", [
    (["--model", "mlp", "--grid", "bach=8,16"], "field 'bach': not a run-config field"),
    (["--model", "mlp"], "the grid is empty"),
    (["--model", "mlp", "--grid", "batch=8,x"], "field 'batch'"),  # type check of run_config (wording theirs)
    (["--model", "mlp", "--grid", "device=ipu-mk9"], "ipu-mk9"),
    (["--model", "mlp", "--grid", "batch=" + ",".join(map(str, range(1, 102))),
      "--grid", "hidden=" + ",".join(map(str, range(1, 101)))], "10,100 points (over 10,000)"),
    (["--model", "mlp", "--grid", "batch=8", "--scheduler", "localhost"], "not a scheduler address"),
    (["--model", "mlp", "--grid", "batch=8", "--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "0.5"],
     "cannot reach the Dask scheduler at tcp://127.0.0.1:1"),
])
def test_bad_input_exits_2_naming_the_problem(tmp_path, capsys, argv, needle):
    assert main(["sweep", *argv, "-o", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_bad_sweep_file_names_file_and_field(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text('model = "mlp"\nhidden = 32\n[grid]\nbatch = [8]\noptimiser = ["adam"]\n')
    assert main(["sweep", str(f)]) == 2
    assert f"{f}: [grid]: field 'optimiser'" in capsys.readouterr().err
    f.write_text('model = "mlp"\n[grid]\n')
    assert main(["sweep", str(f)]) == 2
    assert "the grid is empty" in capsys.readouterr().err


# ----------------------------------------------------------------------------- running
def test_rows_profiles_and_costs(client, tmp_path):
    pts, o = _sweep(client, tmp_path / "s", {"batch": [8, 16], "device": ["ipu-mk2", "ipu-bow"]})
    assert (o.ok, o.failed, o.cancelled) == (4, 0, False)
    df = pvl.open_sweep(tmp_path / "s")
    assert list(df["point"]) == [0, 1, 2, 3] and set(df["status"]) == {"ok"}
    assert list(df.columns[:5]) == ["point", "status", "error", "batch", "device"]
    for _, r in df.iterrows():
        p = pvl.open(r["profile"])  # every profile is complete and matches its row
        try:
            assert p.run["config"]["batch"] == r["batch"] and p.run["config"]["device"] == r["device"]
            assert int(p.run["total_cycles"]) == r["total_cycles"]
        finally:
            p.close()
        assert r["samples_per_second"] == pytest.approx(r["batch"] / r["step_seconds"])
        shares = r["compute_share"] + r["exchange_share"] + r["sync_share"] + r["stream_copy_share"] + r["host_share"]
        assert shares == pytest.approx(1.0) and 0 < r["peak_tile_memory_pct"] < 100 and r["fits"]
    mk2, bow = df[df.device == "ipu-mk2"], df[df.device == "ipu-bow"]
    # one price source with the verdict and the roofline: Mk2 has none of its own, priced at the Bow rate and said so
    want = 1.67 * 1 * 1e6 / bow["samples_per_second"] / 3600  # ipu-bow.toml [price] 1.67 USD per IPU-hour
    assert np.allclose(bow["cost_per_1m_samples_usd"], want)
    assert np.allclose(mk2["cost_per_1m_samples_usd"], 1.67 * 1e6 / mk2["samples_per_second"] / 3600)
    assert mk2["cost_note"].str.contains("no published price; priced at the Bow IPU rate").all()
    from popvision_lite.analysis.verdict import _price
    from popvision_lite.devices import load_device

    assert _price(load_device("ipu-mk2"), [], [])[1] in mk2["cost_note"].iloc[0]  # the verdict's words, verbatim
    # same cycles, faster clock: Bow is quicker per sample than Mk2 for the same point
    assert (bow["samples_per_second"].to_numpy() > mk2["samples_per_second"].to_numpy()).all()
    assert df.attrs["grid"] == {"batch": [8, 16], "device": ["ipu-mk2", "ipu-bow"]}
    # each point reports the CPU seconds of its own work (its process, from its start to its row)
    assert list(df.columns[-3:]) == ["wall_seconds", "cpu_seconds", "host"]
    assert (df["cpu_seconds"] > 0).all() and np.isfinite(df["cpu_seconds"]).all()


def test_resume_skips_finished_points_and_reruns_changed_ones(client, tmp_path):
    folder = tmp_path / "s"
    pts, o = _sweep(client, folder, {"batch": [8, 16, 24]})
    assert o.ok == 3
    mtimes = {p.key: (folder / "profiles" / f"{p.key}.pvl").stat().st_mtime_ns for p in pts}
    _, again = _sweep(client, folder, {"batch": [8, 16, 24]})
    assert (again.resumed, again.ok, again.failed) == (3, 0, 0)
    assert {p.key: (folder / "profiles" / f"{p.key}.pvl").stat().st_mtime_ns for p in pts} == mtimes
    (folder / "rows" / f"{pts[0].key}.json").unlink()  # row missing -> runs again
    (folder / "profiles" / f"{pts[1].key}.pvl").unlink()  # profile missing -> runs again
    _, third = _sweep(client, folder, {"batch": [8, 16, 24]})
    assert (third.resumed, third.ok) == (1, 2)
    assert len(pd.read_csv(folder / "sweep.csv")) == 3


def test_invalid_combination_fails_its_point_only(client, tmp_path):
    """Each value is valid on its own (the grid is read), but 2 layers cannot fill 4 pipeline stages."""
    _, o = _sweep(client, tmp_path / "s", {"ipus": [1, 4]})
    assert (o.ok, o.failed) == (1, 1)
    bad = o.rows[1]
    assert bad["status"] == "failed" and "field 'layers'" in bad["error"] and not bad["profile"]
    df = pvl.open_sweep(tmp_path / "s" / "sweep.csv")
    assert df.loc[1, "profile"] == "" and "cannot fill 4 pipeline stages" in df.loc[1, "error"]
    assert df.loc[1, "cpu_seconds"] > 0  # a failed point reports what it cost too


def test_segfault_in_a_point_fails_that_point_and_the_sweep_goes_on(client, tmp_path):
    pts, o = _sweep(client, tmp_path / "p", {"batch": [8, 16, 24, 32]}, isolate="process",
                    point_fn=sweep_fixtures.crash_on_batch)
    by_batch = {r["batch"]: r for r in o.rows}
    assert by_batch[16]["status"] == "failed" and "killed by SIGSEGV" in by_batch[16]["error"]
    assert by_batch[24]["status"] == "failed" and "killed by SIGKILL (out of memory?)" in by_batch[24]["error"]
    assert by_batch[8]["status"] == by_batch[32]["status"] == "ok"
    # in-worker mode: the crash kills the worker itself; the nanny restarts it, the point is run once more
    # (engine.MAX_ATTEMPTS: the worker dies twice, each death a worker restart) and then marked failed
    _, o = _sweep(client, tmp_path / "w", {"batch": [8, 16]}, isolate="worker",
                  point_fn=sweep_fixtures.crash_on_batch)
    by_batch = {r["batch"]: r for r in o.rows}
    assert len(o.rows) == 2 and by_batch[16]["status"] == "failed"
    assert "worker process died each time it ran this point (2 tries)" in by_batch[16]["error"]
    # the pool is whole again afterwards: a new sweep on the same cluster runs normally
    _, o = _sweep(client, tmp_path / "after", {"batch": [8]})
    assert o.ok == 1


def test_point_timeout_fails_the_slow_point(client, tmp_path):
    _, o = _sweep(client, tmp_path / "s", {"batch": [8]}, point_fn=sweep_fixtures.slow,
                  point_timeout=sweep_fixtures.SLOW_S / 3)
    assert o.failed == 1 and "timed out after" in o.rows[0]["error"]
    assert not list((tmp_path / "s").rglob("*.tmp")) and not list((tmp_path / "s" / "profiles").iterdir())


def test_point_memory_cap_turns_a_runaway_point_into_a_failed_row(client, tmp_path):
    _, o = _sweep(client, tmp_path / "s", {"batch": [8]}, point_fn=sweep_fixtures.greedy, point_memory=3 * 2**30)
    assert o.failed == 1 and "out of host memory (MemoryError" in o.rows[0]["error"]
    _, o = _sweep(client, tmp_path / "t", {"batch": [8]}, point_memory=3 * 2**30)  # a normal point fits under it
    assert o.ok == 1


def test_cancel_keeps_finished_rows_and_resume_completes(client, tmp_path):
    folder = tmp_path / "s"
    grid = {"batch": [8, 16, 24, 32, 40, 48]}
    done = []
    _, o = _sweep(client, folder, grid, point_fn=sweep_fixtures.slow,
                  progress=lambda out, total: done.append(out.ok), should_cancel=lambda: bool(done) and done[-1] >= 2)
    assert o.cancelled and 2 <= o.ok < 6
    assert not list(folder.rglob("*.tmp"))
    df = pvl.open_sweep(folder)
    assert len(df) == o.ok and set(df["status"]) == {"ok"}
    for path in df["profile"]:
        pvl.open(path).close()  # every profile written is whole
    _, rest = _sweep(client, folder, grid)
    assert rest.resumed >= o.ok and rest.resumed + rest.ok == 6 and len(pvl.open_sweep(folder)) == 6


def test_ctrl_c_never_interrupts_a_distributed_call(client, tmp_path, monkeypatch, caplog):
    """SIGINT while the client waits inside a ``distributed`` call (Future.result -> Client.sync) must not raise
    there: a KeyboardInterrupt inside ``distributed.utils.sync`` can make its cancel callback fail with a
    NameError that tornado prints as a traceback on stderr (the rare failure of the CLI Ctrl+C test below).
    The sweep notes the Ctrl+C and stops at its own loop: cancelled, finished rows kept, handler restored."""
    import asyncio
    import threading

    from distributed import Future

    real_result = Future.result
    waited = []

    def result(self, *a, **kw):
        if not waited:  # the first row: Ctrl+C arrives while the main thread waits in Client.sync
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            self.client.sync(asyncio.sleep, 0.4)
            waited.append(True)  # reached only if the SIGINT did not raise inside the distributed call
        return real_result(self, *a, **kw)

    monkeypatch.setattr(Future, "result", result)
    before = signal.getsignal(signal.SIGINT)
    pts, o = _sweep(client, tmp_path / "c", {"batch": [8, 16, 24, 32, 40, 48]}, isolate="worker",
                    point_fn=sweep_fixtures.slow)
    assert waited == [True]
    assert o.cancelled and 1 <= o.ok < len(pts) and signal.getsignal(signal.SIGINT) is before
    assert not [r for r in caplog.records if r.name.startswith("tornado") and r.levelname == "ERROR"]
    assert set(pvl.open_sweep(tmp_path / "c")["status"]) == {"ok"}


def test_cli_on_an_existing_scheduler(client, tmp_path, capsys):
    """--scheduler: the same sweep submitted to a running cluster (here the loopback test cluster); the
    workers write into the shared folder and only rows come back."""
    folder = tmp_path / "remote"
    argv = ["sweep", "--model", "mlp", "--grid", "hidden=32", "--grid", "layers=2", "--grid", "batch=8,16",
            "--scheduler", client.scheduler.address, "-q", "-o", str(folder)]
    assert main(argv) == 0
    df = pvl.open_sweep(folder)
    assert list(df["batch"]) == [8, 16] and set(df["status"]) == {"ok"}
    assert all(Path(p).is_file() for p in df["profile"])
    assert "results:" in capsys.readouterr().out
    assert main(argv) == 0  # the cluster is left running for its owner; a second run resumes on it
    assert "2 ok (2 resumed)" in capsys.readouterr().out


def test_sweep_file_with_base_config_and_grid(client, tmp_path):
    f = tmp_path / "s.toml"
    out = tmp_path / "from_toml"
    f.write_text(f'model = "mlp"\noutput = "{out}"\n[model_args]\nhidden = 32\nlayers = 2\n'
                 '[grid]\nbatch = [8]\ndevice = ["ipu-mk2", "bow"]\n')
    assert main(["sweep", str(f), "--scheduler", client.scheduler.address, "-q"]) == 0
    df = pvl.open_sweep(out)
    assert list(df["device"]) == ["ipu-mk2", "ipu-bow"] and set(df["hidden"]) == {32}
    assert df.attrs["grid"] == {"batch": [8], "device": ["ipu-mk2", "ipu-bow"]}


def test_row_uses_the_emulators_throughput_and_step_time_when_it_reports_them(tmp_path):
    """CONTRACT.md: RunResult.samples_per_second (all replicas) and schedule['step_seconds'] win over
    batch / (cycles / clock) once the emulator provides them."""
    from popvision_lite.sweep.point import emulate, metrics

    prof = tmp_path / "p.pvl"
    run = emulate({"model": "mlp", "device": "ipu-bow", "timing_only": True, "args": TINY}, str(prof))
    reported = metrics(run, "ipu-bow", prof)  # every model's run now reports its throughput and schedule
    from popvision_lite.analysis.run_totals import run_totals

    with pvl.open(prof) as p:  # the shares are the written profile's, as info and the views show them
        share = run_totals(p).part_share
    assert [reported[f"{k}_share"] for k in ("compute", "exchange", "sync", "stream_copy")] == \
        [share[k] for k in ("compute", "exchange", "sync", "stream")]
    assert reported["samples_per_second_basis"].startswith("emulator")
    assert reported["samples_per_second"] == pytest.approx(
        run.schedule["samples_per_step"] / run.schedule["step_seconds"])
    from popvision_lite.profile.run_record import Schedule

    run.samples_per_second, run.schedule = None, Schedule()  # a run that reports neither: batch / step time
    plain = metrics(run, "ipu-bow", prof)
    assert plain["samples_per_second_basis"].startswith("batch / step time")
    run.samples_per_second, run.schedule = 1234.0, Schedule.build({"step_seconds": 0.5})
    m = metrics(run, "ipu-bow", prof)
    assert m["samples_per_second"] == 1234.0 and m["samples_per_second_basis"].startswith("emulator")
    assert m["step_seconds"] == 0.5
    assert m["cost_per_1m_samples_usd"] == pytest.approx(1.67 * m["chips"] * 1e6 / 1234.0 / 3600)


# ----------------------------------------------------------------------------- results
def test_open_sweep_refuses_other_files(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n")
    with pytest.raises(ProfileError, match="not a sweep results table"):
        pvl.open_sweep(f)
    with pytest.raises(ProfileError, match="no such sweep results file"):
        pvl.open_sweep(tmp_path / "nothing")


def test_pareto_front():
    thr = [10, 20, 30, 30, 5, math.nan]
    cost = [1.0, 2.0, 2.5, 3.0, 0.5, 0.1]
    assert list(pareto_front(thr, cost)) == [True, True, True, False, True, False]
