"""A fast seeded subset of bench/fuzz_hostile (the full run is ``python -m bench.fuzz_hostile``): hostile
but valid HDF5 profiles, special files and CLI/TOML abuse, each case in a memory-capped worker process
with a timeout.  No case may crash, hang, blow the cap, read outside the profile, be accepted while
inconsistent, or end in another exception; every CLI case exits 2 naming what is wrong."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import fuzz_hostile as fh  # noqa: E402

# every kind at least once, few repeats: a case that opens goes through every view, which is what costs (the
# campaign of 2,400 cases is ``python -m bench.fuzz_hostile``; docs/performance.md "Test suite CPU")
N_FILES = len(fh.HOSTILE) + 1
N_CLI = 16
I27_REPEATS = 1  # each of the three issue-27 cases once (the campaign: 4)
# 12 special files (4 x trace, ONNX, CSV) + 3 issue-27 cases, then each of the 4 other kinds once (the campaign
# draws more of each kind by weight)
N_SURFACES = 12 + 3 * I27_REPEATS + 4


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    base = fh.fz.make_base(folder)
    cases = fh.make_cases(base, folder / "cases", N_FILES, seed=5)
    cases += fh.special_cases(folder / "cases", len(cases))
    cli = fh.cli_cases(folder / "cli", len(cases), seed=5)
    cli = random.Random(5).sample(cli, N_CLI)
    for i, c in enumerate(cli):
        c["id"] = len(cases) + i
    from bench import fuzz_surfaces

    surf = fuzz_surfaces.make_cases(folder / "surfaces", base, N_SURFACES, 5, len(cases) + len(cli), I27_REPEATS)
    cases += cli + surf
    # the cases that load Qt last, as the campaign orders them (bench.fuzz_hostile.all_cases); one worker: a second
    # one would import the app and Qt again for the same cases (the campaign runs two, and a test of the harness
    # replacing a dead worker is tests/profile/test_fuzzed_files.py's)
    cases.sort(key=lambda c: bool(c.get("views") or c["kind"] in ("text_payload", "issue27", "csv")))
    # a case's bound is generous: building every view of a case took over 30 s of wall time at load 10 on two cores
    # (a hang is a case that never answers; the campaign's default is 30 s)
    return fh.run(cases, workers=1, timeout=120.0, mem_mb=fh.MEM_MB)


def test_every_kind_ran(results):
    kinds = {r["kind"] for r in results if r["outcome"] != "skipped"}
    assert set(fh.HOSTILE) | {"special_file", "cli"} | set(fh.SURFACE_KINDS) <= kinds
    assert any(r["outcome"] == "views_ok" and r["kind"] == "text_payload" for r in results)


def test_no_failure(results):
    bad = [f"case {r['id']} [{r['kind']}] {r['what']}: {r['outcome']}: {r['detail']}"
           for r in results if r["outcome"] in fh.FAILS]
    assert not bad, "\n".join(bad)
    c = Counter(r["outcome"] for r in results)
    assert c["skipped"] <= 2, c
    assert sum(r["outcome"] == "refused" for r in results if r["kind"] == "cli") == N_CLI, c


def test_classify_flags_an_accepted_inconsistent_file(tmp_path, monkeypatch):
    """The harness is real: with the validator switched off, a duplicate program id reads as 'accepted'."""
    from popvision_lite.profile import consistency

    base = fh.fz.make_base(tmp_path)
    dst = tmp_path / "ids.pvl"
    what = fh.h_ids(random.Random(1), base, dst)
    case = dict(id=0, kind="ids", what=what, path=str(dst))
    assert fh.classify(case)[0] == "profile_error"
    monkeypatch.setattr(consistency, "check_table", lambda *a, **k: None)
    assert fh.classify(case)[0] in ("accepted", "other_exception")
