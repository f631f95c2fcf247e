"""The validation report's pure parts: CSV parsing, row -> configuration (contract names), the
throughput adapter, table and doc-section formatting, the CLI's errors."""

import csv
import io
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from popvision_lite import mlperf_validation as V
from popvision_lite.cli import main
from popvision_lite.errors import ConfigError

DATA = V.data_dir(None)  # the tuning rows ship in resources/validation


def test_ipu_rows_map_to_the_mlperf_configurations():
    rows = V.load_rows(DATA)
    assert {r["vendor"] for r in rows} == {"graphcore"} and len(rows) == 2
    cases = {c.model: c for c in map(V.row_to_case, rows)}
    bert, rn = cases["bert-large"], cases["resnet50"]
    assert bert.config == dict(seq=512, batch=2, packing=2.0, grad_accum=192, replicas=4, pipeline_stages=4, ipus=16,
                               optimizer="lamb", optimizer_state="offchip", rts=True, available_memory_proportion=0.23,
                               vocab=30912, recompute=True, precision="fp16", training=True,
                               host_framework="popart", partials_type="float")
    assert rn.config["host_framework"] == "tensorflow"
    # "FP16.16 + half partials": poplin's partialsType half
    assert rn.config["partials_type"] == "half"
    assert bert.measured_sps == pytest.approx(1523.8) and bert.samples_per_microbatch == 4.0
    assert rn.config["batch"] == 20 and rn.config["grad_accum"] == 10 and rn.config["replicas"] == 16
    assert rn.config["pipeline_stages"] == 1 and rn.config["recompute"] is True
    assert rn.config["available_memory_proportion"] == 0.15 and rn.measured_sps == pytest.approx(29516.1)
    # "FP16.16": fp16 variables, so TensorFlow's LARS momentum slot is fp16 too
    assert rn.config["optimizer_state_dtype"] == "fp16"


def test_untuned_cases_have_no_measurement_and_change_one_thing():
    rn = next(c for c in map(V.row_to_case, V.load_rows(DATA)) if c.model == "resnet50")
    pod64, bow, mb = V.untuned_cases(rn)
    assert all(c.measured_sps is None and not c.tuned for c in (pod64, bow, mb))
    assert pod64.config["replicas"] == 64 and pod64.config["ipus"] == 64 and pod64.device == "ipu-mk2"
    assert bow.device == "ipu-bow" and bow.config == rn.config
    assert mb.config["batch"] != 20 and {k: v for k, v in mb.config.items() if k != "batch"} == \
        {k: v for k, v in rn.config.items() if k != "batch"}


def _csv(tmp_path, rows, header=V.REQUIRED_COLUMNS):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(header))
    w.writeheader()
    for r in rows:
        w.writerow(r)
    (tmp_path / V.CSV_NAME).write_text(buf.getvalue())
    return tmp_path


def test_bad_csv_gives_errors_naming_file_and_field(tmp_path):
    with pytest.raises(ConfigError, match="validation data not found"):
        V.load_rows(tmp_path / "missing")
    _csv(tmp_path, [], header=("vendor", "id"))
    (tmp_path / V.CSV_NAME).write_text("vendor,id\ngraphcore,x\n")
    with pytest.raises(ConfigError, match=r"mlperf_training.csv: missing column\(s\) benchmark"):
        V.load_rows(tmp_path)
    row = {c: "" for c in V.REQUIRED_COLUMNS} | dict(vendor="graphcore", benchmark="ResNet-50", n_accel="16",
                                                      micro_batch="20", grad_accum="10", replicas_or_dp="8",
                                                      pipeline_stages="1", available_memory_proportion="0.1",
                                                      train_only_sps_median="1", id="r")
    with pytest.raises(ConfigError, match="8 IPUs but n_accel = 16"):
        V.row_to_case(row)
    with pytest.raises(ConfigError, match="available_memory_proportion: not a number"):
        V.row_to_case(row | dict(replicas_or_dp="16", available_memory_proportion="lots"))


def test_validate_cli_exit_2_names_the_missing_path(tmp_path, capsys):
    assert main(["validate", "--data", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "nowhere") in err and "not found" in err and "Traceback" not in err


def test_validate_cli_lists_cases_without_emulating(tmp_path, capsys):
    shutil.copy(DATA / V.CSV_NAME, tmp_path / V.CSV_NAME)
    assert main(["validate", "--data", str(tmp_path), "--list", "--only", "resnet"]) == 0
    out = capsys.readouterr().out
    assert "gc-v1.1-pod16-resnet:" in out and "measured 29,516.1 images/s" in out
    # the held-out measured runs come with the package; the derived unmeasured configurations on request
    assert "gc-v2.0-bow-pod16-resnet-closed:" in out and "measured 42,675.3 images/s" in out
    assert "not measured" not in out and "bert" not in out.lower()
    assert main(["validate", "--data", str(tmp_path), "--list", "--only", "resnet", "--with-predictions",
                 "--no-heldout"]) == 0
    out = capsys.readouterr().out
    assert "gc-v1.1-pod16-resnet-bow" in out and "not measured" in out and "gc-v2.0" not in out


def _listed_ids(out: str) -> list[str]:
    return [line.split(":", 1)[0] for line in out.splitlines() if line.strip()]


def test_validate_runs_every_measured_row_from_the_package_alone(capsys):
    """With no options the 2 tuning rows and the 17 held-out rows, all shipped in resources/validation (a
    bare clone or an installed wheel has them); each listed once even where --data names the held-out file."""
    assert DATA.is_relative_to(Path(V.__file__).resolve().parents[1]) or "site-packages" in DATA.parts
    assert main(["validate", "--list", "--no-transformers", "--no-gpu"]) == 0
    ids = _listed_ids(capsys.readouterr().out)
    assert len(ids) == 19 == len(set(ids)) and ids[:2] == ["gc-v1.1-pod16-bert-closed", "gc-v1.1-pod16-resnet"]
    assert main(["validate", "--list", "--no-gpu"]) == 0  # the MLPerf rows, then the measured transformer runs
    with_llm = _listed_ids(capsys.readouterr().out)
    assert with_llm[:19] == ids and len(with_llm) > 19 and all(i.startswith("hf-") for i in with_llm[19:])
    assert main(["validate", "--list"]) == 0  # ... then the measured GPU runs (the GPU estimate)
    everything = _listed_ids(capsys.readouterr().out)
    gpu = everything[len(with_llm):]
    assert everything[:len(with_llm)] == with_llm and len(gpu) == 20 and all(i.startswith("nv-") for i in gpu)
    assert main(["validate", "--list", "--no-transformers", "--no-gpu", "--data", str(DATA / V.HELDOUT_NAME)]) == 0
    again = _listed_ids(capsys.readouterr().out)
    assert len(again) == 17 == len(set(again)) and set(again) < set(ids)
    assert all(r["_held_out"] for r in V.measured_rows(DATA / V.HELDOUT_NAME))  # still held out, not tuning rows
    assert main(["validate", "--list", "--no-heldout", "--no-transformers", "--no-gpu"]) == 0
    assert _listed_ids(capsys.readouterr().out) == ids[:2]


def _case(**kw):
    base = dict(id="x", label="ResNet-50, 16 replicas", model="resnet50",
                config=dict(batch=20, replicas=16, grad_accum=10, ipus=16, pipeline_stages=1), measured_sps=2000.0,
                sample_unit="images")
    return V.Case(**(base | kw))


def test_supported_config_drops_unknown_fields_and_runs_one_replica():
    kept, dropped = V.supported_config(_case().config, {"batch", "ipus"})
    assert kept == {"batch": 20, "ipus": 1} and dropped == ["replicas", "grad_accum", "pipeline_stages"]
    kept, dropped = V.supported_config(_case().config, {"batch", "ipus", "replicas", "grad_accum", "pipeline_stages"})
    assert kept["ipus"] == 16 and dropped == []


def test_throughput_adapter_uses_the_contract_field_when_present():
    case = _case()
    sps, basis = V.throughput(SimpleNamespace(seconds=0.01), case, ["replicas"])
    assert sps == pytest.approx(20 / 0.01 * 16) and "x 16 replicas" in basis and "lacks replicas" in basis
    sps, basis = V.throughput(SimpleNamespace(seconds=0.01, samples_per_second=1234.5), case, [])
    assert sps == 1234.5 and "samples_per_second" in basis
    bert = _case(config=dict(batch=2, packing=2.0, replicas=4))
    assert V.throughput(SimpleNamespace(seconds=0.5), bert, ["replicas"])[0] == pytest.approx(2 * 2 / 0.5 * 4)


def test_predict_reports_errors_per_row_and_ratio():
    case = _case()

    def fake_run(cfg, device, timing_only):
        assert timing_only and device == "ipu-mk2" and cfg["ipus"] == 1
        return SimpleNamespace(seconds=0.02, fits=False, total_cycles=123)

    r = V.predict(case, run_model=fake_run, make_config=lambda m, **kw: kw, field_names={"batch", "ipus"})
    assert r.predicted_sps == pytest.approx(16000) and r.ratio == pytest.approx(8.0) and r.fits is False
    bad = V.predict(case, run_model=fake_run, make_config=lambda m, **kw: 1 / 0, field_names={"batch"})
    assert bad.predicted_sps is None and "ZeroDivisionError" in bad.error and bad.ratio is None


def test_table_and_section_formatting():
    good = V.Result(_case(), predicted_sps=1500.0, fits=True, wall_s=12.34, basis="b")
    pred = V.Result(_case(id="y", measured_sps=None, tuned=False), predicted_sps=900.0, fits=False, wall_s=1.0)
    err = V.Result(_case(id="z"), error="ConfigError: nope")
    table = V.format_table([good, pred, err])
    lines = table.splitlines()
    assert len(lines) == 5
    assert "| 2,000.0 images | 1,500.0 | 0.750 | fits | 12.3 s | b |" in lines[2]
    assert "not measured (prediction only)" in lines[3] and "does not fit" in lines[3] and "| - |" in lines[3]
    assert "error: ConfigError: nope" in lines[4]
    reused = V.Result(_case(id="r"), predicted_sps=1.0, fits=True, wall_s=0.01, extra={"graph_reused": True})
    assert "| 0.0 s (graph of the row above) |" in V.format_table([reused])
    section = V.render_section([good], meta="Last run: now.")
    assert section.startswith(V.BEGIN) and section.endswith(V.END) and "calibrated constant per framework" in section
    assert "identity" in section and "Last run: now." in section


def test_doc_section_is_replaced_between_markers_or_appended(tmp_path):
    doc = tmp_path / "fidelity.md"
    doc.write_text("# Title\n\nhand text\n")
    V.write_doc(V.render_section([], "first"), doc)
    t1 = doc.read_text()
    assert t1.startswith("# Title\n\nhand text\n") and t1.count(V.BEGIN) == 1 and "first" in t1
    doc.write_text(t1 + "\nafter\n")
    V.write_doc(V.render_section([], "second"), doc)
    t2 = doc.read_text()
    assert t2.count(V.BEGIN) == 1 and "second" in t2 and "first" not in t2 and t2.endswith("\nafter\n")
    assert not list(tmp_path.glob(".fidelity-*"))  # temp file renamed, nothing left behind


def test_heldout_rows_map_to_their_submissions_configs():
    """Every held-out row loads, and the per-row config (placement, per-IPU memory proportion, vocab) is
    the submission's (resources/validation/configs.toml)."""
    rows = V.load_heldout_rows()
    assert len(rows) == 17 and all(r["vendor"] == "graphcore" for r in rows)
    assert sum(int(r["n_accel"]) > 64 for r in rows) == 7  # the pods past 64 IPUs
    cases = {c.id: c for c in V.build_cases(rows, overrides=V.row_configs())}
    bow = cases["gc-v2.0-bow-pod16-bert-closed"]
    assert bow.device == "ipu-bow" and bow.held_out and bow.measured_sps == pytest.approx(2303.7)
    assert bow.config["layer_split"] == [0, 3, 3.5, 3, 3.5, 3.5, 3.5, 3.5, 0.5]
    assert bow.config["ipus"] == 16 and bow.config["replicas"] == 2
    pod64 = cases["gc-v1.1-pod64-bert-closed"]
    assert pod64.config["available_memory_proportion"] == [0.2] + [0.25] * 7 and pod64.device == "ipu-mk2"
    from popvision_lite.emulator.models.config import make_config

    for c in cases.values():  # every row is a valid run config
        cfg = make_config(c.model, **c.config)
        assert cfg.ipus == c.config["ipus"]
    assert cases["gc-v1.0-pod16-resnet-closed"].config["optimizer"] == "momentum"
    assert cases["gc-v2.0-bow-pod16-resnet-closed"].config["optimizer"] == "lars"


def test_step_breakdown_shares_of_the_optimizer_step():
    sched = dict(step_cycles=1000, grad_accum=4, steady_cycles_per_microbatch=200, fill_drain_cycles=100,
                 optimizer_cycles=50, allreduce_cycles=40, stream_cycles=10)
    r = V.Result(_case(), predicted_sps=1.0, extra={"schedule": sched})
    b = V.step_breakdown(r)
    assert b == pytest.approx(dict(steady=0.8, fill_drain=0.1, optimizer=0.05, allreduce=0.04, stream=0.01))
    assert sum(b.values()) == pytest.approx(1.0)
    assert V.step_breakdown(V.Result(_case())) is None


def test_graph_groups_and_worker_processes_give_the_serial_results():
    """Rows that differ only in composition fields share a replica graph (one group, one process); running
    the groups in two worker processes gives the same predictions as one after another."""
    mk = dict(model="mlp", sample_unit="samples", measured_sps=None, tuned=False)
    cases = [V.Case(id="a", label="a", config=dict(batch=8, hidden=64, layers=2, replicas=1), **mk),
             V.Case(id="b", label="b", config=dict(batch=16, hidden=64, layers=2, replicas=1), **mk),
             V.Case(id="c", label="c", config=dict(batch=8, hidden=64, layers=2, replicas=4, ipus=4), **mk)]
    assert sorted(sorted(g) for g in V.graph_groups(cases)) == [[0, 2], [1]]
    seen = []
    serial = V.run_cases(cases, jobs=1, report=lambda c, r: seen.append(c.id))
    assert sorted(seen) == ["a", "b", "c"] and all(r.error == "" for r in serial)
    assert serial[2].extra.get("graph_reused") is True  # c after a in one process: a's graph
    from popvision_lite.emulator.models import emulated as E
    from popvision_lite.emulator.models import pipeline as PL

    assert not E._GRAPH_CACHE and not PL._STAGE_GRAPHS  # each group's graph freed after its rows
    parallel = V.run_cases(cases, jobs=2)
    assert [r.case.id for r in parallel] == ["a", "b", "c"]
    assert [r.predicted_sps for r in parallel] == [r.predicted_sps for r in serial]
    assert serial[1].predicted_sps != serial[0].predicted_sps


def _timed(id_, model, device, batch, ga, replicas, measured_step, t_ipu, f_ipu, host=0.0, framework="popart"):
    """A Result whose measured step is given in seconds and whose prediction is ga x t_ipu + f_ipu on the
    IPUs (at 1 GHz) plus ``host`` seconds."""
    cfg = dict(batch=batch, grad_accum=ga, replicas=replicas, pipeline_stages=1, ipus=replicas,
               host_framework=framework)
    samples = batch * ga * replicas
    ipu = ga * t_ipu + f_ipu
    case = V.Case(id=id_, label=id_, model=model, config=cfg, device=device, measured_sps=samples / measured_step,
                  round="v2.0")
    sched = dict(step_seconds=ipu + host, ipu_step_seconds=ipu, per_step_terms={"host_step": host}, grad_accum=ga,
                 step_cycles=round(ipu * 1e9), steady_cycles_per_microbatch=round(t_ipu * 1e9))
    return V.Result(case, predicted_sps=samples / (ipu + host), extra={"schedule": sched})


def test_decomposition_solves_t_and_f_from_pairs_of_rows():
    # measured: 4 ms per micro-batch + 200 ms per step; predicted IPU-only: 5 ms + 20 ms
    rows = [_timed(f"r{g}", "bert-large", "ipu-bow", 3, g, r, g * 0.004 + 0.2, 0.005, 0.02)
            for g, r in ((256, 2), (96, 8), (64, 16))]
    other = _timed("x", "resnet50", "ipu-bow", 20, 4, 64, 0.05, 0.01, 0.0, framework="tensorflow")
    older = _timed("old", "bert-large", "ipu-bow", 3, 128, 4, 0.7, 0.005, 0.02)
    older.case.round = "v1.1"  # another SDK round: never paired with the v2.0 rows
    pairs = V.measured_pairs(rows + [other, older])
    assert [(p["a"].case.id, p["b"].case.id) for p in pairs] == [("r256", "r96"), ("r96", "r64")]
    for p in pairs:
        assert p["measured"] == pytest.approx((0.004, 0.2)) and p["ipu"] == pytest.approx((0.005, 0.02))
        assert p["schedule"][0] == pytest.approx((0.005, 0.02)) and p["schedule"][1] == pytest.approx((0.005, 0.02))
    assert V.solve_tf(10, 1.0, 2, 0.2) == pytest.approx((0.1, 0.0))
    table = V.format_decomposition(pairs)
    assert "| 4.0 ms / 200.0 ms | 5.0 ms / 20.0 ms | 5.0 ms / 5.0 ms | 20.0 ms / 20.0 ms | 1.25 |" in table


def test_host_step_fit_names_its_pair_and_judges_the_others_leave_one_out(monkeypatch):
    from popvision_lite import mlperf_calibration as C

    monkeypatch.setattr(C, "CALIBRATION_PAIRS", {"popart": ("r256", "r96")})
    rows = [_timed(f"r{g}", "bert-large", "ipu-bow", 3, g, r, g * 0.004 + 0.2, 0.004, 0.02)
            for g, r in ((256, 2), (96, 8), (64, 16), (36, 32))]
    fit = V.fit_host_step(V.measured_pairs(rows))["popart"]
    assert fit["fitted_on"] == ("r256", "r96") and fit["value"] == pytest.approx(0.18)
    assert len(fit["pairs"]) == 3
    for p in fit["pairs"]:  # every pair implies 180 ms; leave-one-out from the other two gives exact steps
        assert p["implied"] == pytest.approx(0.18) and p["loo"] == pytest.approx(0.18)
        assert p["loo_ratios"] == pytest.approx((1.0, 1.0))
    text = V.format_calibration({"popart": fit})
    assert "host_step_seconds_popart | r256 + r96 | 180.0 ms" in text


def test_calibrated_device_constants_name_the_rows_they_are_fitted_on():
    from popvision_lite.devices import load_device

    for dev in ("ipu-mk2", "ipu-bow"):
        d = load_device(dev)
        for fw, ids in V.CALIBRATION_PAIRS.items():
            q = d.quantities[f"emulator.host_step_seconds_{fw}"]
            assert q.basis == "calibrated" and all(i in q.source for i in ids), (dev, fw, q.source)
        q = d.quantities["emulator.multi_host_step_seconds"]
        assert q.basis == "calibrated" and all(i in q.source for i in V.MULTI_HOST_PAIR), (dev, q.source)
    # past 64 IPUs only the multi-host pair is fitted on; every other row there is a check
    past64 = {r["id"] for r in V.load_heldout_rows() if int(r["n_accel"]) > 64}
    assert V.CALIBRATION_ROWS & past64 == set(V.MULTI_HOST_PAIR)


def test_multi_host_fit_names_its_pair_and_judges_the_others_leave_one_out(monkeypatch):
    from popvision_lite import mlperf_calibration as C

    monkeypatch.setattr(C, "MULTI_HOST_PAIR", ("r128", "r256"))
    # measured: each added host round (128 -> 256 IPUs: 2 -> 4 hosts) costs 3 ms that the prediction lacks
    rows = [_timed(f"r{r}", "resnet50", "ipu-bow", 20, 2, r, 0.020 + 0.003 * {64: 0, 128: 1, 256: 2}[r], 0.01, 0.0,
                   framework="tensorflow") for r in (64, 128, 256)]
    fit = V.fit_multi_host(V.measured_pairs(rows))
    assert fit["fitted_on"] == ("r128", "r256") and fit["value"] == pytest.approx(0.003)
    assert [d["ids"] for d in fit["pairs"]] == [("r64", "r128"), ("r128", "r256")]
    for d in fit["pairs"]:
        assert d["rounds"][1] - d["rounds"][0] == 1 and d["implied"] == pytest.approx(0.003)
        assert d["loo"] == pytest.approx(0.003) and d["predicted_ratio"] == pytest.approx(1.0)
        assert d["measured_ratio"] > 1.1
    assert "| r128 -> r256 | 1 / 2 | yes | 3.0 ms | 3.0 ms |" in V.format_multi_host(fit)
    # rows on one host server imply nothing
    one = [_timed(f"s{r}", "resnet50", "ipu-bow", 20, 2, r, 0.02, 0.01, 0.0, framework="tensorflow") for r in (16, 64)]
    assert V.fit_multi_host(V.measured_pairs(one))["pairs"] == []


def test_tf_optimizer_state_dtype_follows_the_weight_precision():
    assert V.tf_state_dtype("FP16.16 + half partials, 8-bit input") == "fp16"
    assert V.tf_state_dtype("fp16.32 master weights") == "fp32"
    assert V.tf_state_dtype("mixed") == "fp32"


def test_host_framework_from_the_framework_column():
    assert V.host_framework("PopART, Poplar SDK 2.5.1") == "popart"
    assert V.host_framework("TensorFlow 1.15, Poplar SDK 2.3.0") == "tensorflow"
    assert V.host_framework("PaddlePaddle 2.3") == "none"
