"""The model definitions (run on the numpy backend) compute true gradients: directional finite
differences of the loss agree with the gradients the backward passes produce, and the conv block's
implicit GEMM equals a direct convolution."""

import numpy as np
import pytest

from popvision_lite.emulator import reference as R
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.models.catalog import build
from popvision_lite.emulator.models.config import make_config
from popvision_lite.errors import ConfigError


class _Perturbed(NumpyBackend):
    def __init__(self, which, delta):
        super().__init__("fp32")
        self.which, self.delta = which, delta

    def weight(self, name, values, dtype=None, streamed=False):
        if self.qual(name) == self.which:
            values = np.asarray(values, np.float64) + self.delta
        return super().weight(name, values, dtype)


def _loss(cfg, which=None, delta=0.0):
    be = _Perturbed(which, delta)
    built = build(be, cfg)
    tgt = [v for k, v in be.tensors.items() if k.endswith("target")][0]
    y = built.results["output"].astype(np.float64)
    return float(((y - tgt.reshape(y.shape)) ** 2).mean())


def _grad_of(cfg, grad_key):
    be = NumpyBackend("fp32")
    return build(be, cfg).results[grad_key].astype(np.float64), be


@pytest.mark.parametrize("model,weight,grad_key,kw", [
    ("mlp", "layer0/w", "layer0/dw", dict(batch=8, hidden=16)),
    ("bert", "layer0/wq", "layer0/dwq", dict(batch=2, seq=4, hidden=8, heads=2, layers=2, vocab=16)),
    ("bert", "layer1/w1", "layer1/dw1", dict(batch=2, seq=4, hidden=8, heads=2, layers=2, vocab=16)),
    ("bert", "layer0/ln1_g", "layer0/dln1_g", dict(batch=2, seq=4, hidden=8, heads=2, layers=2, vocab=16)),
    ("conv", "block0/conv1_w", "block0/dconv1_w", dict(batch=1, image=4, hidden=3)),
    ("gnn", "mp0/w", "mp0/dw", dict(nodes=12, edges=30, hidden=4)),
])
def test_backward_matches_finite_differences(model, weight, grad_key, kw):
    cfg = make_config(model, precision="fp32", **kw)
    g, be = _grad_of(cfg, grad_key)
    shape = be.tensors[weight].shape
    direction = np.random.default_rng(3).standard_normal(shape)
    eps = 1e-3
    fd = (_loss(cfg, weight, eps * direction) - _loss(cfg, weight, -eps * direction)) / (2 * eps)
    analytic = float((g.reshape(shape) * direction).sum())
    assert analytic == pytest.approx(fd, rel=2e-2, abs=1e-5)


def test_recompute_gives_identical_numbers():
    kw = dict(batch=2, seq=4, hidden=8, heads=2, layers=2, vocab=16, precision="fp32")
    a = build(NumpyBackend("fp32"), make_config("bert", recompute=False, **kw)).results
    be = NumpyBackend("fp32")
    b = build(be, make_config("bert", recompute=True, **kw)).results
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert any("/recompute/" in name for name, _ in be.records)


def test_conv_block_forward_equals_direct_conv():
    cfg = make_config("conv", precision="fp32", batch=2, image=5, hidden=3, training=False)
    be = NumpyBackend("fp32")
    out = build(be, cfg).results["output"].reshape(2, 5, 5, 3)
    x = be.tensors["input"].reshape(2, 5, 5, 3)
    w1, w2 = be.tensors["block0/conv1_w"], be.tensors["block0/conv2_w"]
    want = R.relu(R.conv2d(R.relu(R.conv2d(x, w1, 1, 1)), w2, 1, 1) + x)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_bert_forward_matches_reference_attention():
    cfg = make_config("bert", precision="fp32", batch=2, seq=4, hidden=8, heads=2, layers=1, vocab=16,
                      training=False)
    be = NumpyBackend("fp32")
    out = build(be, cfg).results["output"]
    T = be.tensors
    x = T["embedding/gather"].reshape(2, 4, 8)
    attn, _ = R.attention(x, T["layer0/wq"], T["layer0/wk"], T["layer0/wv"], T["layer0/wo"], 2)
    h1 = R.layer_norm(x + attn, T["layer0/ln1_g"], T["layer0/ln1_b"])
    y = R.layer_norm(h1 + R.gelu(h1 @ T["layer0/w1"]) @ T["layer0/w2"], T["layer0/ln2_g"], T["layer0/ln2_b"])
    np.testing.assert_allclose(out, y.reshape(8, 8), rtol=1e-4, atol=1e-4)


def test_presets_and_config_errors():
    c = make_config("bert-large")
    assert (c.layers, c.hidden, c.heads, c.seq, c.batch) == (24, 1024, 16, 128, 8)
    assert make_config("bert-base", layers=3).layers == 3
    with pytest.raises(ConfigError, match="model"):
        make_config("resnet9000")
    with pytest.raises(ConfigError, match="heads"):
        make_config("bert", hidden=10, heads=3)
    with pytest.raises(ConfigError, match="batch"):
        make_config("mlp", batch=0)
    # the old 1/2/4/8/16 limit is lifted; what stays wrong is fewer layers than stages
    assert make_config("mlp", ipus=3).ipus == 3
    with pytest.raises(ConfigError, match="^layers"):
        make_config("mlp", ipus=5)
    with pytest.raises(ConfigError, match="^ipus"):
        make_config("bert-large", replicas=4, pipeline_stages=4, ipus=8)
    with pytest.raises(ConfigError, match="^layer_split"):
        make_config("bert-large", layer_split=[6, 6, 6])
    with pytest.raises(ConfigError, match="^replicas"):
        make_config("mlp", replicas=3, ipus=4)
    with pytest.raises(ConfigError, match="^packing"):
        make_config("mlp", packing=2.0)
