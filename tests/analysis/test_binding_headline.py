"""The advice ``emulate`` prints for a run that does not fit (``fit_constraint.binding_headline``) reads only what
the headline shows, and says exactly what the whole analysis (``binding_constraint(p).headline()``) says: on
hand-built profiles whose every byte is known (tests/support/insights_profile.py: an uneven layout, a total too
large, several IPUs with one or both over, one that fits) and on the bundled samples (one out of memory)."""

from pathlib import Path

import pytest

import popvision_lite as pvl
from popvision_lite.analysis.fit_constraint import binding_constraint, binding_headline
from tests.support.insights_profile import write_small

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
