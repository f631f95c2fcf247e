"""The error band of a prediction (analysis/error_band.py): one definition, read from the committed residual table
that `popvision-lite validate` regenerates, shown on every surface."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

import popvision_lite as pvl
from popvision_lite.analysis import error_band as eb

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


def _table(tmp_path, rows) -> Path:
    p = tmp_path / "residuals.csv"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=eb.COLUMNS)
        w.writeheader()
        for i, (side, model, fw, scale, meas, pred) in enumerate(rows):
            w.writerow(dict(id=f"r{i}", side=side, model=model, framework=fw, scale=scale, device="d", role="check",
                            measured=meas, predicted=pred, ratio=pred / meas, predicted_loo=pred,
                            ratio_loo=pred / meas, settings=""))
    eb.clear_cache()
    return p


def test_band_is_the_familys_spread_of_measured_over_predicted(tmp_path):
    p = _table(tmp_path, [("ipu", "bert", "popart", "pod16", 100, 110), ("ipu", "bert", "popart", "pod16", 100, 91),
                          ("ipu", "bert", "popart", "pod16", 100, 100), ("ipu", "bert", "popart", "pod64", 100, 120),
                          ("ipu", "resnet", "tensorflow", "pod16", 100, 95), ("gpu", "bert", "pytorch", "node", 1, 2)])
    b = eb.band("ipu", "bert-large", "popart", 16, p)
    assert (b.n, b.family) == (3, "BERT on IPU, popart, pod16")
    assert b.low == pytest.approx(100 / 110 - 1) and b.high == pytest.approx(100 / 91 - 1)
    assert b.text() == "-9 % / +10 % from 3 measured runs (BERT on IPU, popart, pod16)"
    lo, hi = b.range_of(1000.0)
    assert lo == pytest.approx(1000 * 100 / 110) and hi == pytest.approx(1000 * 100 / 91)
    # too few at the scale: the framework's rows at every scale, said so
    b = eb.band("ipu", "bert", "popart", 64, p)
    assert b.n == 4 and "all scales" in b.reason and b.low == pytest.approx(100 / 120 - 1)
    # another framework of a validated model: every framework's rows, said so
    b = eb.band("ipu", "bert", "paddle", 16, p)
    assert b.n == 4 and "every framework" in b.reason
    # fewer than three rows in the whole model family: their largest error both ways
    b = eb.band("ipu", "resnet", "tensorflow", 16, p)
    assert b.n == 1 and b.low == pytest.approx(-b.high) and "largest error" in b.reason
    # outside every validated family
    b = eb.band("ipu", "gnn", None, 1, p)
    assert b.outside and "outside every validated family" in b.text() and math.isnan(b.range_of(5.0)[0])
    assert eb.band("gpu", "resnet", None, 8, p).outside
    # a run without a host step is outside: every validated prediction has one
    assert eb.ipu_band("bert", "unknown", 16, p).outside and eb.ipu_band("bert", "none", 16, p).outside
    with pytest.raises(Exception, match="side"):
        eb.band("tpu", "bert", None, 1, p)
    eb.clear_cache()


def test_scale_and_model_families():
    assert [eb.scale_of("ipu", n) for n in (1, 16, 17, 64, 128, 256)] == \
        ["pod16", "pod16", "pod64", "pod64", "pod128+", "pod128+"]
    assert [eb.scale_of("gpu", n) for n in (1, 8, 16, 512)] == ["node", "node", "cluster", "cluster"]
    assert [eb.model_family(m) for m in ("bert-large", "resnet50", "gpt3-175b", "mlp")] == \
        ["bert", "resnet", "gpt", "mlp"]


def test_the_committed_table_is_what_validate_computes(pod16_bert_large):
    """The committed residual table agrees with what validate computes, on its cheapest measured rows: the v1.1
    IPU-POD16 BERT row (a check row: no constant fitted on it, so its leave-one-out ratio is its ratio).  Its
    prediction (``mlperf_validation.predict``) is the session's ``pod16_bert_large`` fixture's, whose profile
    tests/project/test_doc_numbers.py reads."""
    from popvision_lite import mlperf_validation as mv

    table = {r["id"]: r for r in eb.rows()}
    assert table, "resources/validation/residuals.csv is missing: run `popvision-lite validate --write-doc`"
    assert {r["side"] for r in table.values()} == {"ipu", "gpu"}
    rid = "gc-v1.1-pod16-bert-closed"
    assert pod16_bert_large.case.id == rid and not pod16_bert_large.prediction.error
    row = mv.residual_rows([pod16_bert_large.prediction])[0]
    mine = table[rid]
    for k in ("side", "model", "framework", "scale", "device", "role", "settings"):
        assert row[k] == mine[k], k
    assert float(row["ratio"]) == pytest.approx(float(mine["ratio"]), rel=1e-5)
    assert float(row["ratio_loo"]) == pytest.approx(float(mine["ratio_loo"]), rel=1e-5)
    # a calibration row's leave-one-out ratio is recorded beside its ratio
    cal = [r for r in table.values() if r["role"] == "calibration"]
    assert cal and all(r["ratio_loo"] for r in cal)


def test_every_surface_shows_the_band(tmp_path, capsys):
    from popvision_lite.analysis.summary import summary_markdown
    from popvision_lite.cli import main

    with pvl.open(SAMPLES / "bert_tiny_mk2.pvl") as p:
        text = eb.run_band(p.record, 1).text()
        v = pvl.verdict(p)
        assert v.ipu_band is not None and v.gpu_band is not None
        rows = dict((r[0], (r[1], r[2])) for r in v.rows())
        assert rows["error band"] == (v.ipu_band.text(), v.gpu_band.text())
        assert v.to_dict()["ipu_band"]["text"] == v.ipu_band.text()
        assert text in summary_markdown(p)
    assert main(["info", str(SAMPLES / "bert_tiny_mk2.pvl")]) == 0
    out = capsys.readouterr().out
    assert f"band     {text}" in out and "host     host step 167 ms (calibrated, PopART, inferred" in out
    assert main(["verdict", str(SAMPLES / "bert_tiny_mk2.pvl")]) == 0
    assert "error band" in capsys.readouterr().out
    assert main(["info", str(SAMPLES / "mlp_mk2.pvl")]) == 0
    out = capsys.readouterr().out
    assert "host framework UNKNOWN" in out and "no error band" in out
