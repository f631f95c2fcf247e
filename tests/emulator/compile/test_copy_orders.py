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


def test_stable_order_too_wide_for_one_key_is_the_lexsort_order(monkeypatch):
    """copy_broadcasts._stable_order where the keys and the index do not fit one int64 but all keys less the last
    do: the order is np.lexsort's, from one packed sort where no two pieces tie on the leading keys and from
    lexsort where some do (the last key then orders them); keys that fit as before."""
    from popvision_lite.emulator.compile import copy_broadcasts as CB

    calls = []
    real = np.lexsort
    monkeypatch.setattr(CB.np, "lexsort", lambda keys: calls.append(len(keys)) or real(keys))
    rng = np.random.default_rng(11)
    took = {"packed": 0, "lead": 0, "lexsort": 0}
    for trial in range(120):
        n = int(rng.integers(2, 3000))
        wide = trial % 3 != 0
        a = rng.integers(0, 1 << 11, n)
        b = rng.integers(0, 1 << 11, n)
        c = rng.integers(0, (1 << 28) if wide else 50, n)  # (28 + 11 + 11 + the index fit; past 63 bits with d)
        if trial % 4 == 1:  # ties on the leading keys: the last key must order them
            c[: n // 2] = c[n // 2: 2 * (n // 2)]
            a[: n // 2] = a[n // 2: 2 * (n // 2)]
            b[: n // 2] = b[n // 2: 2 * (n // 2)]
        d = rng.integers(0, 1 << 14, n)
        keys = (a, b, c, d)
        calls.clear()
        got = CB._stable_order(*keys)
        assert np.array_equal(got, real(keys[::-1])), trial
        bits = sum(max(int(k.max()), 1).bit_length() for k in keys) + max(n - 1, 1).bit_length()
        if bits <= 63:
            took["packed"] += 1
            assert not calls
        elif calls:
            took["lexsort"] += 1
            lead = np.stack(keys[:3], 1)
            assert len(np.unique(lead, axis=0)) < n  # (lexsort only where the leading keys tie)
        else:
            took["lead"] += 1
    assert min(took.values()) >= 10, took


def test_tile_bytes_of_copies_on_tile_follow_the_definition():
    """copies._tile_bytes: per tile the bytes sent (one per distinct crossing piece), received and copied on the
    tile are their sums over the pieces, int64, for copies with no piece crossing (the transposes: one count of
    the on-tile bytes), some crossing, and all crossing."""
    from popvision_lite.emulator.compile.copies import _tile_bytes

    rng = np.random.default_rng(13)
    T, isz = 64, 2
    for trial in range(90):
        n = int(rng.integers(1, 400))
        st = rng.integers(0, T, n)
        kind = trial % 3
        dt = st.copy() if kind == 0 else rng.integers(0, T, n)
        if kind == 1:  # about half the pieces on their tile
            keep = rng.random(n) < 0.5
            dt[keep] = st[keep]
        if kind == 2:
            dt = (st + 1 + rng.integers(0, T - 1, n)) % T
        ln = rng.integers(0, [1, 5, 300][trial % 3] + 1, n) if trial % 7 else np.ones(n, np.int64)
        plan = CopyPlan(rng.integers(0, 10_000, n), rng.integers(0, 10_000, n), ln, st, dt)
        cross = plan.src_tile != plan.dst_tile
        all_cross, sent, _groups = _distinct_sends(plan, cross)
        bout, bin_, local = _tile_bytes(plan, cross, sent, all_cross, isz, T)
        w = plan.length * isz
        for got, want in ((bout, np.bincount(st[sent & cross], w[sent & cross], T)),
                          (bin_, np.bincount(dt[cross], w[cross], T)), (local, np.bincount(st[~cross], w[~cross], T))):
            assert got.dtype == np.int64 and np.array_equal(got, want.astype(np.int64)), trial


def test_copy_between_tensors_sharing_a_mapping_reads_its_positions_once(monkeypatch):
    """A copy between two tensors that share one mapping object, element for element (a call's arguments and
    results), takes its destination tile positions from the source's (one tile_addr, and the exchange-code counts
    compare one side's strides): the graph compiles to the same memory, steps, cycles, bytes and code bytes as
    with the destination tensor mapped by an equal mapping of its own (two lookups, both sides' strides).  The
    layout puts several intervals on a tile, out of tile order, so the positions are not the elements."""
    import popvision_lite.emulator.compile as C
    import popvision_lite.emulator.compile.copies as CO
    from popvision_lite.emulator import programs as P
    from popvision_lite.emulator.graph import Graph, TensorView
    from popvision_lite.emulator.mapping import Mapping
    from tests.emulator.compile.test_copy_memo import _assert_same

    target = Target.from_device("ipu-mk2", num_ipus=1)
    rng = np.random.default_rng(17)
    n, k = 6000, 300
    cuts = np.sort(rng.choice(np.arange(1, n), k - 1, replace=False))
    start, stop = np.concatenate([[0], cuts]), np.concatenate([cuts, [n]])
    tile = rng.integers(0, 24, k)

    def graph(shared: bool):
        g = Graph(target)
        m = Mapping(tile, start, stop)
        a = g.add_variable("a", (n,), "float16", mapping=m)
        b = g.add_variable("b", (n,), "float16", mapping=m if shared else Mapping(tile.copy(), start.copy(),
                                                                                  stop.copy()))
        c = g.add_variable("c", (n,), "float16", mapping=m)
        idx = rng.permutation(n)[: n // 2]
        return g, P.Sequence([P.Copy(a, b), P.Copy(TensorView(b, idx, (len(idx),)), TensorView(c, idx, (len(idx),))),
                              P.Copy(TensorView(a, idx, (len(idx),)), TensorView(c, idx[::-1].copy(), (len(idx),)))])

    calls = []
    real = CO.tile_addr
    monkeypatch.setattr(CO, "tile_addr", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    state = rng.bit_generator.state
    one = C.compile_graph(*graph(True))
    n_one = len(calls)
    rng.bit_generator.state = state
    two = C.compile_graph(*graph(False))
    # (a -> b, whole to whole, reads none: copies._compile_same_layout, from the mapping alone, in both graphs;
    # b -> c reads one side only where b shares a's mapping object)
    assert n_one == 3 and len(calls) - n_one == 4
    _assert_same(one, two)
