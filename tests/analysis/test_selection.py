"""Selection resolution (analysis.selection) against direct computations from the profile arrays."""

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import selection as S
from tests.support.insights_profile import make_data, write_small


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = write_small(tmp_path_factory.mktemp("sel") / "small.pvl")
    with pvl.open(path) as p:
        yield p


def _direct_op(data, op):
    """Brute force from the in-memory arrays the profile was written from."""
    steps = np.flatnonzero(data.steps["op_id"].to_numpy() == op)
    act = (data.step_tile_cycles[steps] > 0) | (data.step_tile_bytes_in[steps] > 0) | \
        (data.step_tile_bytes_out[steps] > 0)
    tiles = set(np.flatnonzero(act.any(axis=0)).tolist())
    cs = data.compute_sets.loc[data.compute_sets["op_id"] == op, "cs_id"]
    tiles |= set(data.vertices.loc[data.vertices["cs_id"].isin(cs), "tile"].tolist())
    return steps.tolist(), sorted(tiles)


@pytest.mark.parametrize("op", [0, 1, 2, 3])
def test_op_resolves_to_its_steps_and_tiles(small, op):
    data = make_data()
    r = S.resolve_op(small, op)
    steps, tiles = _direct_op(data, op)
    assert r.steps.tolist() == steps
    assert r.tiles.tolist() == tiles
    assert r.step_range == (min(steps), max(steps) + 1)


def test_op_tiles_include_exchange_receivers(small):
    # fwd/matmul computes on tiles 0-3; its exchange delivers to tile 4; both iterations of the Repeat count
    r = S.resolve_op(small, 0)
    assert r.tiles.tolist() == [0, 1, 2, 3, 4]
    assert r.steps.tolist() == [0, 1, 3, 4]
    # the stream copy op only sends from tile 7
    assert S.resolve_op(small, 3).tiles.tolist() == [7]


def test_op_without_steps(small):
    r = S.resolve_op(small, 99)
    assert r.steps.size == 0 and r.step_range is None and r.tiles.size == 0


def test_program_node_to_steps(small):
    # the Repeat covers both unrolled iterations of its body
    assert S.program_step_range(small, 1) == (0, 6)
    assert S.program_steps(small, 1).tolist() == [0, 1, 2, 3, 4, 5]
    # the root covers the whole run
    assert S.program_step_range(small, 0) == (0, len(small.stored_table("steps")))
    # a leaf inside the Repeat issues one step per iteration
    assert S.program_steps(small, 4).tolist() == [1, 4]
    assert S.program_step_range(small, 4) == (1, 5)
    assert S.program_subtree(small, 1).tolist() == [1, 2, 3, 4, 5]
    r = S.resolve_program(small, 7)
    assert r.steps.tolist() == [7] and r.tiles.tolist() == [4, 5, 6, 7]


def test_unknown_program_raises(small):
    with pytest.raises(KeyError, match="program 42"):
        S.program_subtree(small, 42)


def test_step_range_to_ops(small):
    st = small.stored_table("steps")
    for a, b in [(0, 1), (4, 8), (6, 7), (0, 9), (8, 9)]:
        want = sorted({int(o) for o in st["op_id"][(st["step"] >= a) & (st["step"] < b)] if o >= 0})
        assert S.ops_in_step_range(small, a, b).tolist() == want
    assert S.ops_in_step_range(small, 6, 7).tolist() == []  # the bare sync belongs to no op


def test_program_for_op_is_topmost_node_of_op(small):
    assert S.program_for_op(small, 0) == 3
    assert S.program_for_op(small, 2) == 7
    assert S.program_for_op(small, 99) is None
