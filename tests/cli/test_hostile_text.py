"""Hostile text in CSV exports and sweep.csv: every formula start is neutralised, including after
leading whitespace and behind a CR/LF, and a field holding CR or LF never starts a record of its own."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from popvision_lite.profile.csv_export import formula_like, write_csv, write_frame_csv

HOSTILE = ["=cmd|' /C calc'!A0", "\r=cmd|' /C calc'!A0", "\n=1+1", "  =1+1", "\t@SUM(A1)", " \u00a0+1",
           "-2+3", "@x", "\r\nfoo", "a\rb", "a\nb"]


@pytest.mark.parametrize("text", ["=a", "+a", "-a", "@a", "\ta", "\ra", "\na", " =a", "\t =a", "\u3000@a", " \ra"])
def test_formula_like_after_any_leading_whitespace(text):
    assert formula_like(text)


@pytest.mark.parametrize("text", ["a", "a=b", "1-2", "", " a ", "a\r=b"])
def test_ordinary_text_is_not_formula_like(text):
    assert not formula_like(text)


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_every_cell_stays_one_cell_and_no_record_starts_with_a_formula(tmp_path):
    df = pd.DataFrame({"name": HOSTILE, "n": range(len(HOSTILE))})
    out = tmp_path / "t.csv"
    assert write_frame_csv(df, out) == len(HOSTILE)
    raw = out.read_bytes().decode()
    rows = _rows(raw)
    assert len(rows) == len(HOSTILE) + 1, rows  # no CR/LF split a record
    for (cell, _), original in zip(rows[1:], HOSTILE, strict=True):
        assert cell in (original, "'" + original), (cell, original)
        if formula_like(original):
            assert cell == "'" + original
    # every field holding a CR or LF is quoted (a reader that splits records on them cannot split it)
    for original in HOSTILE:
        if "\r" in original or "\n" in original:
            assert '"' + ("'" if formula_like(original) else "") + original + '"' in raw


def test_a_formula_header_is_neutralised():
    buf = io.StringIO(newline="")
    write_csv(pd.DataFrame({"=cmd": [1], "ok": [2]}), buf)
    assert _rows(buf.getvalue())[0] == ["'=cmd", "ok"]


def test_sweep_csv_goes_through_the_same_writer(tmp_path):
    from popvision_lite.sweep.results import write_results

    rows = [{"point": 0, "status": "failed", "error": "\r=cmd|' /C calc'!A0", "optimizer": "=cmd|x",
             "config_hash": "h", "profile": "", "samples_per_second": float("nan"), "fits": False}]
    path = write_results(tmp_path, rows, ["optimizer"])
    got = _rows(path.read_bytes().decode())
    assert len(got) == 2
    rec = dict(zip(got[0], got[1], strict=True))
    assert rec["optimizer"] == "'=cmd|x" and rec["error"] == "'\r=cmd|' /C calc'!A0"
