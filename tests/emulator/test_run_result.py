"""One run-result type: the engine, a bundled model and an imported ONNX model return the same type, whose
numbers agree with the profile it carries."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import Engine, Graph, RunResult, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model


def _agrees_with_its_profile(run: RunResult) -> None:
    assert isinstance(run, RunResult)
    assert run.fits is run.profile_data.run["fits"]
    assert run.total_cycles == run.profile_data.run["total_cycles"] > 0
    assert run.seconds == pytest.approx(run.total_cycles / run.profile_data.target.clock_hz, rel=0.2)


def test_engine_run_is_a_run_result_with_its_stages_host_seconds():
    g = Graph(Target.from_device("ipu-mk2", num_ipus=1))
    n = 4096
    x = g.add_variable("x", (n,), "float32", mapping=M.linear(n, range(8)))
    out = g.add_variable("out", (n,), "float32", mapping=M.linear(n, range(8)))
    cs = g.add_compute_set("relu", op="relu")
    tiles, starts, sizes = M.worker_split(out)
    g.add_vertices(cs, CO.RELU, tiles, fields={"in": x.regions(starts, sizes), "out": out.regions(starts, sizes)})
    xv = np.linspace(-1, 1, n, dtype=np.float32)
    run = Engine(g, P.Sequence([P.Execute(cs)])).run(inputs={"x": xv})
    _agrees_with_its_profile(run)
    assert set(run.wall) == {"compile", "execute", "profile"} and run.oom_report == []
    np.testing.assert_array_equal(run.outputs["out"], np.maximum(xv, 0))


@pytest.mark.parametrize("replicas", [1, 2])
def test_bundled_model_run_is_a_run_result_with_its_config(replicas):
    cfg = make_config("mlp", replicas=replicas, ipus=replicas)
    run = run_model(cfg, timing_only=True)
    _agrees_with_its_profile(run)
    assert run.cfg is cfg and run.config == run.profile_data.run["config"]
    assert run.config["replicas"] == replicas and run.path == "" and run.casts == []
    assert run.schedule == run.profile_data.run["schedule"] and run.samples_per_second > 0


def test_onnx_run_is_a_run_result_with_its_source(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from popvision_lite.emulator.onnx_import import builders, emulate_onnx

    path = tmp_path / "mlp.onnx"
    onnx.save(builders.mlp(), str(path))
    run = emulate_onnx(path, batch=2, timing_only=True)
    _agrees_with_its_profile(run)
    assert run.path == str(path) and run.cfg is None and run.config["onnx"] == str(path)
    assert "compile" in run.wall
