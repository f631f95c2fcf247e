"""Tests of popvision_lite/analysis: every number checked against a direct computation on the profile.

``synthetic_profile(**kw)`` opens a synthetic profile (``write_synthetic`` keywords), written once per
distinct ``kw`` in the session and closed at its end; the module ``prof`` fixtures use it.
Compare run pairs (``run_pairs``, ``tile_mismatch``) come from the root conftest."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def synthetic_profile(tmp_path_factory):
    import popvision_lite as pvl
    from popvision_lite.testing.synthetic import write_synthetic

    opened: dict[tuple, object] = {}

    def open_synthetic(**kw):
        key = tuple(sorted(kw.items()))
        if key not in opened:
            path = tmp_path_factory.mktemp("synthetic") / "run.pvl"
            write_synthetic(path, **kw)
            opened[key] = pvl.open(path)
        return opened[key]

    yield open_synthetic
    for p in opened.values():
        p.close()
