"""A seeded subset of bench/fuzz_profiles: every mutated profile opens and reads consistently or raises
ProfileError naming the file -- never another exception, a hang or a crash.  The subset is one case of every
mutation kind (``make_cases`` takes the kinds round-robin first); the campaign of many cases of each kind
(600 cases) is ``python -m bench.fuzz_profiles``, recorded in docs/performance.md."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the bench package lives at the repo root
from bench import fuzz_profiles as fz  # noqa: E402

SEED = 11
N_CASES = len(fz.MUTATORS)  # one of each kind (45 before: 30 more of the same kinds, 2.2 s of the suite's CPU)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    base = fz.make_base(folder)
    cases = fz.make_cases(base, folder / "cases", N_CASES, SEED)
    # crash / hang self-tests ride along so the harness is checked in the same worker run
    cases.append(dict(id=1000, kind="selftest", what="segfault", path=None, selftest="segfault"))
    cases.append(dict(id=1001, kind="selftest", what="hang", path=None, selftest="hang"))
    # one worker (the campaign's default is two): each worker imports the reader and the analysis afresh, and
    # the self-tests still kill it twice, so a fresh worker takes the hang after the segfault
    return fz.run_cases(cases, workers=1, timeout=6.0), base


def test_every_mutation_kind_is_exercised(results):
    res, _ = results
    kinds = {r["kind"] for r in res if r["outcome"] != "skipped"}
    assert set(fz.MUTATORS) <= kinds


def test_no_case_escapes_as_another_exception_hang_or_crash(results):
    res, _ = results
    real = [r for r in res if r["kind"] != "selftest"]
    assert len(real) == N_CASES
    bad = [f"case {r['id']} [{r['kind']}] {r['what']}: {r['outcome']}: {r['detail']}"
           for r in real if r["outcome"] in fz.FAIL_OUTCOMES]
    assert not bad, "\n".join(bad)
    counts = Counter(r["outcome"] for r in real)
    # the mutations mostly break the file; some (a flipped bit in compressed data that still decodes,
    # a value that stays in range) leave a readable, consistent profile
    assert counts["profile_error"] >= N_CASES // 2, counts
    assert counts["skipped"] <= 2, counts


def test_profile_errors_name_the_file_and_the_problem(results):
    res, _ = results
    errs = [r for r in res if r["outcome"] == "profile_error"]
    assert errs
    for r in errs:
        assert r["detail"].startswith(r["path"] + ": ")
        assert len(r["detail"]) > len(r["path"]) + 5


def test_harness_catches_a_crash_and_a_hang(results):
    res, _ = results
    by_id = {r["id"]: r for r in res}
    assert by_id[1000]["outcome"] == "crash"
    assert by_id[1001]["outcome"] == "timeout"


def test_base_profile_reads_consistently(results):
    _, base = results
    assert fz.classify(base) == ("ok", "")


def test_classify_flags_garbage_the_reader_would_let_through(results, tmp_path, monkeypatch):
    """The consistency checks are real: with the reader's memory check disabled, a negative byte count
    in the memory array is reported as 'inconsistent', not 'ok'."""
    import shutil

    from popvision_lite.profile import reader

    _, base = results
    f = tmp_path / "neg.pvl"
    shutil.copy(base, f)
    with fz._h5(f) as h:
        a = h["arrays/memory"][()]
        a[3, 0, 0] = -5
        h["arrays/memory"][...] = a
    assert fz.classify(f)[0] == "profile_error"
    monkeypatch.setattr(reader._Memory, "array", lambda self: self._p._read_array("memory"))
    outcome, detail = fz.classify(f)
    assert outcome == "inconsistent" and "negative memory" in detail
