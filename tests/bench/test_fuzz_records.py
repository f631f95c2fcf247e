"""A seeded handful of bench/fuzz_records (the campaign is ``python -m bench.fuzz_records``, numbers in
docs/performance.md): run-record and phases mutations through the reader and the commands, and planted sweep
folders resumed without a cluster.  In-process and small (the suite's CPU budget): the full harness, its worker
processes, Dask-run points, concurrent sweeps and the strace sample are the campaign's."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import fuzz_records as fr  # noqa: E402
from popvision_lite.errors import ConfigError  # noqa: E402


def test_profile_mutations_are_refused_or_read_cleanly(tmp_path):
    cases = fr.profile_cases(tmp_path / "p", 2, seed=7, start=0)
    assert {c["kind"] for c in cases} <= {f"profile_{k}" for k in fr.PROFILE_MUTATIONS}
    for case in cases:
        if case["path"] is None:
            continue
        case["views"] = False
        outcome, detail = fr.classify_profile(case)
        assert outcome in ("ok", "refused"), (case["what"], outcome, detail)


def test_a_declared_kind_broken_is_known_to_be_refused():
    from popvision_lite.profile.run_record import Schedule

    key = Schedule.KEYS["replicas"]
    assert fr._breaks(key, "x") and fr._breaks(key, 0) and fr._breaks(key, 1e308) and not fr._breaks(key, 4)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A finished two-point sweep folder made without a cluster: each point run in-process."""
    from popvision_lite.sweep import point as pt

    tpl = tmp_path_factory.mktemp("tpl") / "template"
    tpl.mkdir()
    pts, names = fr._points()
    rows = []
    for p in pts:
        rows.append(pt.run_point(p.spec, str(tpl), p.config_hash, p.key, point_fn=fr.fast_point) | {"point": p.index})
    assert all(r["status"] == "ok" for r in rows), rows
    from popvision_lite.sweep import results

    results.write_results(tpl, rows, names)
    return tpl


@pytest.mark.parametrize("plants", [("link_lock",), ("fifo_run",), ("profiles_link",), ("link_csv", "stale_tmp"),
                                    ("hardlink_lock",), ("dangling_lock",)])
def test_planted_folders_are_refused_and_nothing_outside_changes(template, tmp_path, plants):
    from popvision_lite.sweep import engine

    case_dir = tmp_path / "case"
    case_dir.mkdir()
    rng = random.Random(0)
    folder = case_dir / "sweep"
    fr.shutil.copytree(template, folder, symlinks=True)
    (case_dir / "victim.txt").write_bytes(fr.VICTIM)
    (case_dir / "decoy").mkdir()
    for d in fr.DECOYS:
        (case_dir / "decoy" / d).write_bytes(fr.VICTIM)
    rows = sorted((folder / "rows").glob("*.json"))
    for what in plants:
        fr._plant_one(rng, what, folder, case_dir / "victim.txt", case_dir / "decoy", case_dir, rows)
    pts, names = fr._points()
    with pytest.raises(ConfigError, match="sweep folder file"):  # every point resumable: no cluster needed
        engine.run_sweep(pts, folder, grid_names=names, client=object())
    assert fr.check_after(case_dir, folder) == ""


def test_a_worker_keeps_no_profile_from_case_to_case(tmp_path):
    """A format-2.1 case as the campaign makes them (phases rebuilt) reads, and every command answers; afterwards
    no Profile of it is alive.  export_view once left its closed widgets to a deferred delete no event loop runs in
    a worker, and each held its profile: the worker grew ~14 MB a case until seed 45's case 788 (the 4-IPU
    pipelined 2.1 file) passed the 4 GiB cap.  The leak is per export, whatever the file: a 1-IPU MLP keeps its
    Profile alive the same way when ``gui.headless._delete_now`` leaves the deferred delete to an event loop (no
    ``delete_now()``); case 788 itself, through the CLI, is tests/cli/test_round4_fuzz_cases.py's."""
    import gc

    from popvision_lite.profile.reader import Profile
    from popvision_lite.testing.hostile_run import with_run

    src = fr.ROOT / "tests" / "fixtures" / "v2.1" / "mlp_mk2.pvl"
    path = with_run(src, tmp_path / "c.pvl", lambda r: r.__setitem__("profile_note", ""))
    outcome, detail = fr.classify_profile(dict(path=str(path), what="a 2.1 case", refuse=False, views=False))
    assert outcome == "ok", detail
    gc.collect()
    alive = [p for p in gc.get_objects() if isinstance(p, Profile) and str(getattr(p, "path", "")) == str(path)]
    assert alive == []
