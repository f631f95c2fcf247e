"""The host-memory pre-check of composed (stage-program) runs through ``emulate``: an oversized GPT-3 run is
refused with exit 2 naming --tensor-parallel before any stage graph is built; one within the budget runs."""

from __future__ import annotations

from popvision_lite import value_checks
from popvision_lite.emulator.models import pipeline
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.host_memory import estimate

SMALL = dict(layers=2, hidden=64, heads=4, seq=32, vocab=512)


def test_cli_refuses_an_oversized_composed_run_before_building(tmp_path, monkeypatch, cli):
    def boom(*a, **k):
        raise AssertionError("a stage graph was built")

    monkeypatch.setattr(pipeline, "StageGraph", boom)
    cfg = make_config("gpt3-175b", ipus=64, replicas=64)  # a whole GPT-3 175B layer on each IPU
    have = 4 * 2**30
    assert estimate(cfg, timing_only=True).bytes > have // 2
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: have)
    out = tmp_path / "x.pvl"
    rc, _, err = cli(["emulate", "gpt3-175b", "--ipus", "64", "--replicas", "64", "--timing-only", "-q",
                      "-o", str(out)])
    assert rc == 2, err
    assert "--tensor-parallel" in err and "GiB of host memory" in err and "Traceback" not in err
    assert not out.exists()


def test_cli_runs_a_composed_config_within_the_budget(tmp_path, monkeypatch, cli):
    cfg = make_config("gpt2-small", tensor_parallel=2, **SMALL)
    need = estimate(cfg, timing_only=True).bytes
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 2 * need + 2)  # just inside half of it
    out = tmp_path / "x.pvl"
    args = ["emulate", "gpt2-small", "--tensor-parallel", "2", "--layers", "2", "--hidden", "64", "--heads", "4",
            "--seq", "32", "--vocab", "512", "--timing-only", "-q", "-o", str(out)]
    rc, so, err = cli(args)
    assert rc == 0, err
    assert out.exists() and "peak tile memory" in so
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 2 * need - 2)  # just past it: refused
    rc, _, err = cli([*args[:-1], str(tmp_path / "y.pvl")])
    assert rc == 2 and "--tensor-parallel" in err
