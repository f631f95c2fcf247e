"""Where ``export`` writes: ``-o -`` is stdout (``--format`` says what; the "wrote" line goes to stderr, so the
data can be piped), and a Chrome trace named ``.json.gz`` is gzip-compressed (Perfetto opens it as it is)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pandas as pd

SAMPLE = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"


def test_a_table_to_stdout_is_the_file_export(cli, tmp_path):
    rc, out, err = cli(["export", SAMPLE, "--view", "steps", "--format", "csv", "-o", "-"])
    assert rc == 0, err
    assert "wrote csv to stdout" in err and "wrote" not in out
    rc, _, _ = cli(["export", SAMPLE, "--view", "steps", "-o", tmp_path / "steps.csv"])
    assert rc == 0
    assert out == (tmp_path / "steps.csv").read_text()
    df = pd.read_csv(io.StringIO(out))
    assert df.columns[0] == "step" and len(df) > 1000


def test_chrome_trace_gzip_and_stdout(cli, tmp_path):
    rc, out, err = cli(["export", SAMPLE, "--chrome-trace", "--steps", "0:400", "-o", tmp_path / "t.json"])
    assert rc == 0, err
    plain = json.loads((tmp_path / "t.json").read_text())
    rc, out, err = cli(["export", SAMPLE, "--chrome-trace", "--steps", "0:400", "-o", tmp_path / "t.json.gz"])
    assert rc == 0, err
    raw = (tmp_path / "t.json.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b" and len(raw) < 0.5 * (tmp_path / "t.json").stat().st_size  # gzip, and smaller
    assert json.loads(gzip.decompress(raw)) == plain
    assert not list(tmp_path.glob(".*.tmp"))
    rc, out, err = cli(["export", SAMPLE, "--chrome-trace", "--steps", "0:400", "-o", "-"])
    assert rc == 0 and json.loads(out) == plain and "wrote json to stdout" in err


def test_stdout_needs_a_format_and_a_name_must_match_it(cli, tmp_path):
    rc, out, err = cli(["export", SAMPLE, "--view", "memory", "-o", "-"])
    assert rc == 2 and "give --format" in err and out == ""
    rc, out, err = cli(["export", SAMPLE, "--view", "memory", "--format", "svg", "-o", tmp_path / "m.png"])
    assert rc == 2 and "--format svg does not match" in err


def test_a_plot_to_stdout(capsysbinary):
    from popvision_lite.cli import main

    rc = main(["export", str(SAMPLE), "--view", "liveness", "--format", "png", "-o", "-", "--width", "400",
               "--height", "300"])
    cap = capsysbinary.readouterr()
    assert rc == 0 and cap.out[:8] == b"\x89PNG\r\n\x1a\n"
