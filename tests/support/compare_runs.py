"""Run pairs for the compare / export / what-if tests.

``run_pairs`` gives the recompute on/off pair ("mk2", "mk2_recompute") and the Mk2 vs Bow pair
("bow_base", "bow"): the bundled samples when present, else a small BERT training step (timing-only)
emulated once per test session.  ``tile_mismatch`` is a synthetic
Mk1 profile with 2 x 1216 tiles (vs 1 x 1472 for Mk2).
"""

from __future__ import annotations

import pytest

BERT = dict(batch=2, seq=64, hidden=64, layers=2, heads=2)


def _sample_pairs() -> dict:
    """The bundled samples' recompute on/off pair and Mk2/Bow pair, found by their run config."""
    from pathlib import Path

    import popvision_lite as pvl

    folder = Path(__file__).resolve().parents[2] / "sample_profiles"
    runs = []
    for path in sorted(folder.glob("*.pvl")):
        try:
            with pvl.open(path) as p:
                cfg = dict(p.run.get("config") or {})
                runs.append((path, p.target.device, cfg))
        except Exception:
            continue

    def same_but(c1, c2, key):
        keys = (set(c1) | set(c2)) - {key, "device", "timing_only"}
        return all(c1.get(k) == c2.get(k) for k in keys)

    out = {}
    for pa, da, ca in runs:
        for pb, db, cb in runs:
            if "mk2" not in out and da == db == "ipu-mk2" and not ca.get("recompute") and cb.get("recompute") \
                    and same_but(ca, cb, "recompute"):
                out["mk2"], out["mk2_recompute"] = pa, pb
            if "bow" not in out and da == "ipu-mk2" and db == "ipu-bow" and same_but(ca, cb, "device"):
                out["bow_base"], out["bow"] = pa, pb
    return out if len(out) == 4 else {}


@pytest.fixture(scope="session")
def run_pairs(tmp_path_factory):
    """{"mk2", "mk2_recompute"}: recompute off/on; {"bow_base", "bow"}: the same run on Mk2 and Bow.

    The bundled samples when sample_profiles/ has them, else emulated here (a few seconds)."""
    found = _sample_pairs()
    if found:
        return found
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model

    d = tmp_path_factory.mktemp("runs")
    out = {}
    for key, device, extra in (("mk2", "ipu-mk2", {}), ("mk2_recompute", "ipu-mk2", {"recompute": True}),
                               ("bow", "ipu-bow", {})):
        path = d / f"bert_{key}.pvl"
        run_model(make_config("bert", **BERT, **extra), device=device, timing_only=True, profile_path=path)
        out[key] = path
    out["bow_base"] = out["mk2"]
    return out


@pytest.fixture(scope="session")
def tile_mismatch(tmp_path_factory):
    from popvision_lite.testing.synthetic import write_synthetic

    d = tmp_path_factory.mktemp("synthetic")
    mk1 = d / "mk1_2ipu.pvl"
    write_synthetic(mk1, num_ipus=2, tiles_per_ipu=1216, num_steps=60, seed=1, device="ipu-mk1")
    mk2 = d / "mk2_1ipu.pvl"
    write_synthetic(mk2, num_ipus=1, tiles_per_ipu=1472, num_steps=60, seed=2, device="ipu-mk2")
    return mk2, mk1
