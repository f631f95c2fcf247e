"""The exchanges of a convolution's input rows, a window gather and a matmul's K-partials reduction (its
intermediate stage too) hand their fields read-only int32 starts and sizes, as the fields hold them, so the
Regions constructor takes them as they are instead of converting an int64 copy (issue 49); an elementwise group's
check does not compare a sizes array with itself."""

import numpy as np
import pytest

from popvision_lite.emulator import graph as GR
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import base as CB
from popvision_lite.emulator.codelets.poplin_conv import ConvShape
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops.pooling import conv_windows
from popvision_lite.emulator.target import Target


@pytest.fixture
def given(monkeypatch):
    """id(field) -> whether the constructor was given read-only int32 starts and sizes (taken as they are)."""
    seen = {}
    init = GR.Regions.__init__

    def spy(self, tensor, starts, sizes):
        ok = [isinstance(a, np.ndarray) and a.dtype == np.int32 and not a.flags.writeable for a in (starts, sizes)]
        seen[id(self)] = all(ok)
        init(self, tensor, starts, sizes)

    monkeypatch.setattr(GR.Regions, "__init__", spy)
    return seen


def _copies(be):
    return {p.name: p for p in be.ctx.programs if isinstance(p, P.Copy)}


def test_conv_input_exchange_and_window_gather_give_int32(given):
    rng = np.random.default_rng(0)
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")
    for name, s in (("c", ConvShape(2, 8, 8, 16, 32, 3, 1, 1)), ("d", ConvShape(1, 2, 2, 1024, 8, 3, 1, 1))):
        x = rng.standard_normal((s.n * s.h * s.w, s.ci)).astype(np.float32)
        w = rng.standard_normal((s.k * s.k * s.ci, s.co)).astype(np.float32)
        be.conv2d(be.input(f"{name}x", x), be.weight(f"{name}w", w), s, name)
    idx, _ = conv_windows(2, 6, 6, 3, 1, 1)
    be.gather_windows(be.input("g", rng.standard_normal((72, 4)).astype(np.float32)), idx, "im2col")
    cp = _copies(be)
    assert given[id(cp["c/exchange_input"].src)] and given[id(cp["d/exchange_input"].src)]
    d = cp["d/exchange_input"].src
    assert d.n > d.tensor.size // 1024 and d.sizes.strides[0] == 0  # (an input-channel split: a region per pixel)
    g = cp["im2col/gather_windows"]
    assert given[id(g.src)] and given[id(g.dst)]


def test_k_partials_reduction_gives_int32(given):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 4096)).astype(np.float32)
    b = rng.standard_normal((4096, 64)).astype(np.float32)
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")
    be.matmul(be.input("a", a), be.input("b", b), "mm")
    cp = _copies(be)
    assert "mm/gather_partials_stage1" in cp  # (the multi-stage reduction: an intermediate stage)
    for c in ("mm/gather_partials_stage1", "mm/gather_partials"):
        assert given[id(cp[c].src)]
    groups = [g for g in be.graph.groups if "reduce_partials" in g.cs.name]
    assert len(groups) >= 2 and all(given[id(f)] for g in groups for f in g.fields.values())


def test_elementwise_check_skips_a_shared_sizes_array(monkeypatch):
    t = GR.Tensor.__new__(GR.Tensor)
    t.name, t.size = "t", 4096
    sizes = np.tile(np.array([1, 2], np.int32), 1000)
    sizes.setflags(write=False)
    fields = {"a": GR.Regions(t, np.arange(2000) * 2, sizes), "out": GR.Regions(t, np.arange(2000) * 2, sizes)}
    sizes = fields["a"].sizes
    assert fields["out"].sizes is sizes
    group = type("G", (), {"fields": fields, "params": {}, "cs": type("CS", (), {"name": "cs"})()})()
    calls = []
    monkeypatch.setattr(CB.np, "array_equal", lambda *a: calls.append(a) or True)
    CB.Elementwise("add", np.add, inputs=("a",)).check(group)
    assert calls == []
