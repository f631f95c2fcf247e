"""``emulate`` prints what it ran from the run in memory and reads nothing back from the profile it wrote (its
tables: millions of rows on 16 IPUs): the end-of-run text, the time split line and, for a run that does not fit,
the advice.  With the reader refusing every file, a run that does not fit (the time split, then the advice) still
prints every line."""

from __future__ import annotations

import pytest

import popvision_lite.profile.reader as reader


@pytest.fixture
def no_reading(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("emulate read its profile back")

    monkeypatch.setattr(reader, "open_profile", refuse)
    monkeypatch.setattr(reader.Profile, "__init__", refuse)


def test_a_run_that_does_not_fit_reads_nothing_back(cli, tmp_path, no_reading):
    rc, out, err = cli(["emulate", "mlp", "--device", "mk1", "--hidden", "8192", "--layers", "1", "--batch", "4",
                        "--inference", "--precision", "fp32", "--timing-only", "-q", "-o", tmp_path / "oom.pvl"])
    assert rc == 3, err
    assert "fits: NO" in out and "time split of one step" in out
    assert "why: " in err and "could not be read back" not in err
