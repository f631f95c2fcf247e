"""The advice ``emulate`` prints for a run that does not fit (``fit_constraint.binding_headline``) reads only what
the headline shows, and says exactly what the whole analysis (``binding_constraint(p).headline()``) says: on
hand-built profiles whose every byte is known (tests/support/insights_profile.py: an uneven layout, a total too
large, several IPUs with one or both over, one that fits) and on the bundled samples (one out of memory)."""

import copy
from pathlib import Path

import pytest

import popvision_lite as pvl
from popvision_lite.analysis.fit_constraint import binding_constraint, binding_headline
from popvision_lite.emulator.models.config import make_config
from popvision_lite.profile.writer import write_profile
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)
from tests.support.emulations import shared_run
from tests.support.insights_profile import make_data, write_small

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


@pytest.mark.parametrize("kw", [{}, {"cap": 300}, {"num_ipus": 2}, {"num_ipus": 2, "cap": 300}, {"cap": 2000}],
                         ids=["uneven", "total", "two_ipus", "two_ipus_total", "fits"])
def test_headline_only_says_what_the_whole_analysis_says(tmp_path, kw):
    with pvl.open(write_small(tmp_path / "p.pvl", **kw)) as p:
        full = binding_constraint(p)
        head = binding_headline(p)
    assert head == full.headline()
    assert ("Fits" in head) == full.fits


@pytest.mark.parametrize("name", sorted(x.name for x in SAMPLES.glob("*.pvl")))
def test_headline_only_on_the_samples(name):
    with pvl.open(SAMPLES / name) as p:
        assert binding_headline(p) == binding_constraint(p).headline()


@pytest.mark.parametrize("kw", [{}, {"cap": 300}, {"num_ipus": 2}, {"cap": 2000}], ids=["uneven", "total", "two_ipus",
                                                                                       "fits"])
def test_headline_from_memory_is_the_files(tmp_path, kw):
    data = make_data(**kw)
    write_profile(tmp_path / "p.pvl", data)
    with pvl.open(tmp_path / "p.pvl") as p:
        assert binding_headline(data) == binding_headline(p)


def test_headline_of_a_pipelined_run_from_memory_is_the_files(tmp_path):
    """A pipelined run (its liveness held as IPU blocks) judged against a quarter of its fullest tile's bytes, so
    that most tiles are over capacity and the headline names the tensors at their peaks."""
    # the tests' device (decision 0395): any tile count; the session's run of this config (tests/profile/
    # test_block_rows.py writes it too), read-only: the capacity and the verdict changed on a copy
    cfg = make_config("bert-tiny", ipus=2, pipeline_stages=2, grad_accum=4, seq=32)
    data = copy.copy(shared_run(cfg, SMALL, timing_only=True).profile_data)
    data.target, data.run = copy.copy(data.target), dict(data.run)
    data.target.sram_bytes_per_tile = int(data.memory.sum(axis=(1, 2)).max()) // 4
    data.run["fits"] = False
    write_profile(tmp_path / "p.pvl", data)
    with pvl.open(tmp_path / "p.pvl") as p:
        head = binding_headline(p)
        assert binding_headline(data) == head == binding_constraint(p).headline()
    assert "tiles over capacity" in head and "mostly" in head
