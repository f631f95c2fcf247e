"""Selection resolution on a multi-IPU synthetic profile, against brute force over the full arrays."""

import numpy as np
import pytest

from popvision_lite.analysis import selection as S


@pytest.fixture(scope="module")
def prof(synthetic_profile):
    return synthetic_profile(num_ipus=2, tiles_per_ipu=48, num_steps=260, seed=3, over_capacity_tiles=2)


@pytest.fixture(scope="module")
def full(prof):
    w = prof.step_tiles.window(0, prof.num_steps)
    return (w.cycles > 0) | (w.bytes_in > 0) | (w.bytes_out > 0)


def test_every_op_resolves_like_brute_force(prof, full, monkeypatch):
    monkeypatch.setattr(S, "_WINDOW_CELLS", 500)  # force many small windows
    st = prof.stored_table("steps")
    vx = prof.stored_table("vertices").merge(prof.stored_table("compute_sets")[["cs_id", "op_id"]], on="cs_id")
    for op in prof.stored_table("ops")["op_id"]:
        steps = st["step"][st["op_id"] == op].to_numpy()
        tiles = set(np.flatnonzero(full[steps].any(axis=0)).tolist()) | set(vx["tile"][vx["op_id"] == op])
        r = S.resolve_op(prof, int(op))
        assert r.steps.tolist() == sorted(steps.tolist())
        assert r.tiles.tolist() == sorted(tiles)


def test_every_program_range_covers_its_subtree(prof):
    pr = prof.stored_table("programs")
    parent = dict(zip(pr["prog_id"], pr["parent_id"], strict=True))

    def ancestors(p):
        while p >= 0:
            yield p
            p = parent[p]

    st = prof.stored_table("steps")
    for pid in pr["prog_id"].sample(40, random_state=1):
        sub = [q for q in pr["prog_id"] if pid in ancestors(q)]
        steps = st["step"][st["prog_id"].isin(sub)].to_numpy()
        assert S.program_steps(prof, int(pid)).tolist() == sorted(steps.tolist())
        rng = S.program_step_range(prof, int(pid))
        if len(steps):
            assert rng[0] <= steps.min() and steps.max() < rng[1]
