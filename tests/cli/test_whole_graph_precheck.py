"""The host-memory check of whole-graph runs through ``emulate`` (decision 0390): its first stage, before the
build, is a lower bound that lets a run through; its second, right after the graph is built and before the compile
and the run, refuses it with exit 2 when the built graph's estimate is past half of the machine, and nothing is
written."""

from __future__ import annotations

from popvision_lite import value_checks
from popvision_lite.emulator.models import host_memory as hm
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import build_model

ARGS = ["emulate", "mlp", "--hidden", "64", "--batch", "8", "--layers", "2", "-q"]


def test_cli_refuses_a_whole_graph_run_once_its_built_graph_is_past_half(tmp_path, monkeypatch, cli):
    cfg = make_config("mlp", hidden=64, batch=8, layers=2)
    be, _ = build_model(cfg, needs_values=True)
    need = hm.built_estimate(be.graph, cfg, timing_only=False)
    assert 2 * hm.estimate(cfg, False).bytes < 2 * need.bytes - 2  # the pre-build floor lets it through
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 2 * need.bytes - 2)
    out = tmp_path / "x.pvl"
    rc, _, err = cli([*ARGS, "-o", str(out)])
    assert rc == 2, err
    vertices = f"{need.terms['vertices'][0]:,.0f} vertices"
    assert f"{need.gib:.1f} GiB of host memory" in err and vertices in err and "--timing-only" in err
    assert "Traceback" not in err and not out.exists()
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 2 * need.bytes + 2)  # within half: it runs
    rc, _, err = cli([*ARGS, "-o", str(out)])
    assert rc == 0 and out.exists(), err
