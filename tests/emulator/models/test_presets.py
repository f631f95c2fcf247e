"""Model presets: every preset builds a valid config; attention may project to heads x d_head != hidden
(GPT-3 XL); the small presets emulate (timing only) and the d_head plumbing keeps numerics equal to numpy."""

import pytest

from popvision_lite.emulator.backends.planning import PlanOnlyBackend
from popvision_lite.emulator.models.config import BERT_PRESETS, GPT_PRESETS, MODEL_NAMES, make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.emulator.models.transformer import build_bert_stage
from popvision_lite.emulator.ops.context import plan_target_of
from popvision_lite.emulator.target import Target
from popvision_lite.errors import ConfigError

# Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1: n_layers, d_model, n_heads, d_head
GPT3_TABLE_2_1 = {
    "gpt3-small": (12, 768, 12, 64), "gpt3-medium": (24, 1024, 16, 64), "gpt3-large": (24, 1536, 16, 96),
    "gpt3-xl": (24, 2048, 24, 128), "gpt3-2.7b": (32, 2560, 32, 80), "gpt3-6.7b": (32, 4096, 32, 128),
    "gpt3-13b": (40, 5140, 40, 128), "gpt3-175b": (96, 12288, 96, 128),
}


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_preset_builds_a_valid_config(name):
    cfg = make_config(name)
    assert cfg.layers >= 1 and cfg.hidden >= 1
    if cfg.model in ("bert", "gpt"):
        assert cfg.attn_width == cfg.heads * cfg.d_head


@pytest.mark.parametrize("name", sorted(GPT3_TABLE_2_1))
def test_gpt3_presets_have_the_published_shapes(name):
    cfg = make_config(name)
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.d_head) == GPT3_TABLE_2_1[name]
    assert (cfg.model, cfg.seq) == ("gpt", 2048)


def test_gpt3_xl_projects_attention_wider_than_its_hidden_size():
    """The stage the emulator builds (the planning backend: shapes and plans, no values drawn; numerics with
    heads x d_head != hidden against numpy are the test below) holds projections of the attention's width."""
    cfg = make_config("gpt3-xl", layers=1, seq=4, vocab=16)
    assert cfg.attn_width == 3072 != cfg.hidden
    h = build_bert_stage(PlanOnlyBackend(plan_target_of(Target.from_device("ipu-mk2"))), cfg, 0, 1)
    p = h["layer_params"]
    assert p["wq"].shape == p["wk"].shape == p["wv"].shape == (2048, 3072)
    assert p["wo"].shape == (3072, 2048)


def test_hidden_not_divisible_by_heads_needs_head_dim():
    with pytest.raises(ConfigError, match="head_dim"):
        make_config("bert", hidden=30, heads=4)
    assert make_config("bert", hidden=30, heads=4, head_dim=8).attn_width == 32
    with pytest.raises(ConfigError, match="head_dim"):
        make_config("bert", head_dim=-1)


def test_numerics_with_heads_times_d_head_not_hidden_match_numpy():
    r = run_model(make_config("bert", precision="fp32", batch=2, seq=8, hidden=16, heads=2, head_dim=12, layers=1,
                              vocab=32))
    assert r.fits and r.numeric_checks
    assert all(v["passed"] for v in r.numeric_checks.values())
    assert max(v["max_abs_err"] for v in r.numeric_checks.values()) < 1e-3


# the small presets at their published widths and heads; sequence, vocabulary and depth shortened so a
# timing-only run stays small (the composition emulates one layer body per stage whatever the depth)
SMALL = [n for n in sorted(GPT_PRESETS) if GPT_PRESETS[n][1] <= 1024] + [n for n in sorted(BERT_PRESETS)
                                                                        if BERT_PRESETS[n][1] <= 256]


@pytest.mark.parametrize("name", SMALL)
def test_small_presets_emulate_timing_only(name):
    cfg = make_config(name, layers=2, seq=32, vocab=256)
    r = run_model(cfg, timing_only=True)
    assert r.fits and r.samples_per_second > 0
    names = set(r.profile_data.ops.name)
    assert any(n.endswith("attention/qk_matmul") for n in names)


def test_xl_shape_scaled_down_emulates_timing_only():
    # XL's ratio heads x d_head = 1.5 x hidden, at a width a test can afford
    cfg = make_config("gpt3-xl", layers=2, seq=32, vocab=256, hidden=128, heads=3, head_dim=64)
    r = run_model(cfg, timing_only=True)
    assert r.fits and r.samples_per_second > 0
    ops = r.profile_data.ops.set_index("name")
    # the q projection (tokens x hidden -> tokens x heads*d_head) does 1.5x the work of the square one
    sq = run_model(make_config("gpt3-xl", layers=2, seq=32, vocab=256, hidden=128, heads=2, head_dim=64),
                   timing_only=True).profile_data.ops.set_index("name")
    q = "ipu0/layer/attention/q_matmul"
    assert ops.flops[q] > sq.flops[q]
