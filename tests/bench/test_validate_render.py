"""bench.validate --render-from: the report rebuilt from an earlier run's BENCH-RESULT lines."""

import json

import pytest

from bench import validate as BV
from popvision_lite import mlperf_validation as V


def _case(id_):
    return V.Case(id=id_, label=id_, model="resnet50", config=dict(batch=20, grad_accum=2, replicas=16, ipus=16),
                  measured_sps=1000.0)


def test_results_from_log_rebuilds_each_case(tmp_path):
    extra = {"schedule": {"step_seconds": 0.5, "ipu_step_seconds": 0.4}, "peak_tile": "peak tile 3 (IPU 0): 1 of 2 KiB"}
    log = tmp_path / "run.log"
    log.write_text("noise\nBENCH-RESULT " + json.dumps(dict(
        name="validate/a", predicted_sps=900.0, fits=True, emulation_wall_s=1.5, basis="b", cycles=7, error="",
        extra=extra)) + "\n")
    (r,) = BV.results_from_log(str(log), [_case("a")])
    assert r.predicted_sps == 900.0 and r.ratio == pytest.approx(0.9) and r.extra == extra and r.cycles == 7
    with pytest.raises(KeyError):
        BV.results_from_log(str(log), [_case("a"), _case("missing")])
