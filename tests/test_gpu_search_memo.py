"""The placement search's memo (analysis/gpu_parallel.search ``memo``): the validation report's GPU rows of one
benchmark share their op list's distinct kernels and per-micro-batch layouts, computed once, and every row is
predicted exactly as without it."""

from __future__ import annotations

import dataclasses

from popvision_lite import gpu_validation as gv
from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.analysis import gpu_parallel as gp
from tests.support.transformer_kernels import two_layer_kernels


def _ops() -> gv.OpList:
    kernels, cfg = two_layer_kernels(rows=256, embedding=False)
    return gv.OpList(kernels=kernels, samples_per_pass=1.0, cfg=dict(cfg, model="bert"), params=2e6,
                     scores_kept=True, notes=[])


def _row(i: int, **kw) -> gv.GpuRow:
    base = dict(id=f"r{i}", round="v0", benchmark="BERT", gpu="h100-sxm", n_gpus=8, gbs=768, micro_batch=96, tp=1,
                pp=1, vp=1, dp=8, precision="fp8", optimizer="lamb", measured=5000.0, kind="incl. eval")
    return gv.GpuRow(**(base | kw))


ROWS = [_row(0), _row(1, gbs=1536), _row(2, gpu="a100-80gb", precision="fp16", micro_batch=56, gbs=448),
        _row(3, tp=2, dp=4, micro_batch=48), _row(4, tp=2, dp=2, pp=2, micro_batch=24),
        _row(5, tp=2, dp=2, pp=2, micro_batch=24, gbs=1536), _row(6, micro_batch=32),
        _row(7, precision="fp16")]  # row 0's GPU, TP and micro-batch at another precision: another layout


def _same(a: gv.GpuResult, b: gv.GpuResult) -> None:
    assert (a.predicted, a.placement, a.fits, a.error, a.notes) == (b.predicted, b.placement, b.fits, b.error, b.notes)


def test_rows_sharing_an_op_list_predict_what_each_predicts_alone(monkeypatch):
    alone = [gv.predict_row(r, _ops()) for r in ROWS]  # each row its own op list: an empty memo
    calls = {"layout": 0, "unique": 0}
    layout, unique = gp.layout, gp._unique

    def counted(name, fn):
        def call(*a, **kw):
            calls[name] += 1
            return fn(*a, **kw)
        return call

    monkeypatch.setattr(gp, "layout", counted("layout", layout))
    monkeypatch.setattr(gp, "_unique", counted("unique", unique))
    ops = _ops()
    shared = [gv.predict_row(r, ops) for r in ROWS]
    for a, b in zip(alone, shared, strict=True):
        assert not a.error
        _same(a, b)
    # the distinct kernels once; one layout per (GPU, TP, micro-batch, precision) the rows reach, not one per row
    assert calls["unique"] == 1
    assert calls["layout"] == len(ops.memo["layouts"]) == 6
    # a search without a memo gives the same estimate as the memo's
    r = ROWS[4]
    setting = gp.Setting(samples_per_step=r.gbs, samples_per_pass=1.0, params=2e6, optimizer="lamb", precision="fp8",
                         layers=2, activation_bytes=lambda t, s: gp.activation_bytes_per_sample(ops.cfg, t, s))
    e0, _ = gp.search(ops.kernels, "h100-sxm", 8, ops.cfg, setting, tp=2, pp=2, micro_batch=24)
    e1, _ = gp.search(ops.kernels, "h100-sxm", 8, ops.cfg, setting, tp=2, pp=2, micro_batch=24, memo=ops.memo)
    assert e0.samples_per_second == e1.samples_per_second and e0.memory == e1.memory


def test_a_gpu_model_of_the_same_name_with_other_constants_gets_its_own_layout():
    ops = _ops()
    row = ROWS[0]
    setting = gp.Setting(samples_per_step=row.gbs, samples_per_pass=1.0, params=2e6, optimizer="lamb",
                         precision="fp8", layers=2,
                         activation_bytes=lambda t, s: gp.activation_bytes_per_sample(ops.cfg, t, s))
    g = ge.gpu_model("h100-sxm")
    slow = dataclasses.replace(g, hbm_fraction=g.hbm_fraction / 4)
    fast_e, _ = gp.search(ops.kernels, g, 8, ops.cfg, setting, tp=1, pp=1, micro_batch=96, memo=ops.memo)
    slow_e, _ = gp.search(ops.kernels, slow, 8, ops.cfg, setting, tp=1, pp=1, micro_batch=96, memo=ops.memo)
    alone, _ = gp.search(ops.kernels, slow, 8, ops.cfg, setting, tp=1, pp=1, micro_batch=96)
    assert slow_e.samples_per_second == alone.samples_per_second < fast_e.samples_per_second
