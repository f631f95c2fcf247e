"""Every headline number is the same in every non-Qt consumer: analysis (run_totals, summary, operations,
program tree, roofline, insights), ``popvision-lite info`` (JSON and text), ``popvision-lite verdict``, the
summary CSV of ``export --view summary``, the report's summary.md and the compare headline.

Profiles: every bundled sample, a timing-only run of the POD16 BERT-Large config's SHAPE at a size a test can
afford (BERT-tiny widened to 4 layers, seq 32, 12 micro-batches: 4 replicas x 4 IPUs of the tests' device with
92 tiles, decision 0395, the same "wrap"
placement with the embedding and the last layer on IPU 0, LAMB with off-chip, replica-sharded state; the full
config takes ~30 s and writes 1.2 GB), and an ONNX model built with ``onnx.helper`` and imported for training.
The GUI side (views) is checked against the same :func:`run_totals` in tests/gui.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from popvision_lite.analysis.compare import compare
from popvision_lite.analysis.insights import step_kind_cycles
from popvision_lite.analysis.operations import ops_table
from popvision_lite.analysis.program_tree import ProgramTree
from popvision_lite.analysis.roofline import analyze
from popvision_lite.analysis.run_totals import PARTS, run_totals
from popvision_lite.analysis.summary import summarize, summary_markdown, summary_table
from popvision_lite.analysis.verdict import verdict
from popvision_lite.cli import main
from popvision_lite.profile import schema
from popvision_lite.profile.reader import open_profile
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_profiles").glob("*.pvl"))


@pytest.fixture(scope="session")
def pod_shaped(tmp_path_factory) -> Path:
    """The POD16 BERT-Large config's shape, small (see the module docstring)."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model, write_run

    cfg = make_config("bert-tiny", layers=4, seq=32, batch=2, packing=2.0, grad_accum=12, replicas=4,
                      pipeline_stages=4, layer_split=[0, 1, 1, 1, 1], pipeline_placement="wrap", ipus=16,
                      optimizer="lamb", optimizer_state="offchip", optimizer_state_dtype="fp16", master_weights=False,
                      rts=True, recompute=True)
    path = tmp_path_factory.mktemp("pod") / "pod_shaped.pvl"
    write_run(run_model(cfg, device=SMALL, timing_only=True), path)
    return path


@pytest.fixture(scope="session")
def onnx_run(tmp_path_factory) -> Path:
    """A 2-layer MLP written with onnx.helper, emulated for training through the CLI."""
    from popvision_lite.testing.onnx_models import write_tiny_mlp

    folder = tmp_path_factory.mktemp("onnx")
    write_tiny_mlp(folder / "mlp.onnx")
    out = folder / "mlp.pvl"
    assert main(["emulate", "--onnx", str(folder / "mlp.onnx"), "--training", "-q", "-o", str(out)]) == 0
    return out


CASES = [pytest.param(p, id=p.stem) for p in SAMPLES] + [pytest.param("pod_shaped", id="pod16-shaped"),
                                                         pytest.param("onnx_run", id="onnx")]


@pytest.fixture(params=CASES)
def path(request) -> Path:
    p = request.param
    return request.getfixturevalue(p) if isinstance(p, str) else p


def _metrics(df: pd.DataFrame) -> dict:
    return dict(zip(df["metric"], df["value"], strict=True))


def test_invariants(path):
    with open_profile(path) as p:
        rt = run_totals(p)
        ph = rt.phases
        assert rt.step_cycles > 0 and rt.total_cycles == rt.step_cycles
        # the phases tile the step: contiguous, in order, their wall time adds up to it
        ends = (ph["start_cycle"] + ph["wall_cycles"]).to_numpy()
        assert ph["start_cycle"].iat[0] == 0 and (ph["start_cycle"].to_numpy()[1:] == ends[:-1]).all()
        assert int(ph["wall_cycles"].sum()) == rt.step_cycles
        assert ph["share_of_step"].sum() == pytest.approx(1.0)
        # the parts are the IPU time summed over the replica's IPUs: S x the step, every part at most that
        assert sum(rt.part_cycles.values()) == rt.ipu_time_cycles == rt.stages * rt.step_cycles
        assert all(0 <= v <= rt.ipu_time_cycles for v in rt.part_cycles.values())
        assert sum(rt.part_share.values()) == pytest.approx(1.0)
        assert sum(rt.kind_cycles.values()) == pytest.approx(rt.ipu_time_cycles, abs=len(rt.kind_cycles))
        assert 0 <= rt.waiting_cycles <= rt.part_cycles["sync"]
        # host time is its own part, from the schedule's per-step terms (with where it comes from), not sync
        terms = sum(p.record.schedule.per_step_terms.values())
        assert rt.part_cycles["host"] == pytest.approx(terms * rt.clock_hz * rt.stages, abs=3 * rt.stages)
        assert (rt.part_cycles["host"] > 0) == rt.host_short.startswith(("host step ", "host terms "))
        # ops: each at most the IPU time, together too; the top op's share is the largest
        assert (rt.op_cycles >= 0).all() and rt.op_cycles.sum() <= rt.ipu_time_cycles * (1 + 1e-9)
        assert rt.top_op[1] == pytest.approx(float(rt.op_share.max())) and rt.top_op[1] <= 1
        assert np.allclose(rt.op_part_cycles.sum(axis=1), rt.op_cycles, rtol=1e-9, atol=1)
        assert rt.peak_tile_bytes == int(p.stored_table("memory_by_tile")["total"].max())
        assert rt.num_ipus == rt.replicas * rt.stages and rt.ipu_count_text.endswith(
            f"= {rt.num_ipus:,} IPU{'s' if rt.num_ipus > 1 else ''}")
        assert rt.samples_per_second > 0 and math.isfinite(rt.samples_per_second)


def test_every_consumer_shows_the_same_numbers(path, capsys):
    with open_profile(path) as p:
        rt = run_totals(p)
        h = rt.headline()
        # summary (the Summary view's data) and its CSV
        s = summarize(p)
        assert s.total_cycles == h["step_cycles"] and s.total_seconds == pytest.approx(h["step_seconds"])
        assert s.phase_cycles == h["part_cycles"] and s.phase_share == pytest.approx(h["part_share"])
        assert s.peak.bytes == h["peak_tile_bytes"] and s.peak_not_always_live == h["peak_not_always_live_bytes"]
        assert s.top_ops["name"].iat[0] == h["top_op"] and s.top_ops["share"].iat[0] == pytest.approx(h["top_op_share"])
        m = _metrics(summary_table(p))
        assert m["step_cycles"] == h["step_cycles"] and m["total_cycles"] == h["total_cycles"]
        assert m["ipus"] == h["num_ipus"] and m["ipu_count"] == h["ipu_count_text"]
        for part in PARTS:
            assert m[f"{part}_cycles"] == h["part_cycles"][part]
            assert m[f"{part}_share"] == pytest.approx(h["part_share"][part])
        assert m["bottleneck"] == h["bottleneck"] and m["top_op"] == h["top_op"]
        assert m["top_op_share"] == pytest.approx(h["top_op_share"]) and m["peak_tile_bytes"] == h["peak_tile_bytes"]
        assert m["samples_per_second"] == pytest.approx(h["samples_per_second"])
        # operations, program tree, roofline, insights
        ot = ops_table(p)
        assert ot["pct_run"].max() == pytest.approx(100 * h["top_op_share"])
        assert ot.loc[ot["pct_run"].idxmax(), "name"] == h["top_op"]
        tree = ProgramTree(p)
        assert tree.total_cycles == h["ipu_time_cycles"]
        roots = [int(i) for i in tree.children(-1)]
        # the top-level rows add up to the total the tree states (rows of time no program owns included)
        assert sum(int(tree.cycles[r]) for r in roots) == h["ipu_time_cycles"]
        ra = analyze(p)
        assert ra.ops["share"].to_numpy() == pytest.approx(rt.op_share)
        assert step_kind_cycles(p) == rt.kind_cycles
        # verdict (the CLI prints this object)
        v = verdict(p)
        assert v.ipu.samples_per_second == pytest.approx(h["samples_per_second"])
        assert v.ipu.bound_by == h["bottleneck_text"] and v.ipu.chips == h["num_ipus"]
        assert v.ipu_count_text == h["ipu_count_text"]
        assert ("chips", h["ipu_count_text"], f"{v.gpu.chips}") in v.rows()
        # the report and the compare headline
        md = summary_markdown(p)
        assert h["ipu_count_text"] in md and h["bottleneck_text"] in md and f"{h['step_cycles']:,} cycles" in md
        assert f"{h['samples_per_second']:,.1f}" in md
        c = compare(p, p)
        assert c.metric("total cycles")["a"] == h["step_cycles"] and c.metric("IPUs")["a"] == h["num_ipus"]
        assert c.metric("samples/s")["a"] == pytest.approx(h["samples_per_second"])
        for part in PARTS:
            assert c.metric(f"{part} cycles")["a"] == h["part_cycles"][part]
    # the command line, as a user runs it
    assert main(["info", str(path), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["step_cycles"] == h["step_cycles"] and j["ipus"]["text"] == h["ipu_count_text"]
    assert j["ipu_time"]["parts"] == h["part_cycles"] and j["bottleneck_text"] == h["bottleneck_text"]
    assert j["top_op"] == {"name": h["top_op"], "share": pytest.approx(h["top_op_share"])}
    assert j["memory"]["max_tile_bytes"] == h["peak_tile_bytes"]
    assert j["samples_per_second"] == pytest.approx(h["samples_per_second"])
    assert main(["info", str(path)]) == 0
    txt = capsys.readouterr().out
    assert h["ipu_count_text"] in txt and f"bound by {h['bottleneck_text']}" in txt
    assert main(["verdict", str(path), "--json"]) == 0
    vj = json.loads(capsys.readouterr().out)
    assert vj["ipu"]["samples_per_second"] == pytest.approx(h["samples_per_second"])
    assert vj["ipu"]["bound_by"] == h["bottleneck_text"] and vj["ipu_count_text"] == h["ipu_count_text"]


def test_pod_shaped_run_counts_its_16_ipus_and_its_steady_state(pod_shaped):
    """What the POD16 run must show: 4 replicas x 4 stages = 16 IPUs everywhere, and the step built of fill,
    the steady state repeated G - 2D + 2 times (one pipeline cycle stored), drain and the optimizer phases."""
    with open_profile(pod_shaped) as p:
        rt = run_totals(p)
        sch = p.run["schedule"]
        assert rt.ipu_count_text == "4 replicas x 4 stages = 16 IPUs"
        assert list(rt.phases["name"][:3]) == ["fill", "steady state", "drain"]
        steady = rt.phases.iloc[1]
        D, G = sch["pipeline_depth"], sch["grad_accum"]
        assert steady["runs_per_step"] == G - (2 * D - 2) and steady["stored_runs"] == 1
        assert steady["cycles"] == sch["steady_cycles_per_microbatch"] and steady["first_step"] >= 0
        # the step: the IPUs' cycles, then the host's per-step terms (PopART's loop, inferred from the model) as
        # phases of their own at the IPU clock
        terms = sch["per_step_terms"]
        assert sch["host_framework"] == "popart" and terms["host_step"] > 0
        assert sch["step_cycles"] == p.run["total_cycles"]
        assert rt.step_cycles == pytest.approx(sch["step_cycles"] + sum(terms.values()) * rt.clock_hz, abs=len(terms))
        assert {k for k, v in terms.items() if v > 0} <= set(rt.phases["name"])
        # the host's terms are the part "host" (every IPU waiting for the host), never sync (issue 46)
        assert rt.part_cycles["host"] == pytest.approx(sum(terms.values()) * rt.clock_hz * rt.stages,
                                                       abs=len(terms) * rt.stages)
        assert rt.kind_cycles["host"] == rt.part_cycles["host"]
        assert rt.part_cycles["sync"] == pytest.approx(rt.kind_cycles["sync"], abs=len(rt.phases))  # no host in it
        # Insights say it as the host's, with its source, where it is a large share; the bottleneck text names it
        from popvision_lite.analysis.insights import HOST_SHARE_NOTE, insights

        found = [f for f in insights(p) if f.kind == "host"]
        assert len(found) == (rt.part_share["host"] >= HOST_SHARE_NOTE)
        if found:
            assert rt.host_text in found[0].text and found[0].numbers["share"] == rt.part_share["host"]
        if rt.bottleneck == "host":
            assert rt.bottleneck_text.startswith(f"host: IPUs waiting for the {rt.host_short}")
        assert {"all-reduce", "optimizer", "stream in", "stream out"} <= set(rt.phases["name"])
        # the all-reduce and stream steps say what they move: each IPU's gradients over the IPU-Links (in and
        # out), its optimizer-state shard from DDR (in) and back (out)
        st = p.stored_table("steps")
        for r in rt.phases.itertuples():
            if r.kind in ("allreduce", "stream"):
                moved = st.iloc[r.first_step:r.last_step + 1]
                moved = moved[moved["kind"] == schema.STEP_KIND_CODE[
                    "exchange_global" if r.kind == "allreduce" else "stream_copy"]]
                assert len(moved) and ((moved["bytes_in"] + moved["bytes_out"]) > 0).all(), r.name
