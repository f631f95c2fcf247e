"""The copy compile's cheaper orderings give what the sorts they replace gave: the shared-bus receive bytes from
the multicast groups found for the distinct sends, and the exchange-code order read back from a packed key."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import Target
from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator.compile.compiled import CopyPlan
from popvision_lite.emulator.compile.copies import _distinct_sends
from popvision_lite.emulator.compile.copy_plans import _lexsort3, _packed_order, _pattern_order


@pytest.fixture(scope="module")
def mk2():
    return Target.from_device("ipu-mk2", num_ipus=1)


def _bus_by_rule(plan, cross, nbytes, T):
    """The shared-bus rule piece by piece: half on each tile of a bus (2k, 2k + 1) that both receive the same
    source piece, whole otherwise."""
    want = np.zeros(T)
    for i in np.nonzero(cross)[0]:
        partner = (cross & (plan.src_elem == plan.src_elem[i]) & (plan.length == plan.length[i])
                   & (plan.dst_tile == (plan.dst_tile[i] ^ 1)))
        want[plan.dst_tile[i]] += nbytes[i] / 2 if partner.any() else nbytes[i]
    return np.ceil(want).astype(np.int64)


def test_bus_bytes_from_the_send_groups_follow_the_rule(mk2):
    """Broadcasts in destination order (no sort of the groups' keys), shuffled ones, pieces received twice by one
    tile and copies with on-tile pieces: the grouped receive bytes are the rule's and the sorted search's."""
    rng = np.random.default_rng(7)
    T = mk2.num_tiles
    grouped = 0
    for trial in range(80):
        n = int(rng.integers(2, 120))
        src_elem = rng.integers(0, 6, n) * 16
        length = (rng.integers(1, 3, 6) * (1 if trial % 2 else 4))[src_elem // 16]  # one per source position
        dst_tile = rng.integers(0, 10, n)
        if trial % 3 == 0:  # a broadcast: each source piece to its destinations in ascending tile order
            o = np.lexsort((dst_tile, src_elem))
            dst_tile = np.sort(dst_tile)[np.argsort(o, kind="stable")]
        src_tile = rng.integers(0, 10, n) if trial % 4 else np.full(n, 11)
        plan = CopyPlan(src_elem, src_elem, length, src_tile, dst_tile)
        cross = src_tile != dst_tile
        nbytes = length * 2
        _xi, _xs, groups = _distinct_sends(plan, cross)
        got = cm.shared_bus_receive_bytes(mk2, plan, cross, nbytes, multicast=groups is not None, groups=groups)
        assert np.array_equal(got, _bus_by_rule(plan, cross, nbytes, T)), trial
        assert np.array_equal(got, cm.shared_bus_receive_bytes(mk2, plan, cross, nbytes)), trial
        grouped += groups is not None
    assert grouped >= 40


def test_packed_order_is_the_lexsort_order():
    """_packed_order's order and fields are _lexsort3's (ties by index), for tiles bounded or searched, pieces
    in order already, and keys too wide to pack (then it declines)."""
    rng = np.random.default_rng(3)
    packed = 0
    for trial in range(150):
        n = int(rng.integers(2, 500))
        tiles = int(rng.integers(2, 1500))
        st, dt = rng.integers(0, tiles, n), rng.integers(0, tiles, n)
        se = rng.integers(0, [50, 2**20, 2**45][trial % 3], n)
        if trial % 5 == 0:
            o = np.lexsort((se, st, dt))
            st, dt, se = st[o], dt[o], se[o]
        for bound in (None, tiles):
            got = _packed_order(se, st, dt, bound)
            want = _lexsort3(se, st, dt, bound)
            if got is None:
                assert trial % 3 == 2  # (only the 2^45 positions are too wide)
                continue
            packed += 1
            order, fields = got
            if want is None:
                assert order is None
                continue
            assert np.array_equal(order, want), trial
            for f, a in zip(fields, (st, dt, se), strict=True):
                assert np.array_equal(f, a[want]), trial
    assert packed >= 150


def test_pattern_order_of_a_subset_reads_the_plan_indices():
    """_pattern_order of some pieces (the crossing ones) gives back their plan indices in the sorted order."""
    rng = np.random.default_rng(5)
    n = 300
    plan = CopyPlan(rng.integers(0, 900, n), rng.integers(0, 900, n), rng.integers(1, 4, n), rng.integers(0, 8, n),
                    rng.integers(0, 8, n))
    idx = np.nonzero(rng.random(n) < 0.6)[0]
    st, dt, se, ln, ii = _pattern_order(plan, idx, plan.src_elem, 8)
    o = np.lexsort((plan.src_elem[idx], plan.src_tile[idx], plan.dst_tile[idx]))
    assert np.array_equal(ii, idx[o])
    for got, a in zip((st, dt, se, ln), (plan.src_tile, plan.dst_tile, plan.src_elem, plan.length), strict=True):
        assert np.array_equal(got, a[idx[o]])
