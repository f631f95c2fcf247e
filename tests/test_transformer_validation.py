"""The transformer validation set (resources/validation/transformer_training.csv): every row emulated from its own
IPU config, the measured figure the samples the run processed, and bad data named."""

from __future__ import annotations

import pytest

from popvision_lite import transformer_validation as tv
from popvision_lite.emulator.models.config import make_config
from popvision_lite.errors import ConfigError
from popvision_lite.mlperf_validation import Result, replace_section


def test_every_row_builds_the_configuration_it_was_run_with():
    cases = {c.id: c for c in tv.build_cases(tv.load_rows())}
    assert {"hf-gpt2-medium-wikitext103-pod16", "hf-gpt2-small-wikitext103-pod16", "hf-roberta-base-squad-pod16",
            "hf-roberta-base-squad2-pod16"} <= set(cases)
    g = cases["hf-gpt2-medium-wikitext103-pod16"].config
    assert g["layer_split"] == [0, 3, 3, 3, 3, 4, 4, 4, 0] and g["pipeline_placement"] == "wrap"
    assert (g["replicas"], g["ipus"], g["grad_accum"], g["device_iterations"], g["batch"], g["seq"]) == (
        2, 16, 256, 2, 1, 1024)
    assert g["available_memory_proportion"] == 0.25 and g["embedding_serialization"] == 5
    assert g["host_framework"] == "poptorch" and g["optimizer"] == "adam"
    r = cases["hf-roberta-base-squad-pod16"].config
    assert r["task_head"] == "question_answering" and r["pipeline_placement"] == "sequential"
    assert r["layer_split"] == [0, 4, 4, 4] and r["vocab"] == 50265 and r["optimizer_state"] == "onchip"
    for c in cases.values():
        cfg = make_config(c.model, **c.config)
        assert cfg.ipus == 16
        # the total batch the card reports = micro-batch x GA x replicas x device iterations
        row = next(x for x in tv.load_rows() if x["id"] == c.id)
        assert cfg.batch * cfg.grad_accum * cfg.replicas * cfg.device_iterations == int(row["total_train_batch_size"])


def test_measured_is_the_samples_processed_per_second_of_train_runtime():
    for row in tv.load_rows():
        steps, batch, secs = int(row["steps"]), int(row["total_train_batch_size"]), float(row["train_runtime_s"])
        assert steps == int(row["epochs"]) * (int(row["train_samples"]) // batch)  # drop_last
        assert float(row["measured_samples_per_second"]) == pytest.approx(steps * batch / secs, abs=0.01)
        # the card's own figure counts the dataset x epochs (the dropped samples too)
        reported = float(row["reported_train_samples_per_second"])
        assert reported == pytest.approx(int(row["train_samples"]) * int(row["epochs"]) / secs, rel=2e-3)
        assert row["runtime_includes_compilation"] == "no"


def test_bad_rows_name_the_file_row_and_column(tmp_path):
    rows = tv.load_rows()
    good = (tmp_path / "ok.csv")
    import csv

    cols = [k for k in rows[0] if not k.startswith("_")]
    with good.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerow({k: rows[0][k] for k in cols} | {"micro_batch": "lots"})
    with pytest.raises(ConfigError, match=r"ok.csv: row 'hf-gpt2-medium-wikitext103-pod16' column 'micro_batch'"):
        tv.build_cases(tv.load_rows(good))
    with good.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerow({k: rows[0][k] for k in cols} | {"n_accel": "8"})
    with pytest.raises(ConfigError, match="gives 16 IPUs but n_accel is 8"):
        tv.build_cases(tv.load_rows(good))
    (tmp_path / "cols.csv").write_text("id,model\nx,gpt2-small\n")
    with pytest.raises(ConfigError, match="cols.csv: missing column"):
        tv.load_rows(tmp_path / "cols.csv")


def test_the_doc_section_has_its_own_markers():
    case = tv.build_cases(tv.load_rows())[0]
    res = Result(case, predicted_sps=2 * case.measured_sps, fits=True, basis="x",
                 extra={"schedule": {"step_seconds": 1.0, "samples_per_step": 512.0,
                                     "per_step_terms": {"host_step": 0.0}}})
    sec = tv.render_section([res], "Last run: now.")
    assert sec.startswith(tv.BEGIN) and sec.endswith(tv.END) and "2.000" in sec
    doc = "intro\n" + sec + "\nmiddle\n"
    assert replace_section(doc, tv.render_section([res], "Last run: later."), tv.BEGIN, tv.END).count(tv.BEGIN) == 1


def _write(path, rows):
    import csv

    cols = [k for k in rows[0] if not k.startswith("_")]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in cols})
    return path


def test_same_configuration_rows_split_the_runtime_into_steps_and_a_fixed_part(tmp_path):
    rows = tv.load_rows()
    pairs = tv.runtime_pairs(rows)
    # the shipped set: the two SQuAD runs share one configuration (and differ in steps and epochs); no others do
    assert [p["ids"] for p in pairs] == [("hf-roberta-base-squad-pod16", "hf-roberta-base-squad2-pod16")]
    by = {r["id"]: r for r in rows}
    p = pairs[0]
    for rid in p["ids"]:
        n, e, secs = int(by[rid]["steps"]), int(by[rid]["epochs"]), float(by[rid]["train_runtime_s"])
        t, a = p["per_run"]
        assert a + n * t == pytest.approx(secs)
        t, b = p["per_epoch"]
        assert e * b + n * t == pytest.approx(secs)
        # the run with fewer steps carries the fixed part over fewer of them: a step is shorter than either average
        assert 0 < p["per_run"][0] < secs / n and p["per_run"][1] > 0
    # rows built from a known step time (0.25 s) and a known time per epoch (7 s) give them back; a row of another
    # configuration (another micro-batch) pairs with neither
    base = by["hf-roberta-base-squad-pod16"]
    mk = [base | {"id": "x1", "epochs": "3", "steps": "100", "train_runtime_s": str(3 * 7.0 + 100 * 0.25)},
          base | {"id": "x2", "epochs": "5", "steps": "300", "train_runtime_s": str(5 * 7.0 + 300 * 0.25)},
          base | {"id": "x3", "micro_batch": "2", "steps": "50"}]
    got = tv.runtime_pairs(tv.load_rows(_write(tmp_path / "pairs.csv", mk)))
    assert [g["ids"] for g in got] == [("x1", "x2")]
    assert got[0]["per_epoch"] == pytest.approx((0.25, 7.0))
    assert got[0]["per_run"] == pytest.approx((0.32, 14.0))  # read as once per run: (110 - 46) / 200, 46 - 32
    case = next(c for c in tv.build_cases(rows) if c.id == "hf-roberta-base-squad-pod16")
    res = Result(case, predicted_sps=3 * case.measured_sps, fits=True, basis="x", extra={})
    sec = tv.render_section([res], "now", pairs)
    line = next(x for x in sec.splitlines() if x.startswith("- hf-roberta-base-squad-pod16 + "))
    t = p["per_run"][0]
    assert f"{t * 1e3:,.1f} ms a step" in line and f"{3 * case.measured_sps * t / 256:.3f}" in line


def test_validate_lists_the_transformer_rows_beside_the_mlperf_ones(capsys):
    """The transformer rows ship with the repository (resources/validation/transformer_training.csv): a bare clone
    lists them with the placement they were run with; --no-transformers leaves them out."""
    from popvision_lite.cli import main

    assert main(["validate", "--list", "--only", "hf-gpt2-medium"]) == 0
    out = capsys.readouterr().out
    assert "hf-gpt2-medium-wikitext103-pod16:" in out and "measured 101.3 sequences/s" in out
    assert "'layer_split': [0, 3, 3, 3, 3, 4, 4, 4, 0]" in out
    assert main(["validate", "--list", "--only", "hf-", "--no-transformers"]) == 2
