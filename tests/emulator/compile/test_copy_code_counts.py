"""The copy compile's exchange-code counts in one pass over a packed key (copy_plans.exchange_code_counts) are the
two-step path's (the pieces sorted by _pattern_order, then their patterns by _pattern_units) tile for tile."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.compile.compiled import CopyPlan
from popvision_lite.emulator.compile.copies import _code_counts_two_step
from popvision_lite.emulator.compile.copy_plans import exchange_code_counts


def _plan(rng, n: int, T: int, ordered: bool):
    """Pieces of a few regular patterns (rows of blocks between tile pairs, some strides broken), shuffled or
    in destination order, with multicast source pieces."""
    length = rng.choice([1, 4, 4, 8], n)
    src_tile = rng.integers(0, T, n)
    dst_tile = rng.integers(0, T, n)
    src = np.cumsum(length * rng.choice([1, 1, 1, 2], n)) - length
    dst = np.cumsum(length * rng.choice([1, 1, 3], n)) - length
    if ordered:
        o = np.lexsort((src, src_tile, dst_tile))
        src_tile, dst_tile, src, dst, length = src_tile[o], dst_tile[o], src[o], dst[o], length[o]
    return CopyPlan(src, dst, length, src_tile, dst_tile)


def test_packed_counts_are_the_two_step_counts():
    rng = np.random.default_rng(11)
    packed = 0
    for trial in range(120):
        T = int(rng.choice([4, 16, 1472]))
        n = int(rng.integers(2, 400))
        plan = _plan(rng, n, T, ordered=trial % 3 == 0)
        if trial % 4 == 1:  # few distinct tiles: long runs of equal tile pairs (loops)
            plan.src_tile //= max(T // 2, 1)
            plan.dst_tile = plan.src_tile + 1
        cross = plan.src_tile != plan.dst_tile
        if not cross.any():
            continue
        # the senders: every crossing piece, or one per source piece where some are multicast (repeated)
        if trial % 2:
            send = cross
        else:
            rep = rng.random(n) < 0.3
            plan.src_elem[1:][rep[1:]] = plan.src_elem[:-1][rep[1:]]
            plan.length[1:][rep[1:]] = plan.length[:-1][rep[1:]]
            send = cross & ~rep
            if np.array_equal(send, cross):
                send = cross
        src_addr, dst_addr = plan.src_elem * 2 + 3, plan.dst_elem
        got = exchange_code_counts(plan, cross, send, src_addr, dst_addr, T)
        want = _code_counts_two_step(plan, cross, send, src_addr, dst_addr, T)
        assert got is not None
        packed += 1
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w), trial
        assert int(got[0].sum()) > 0
    assert packed >= 100


def test_counts_decline_a_key_too_wide():
    """Source positions near 2^50 on 1,472 tiles do not fit the packed key: None (the two-step path counts)."""
    n = 64
    plan = CopyPlan(np.arange(n) * 4 + (1 << 50), np.arange(n) * 4, np.full(n, 4), np.arange(n) % 3,
                    np.arange(n) % 5 + 3)
    cross = plan.src_tile != plan.dst_tile
    assert exchange_code_counts(plan, cross, cross, plan.src_elem, plan.dst_elem, 1472) is None
    n_pat, n_loop = _code_counts_two_step(plan, cross, cross, plan.src_elem, plan.dst_elem, 1472)
    assert n_pat.sum() > 0


def test_stable_argsort_values_are_the_sorted_keys():
    """stable_argsort(values=True) gives (key[order], order) with numpy's stable order, packed or not (keys too
    large to carry the index, negative keys)."""
    from popvision_lite.emulator.compile.copy_plans import stable_argsort

    rng = np.random.default_rng(3)
    for key in (rng.integers(0, 50, 1000), np.sort(rng.integers(0, 9, 300)), rng.integers(-5, 5, 200),
                rng.integers(0, 2**62, 100), np.array([7]), np.zeros(0, np.int64)):
        key = key.astype(np.int64)
        ks, order = stable_argsort(key, values=True)
        want = np.argsort(key, kind="stable")
        assert np.array_equal(order, want) and np.array_equal(ks, key[want])


def test_receive_side_counts_are_code_patterns_per_tile():
    """With no send side (the on-tile copy descriptors), the counts are code_patterns' patterns and loops summed
    per destination tile."""
    from popvision_lite.emulator.compile.copy_plans import code_patterns

    rng = np.random.default_rng(5)
    for trial in range(60):
        T = int(rng.choice([4, 64]))
        n = int(rng.integers(2, 300))
        plan = _plan(rng, n, T, ordered=trial % 2 == 0)
        plan.dst_tile = plan.src_tile.copy()  # on-tile pieces
        local = rng.random(n) < (1.0 if trial % 3 else 0.6)
        if local.sum() < 2:
            continue
        src_addr, dst_addr = plan.src_elem + 1, plan.dst_elem * 2
        n_pat, n_loop = exchange_code_counts(plan, local, None, src_addr, dst_addr, T)
        ps, _pd, cnt = code_patterns(plan, local, src_addr, dst_addr, T)
        assert np.array_equal(n_pat, np.bincount(ps, minlength=T)), trial
        assert np.array_equal(n_loop, np.bincount(ps[cnt > 1], minlength=T)), trial


class _Mapping:
    def __init__(self, start, tile, total):
        self.start = np.asarray(start, np.int64)
        self.stop = np.append(self.start[1:], total)
        self.tile = np.asarray(tile, np.int64)

    def __len__(self):
        return len(self.start)


class _Endpoint:
    def __init__(self, starts, lens, mapping):
        self._runs = (np.asarray(starts, np.int64), np.asarray(lens, np.int64))
        self.tensor = type("T", (), {"mapping": mapping})()

    def runs(self):
        return self._runs


def test_runs_cut_alike_on_both_sides_are_cut_as_by_merging():
    """Paired runs between two tensors laid out alike (the same interval boundaries, the destination moved by D),
    some crossing boundaries on both sides at the same offsets, some on one side, some inside one interval, and
    with one run moved so that its two sides' cuts differ: the pieces are _cut_runs' (the merge of both sides'
    cut positions), field for field."""
    from popvision_lite.emulator.compile import copy_plans as CP

    rng = np.random.default_rng(9)
    for trial in range(40):
        N = 4000
        bounds = np.unique(np.concatenate([[0], rng.integers(1, N, int(rng.integers(5, 200)))]))
        D = int(rng.integers(0, 50))
        sm = _Mapping(bounds, rng.integers(0, 16, len(bounds)), N)
        dm = _Mapping(np.concatenate([[0], bounds[1:] + D]) if D else bounds, rng.integers(0, 16, len(bounds)), N + D)
        edges = np.unique(rng.integers(0, N, int(rng.integers(2, 60))))
        starts, lens = edges[:-1], np.diff(edges)
        order = rng.permutation(len(starts))  # runs in any order on the source side
        qs, ql = starts[order], lens[order]
        qd = qs + D
        if trial % 4 == 3 and len(qd) > 1:  # one run's destination moved: its cuts no longer coincide
            qd = qd.copy()
            qd[0] = max(int(qd[0]) - 1, 0) if qd[0] else 1
        got = CP._copy_pieces_runs(_Endpoint(qs, ql, sm), _Endpoint(qd, ql, dm))
        want = CP._cut_runs(qs, ql, sm, qd, ql, dm)[0]
        for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), (trial, f)


def test_runs_cut_on_one_side_each_are_cut_as_by_merging():
    """Paired runs between two tensors laid out differently, each run crossing boundaries on at most one side (some
    on the source side, some on the destination side, some on neither, and in some trials only one side cuts):
    _cut_one_side's pieces are _cut_runs', field for field."""
    from popvision_lite.emulator.compile import copy_plans as CP

    rng = np.random.default_rng(21)
    one_sided = 0
    for trial in range(60):
        N = 3000
        sb = np.unique(np.concatenate([[0], rng.integers(1, N, int(rng.integers(3, 80)))]))
        db = np.unique(np.concatenate([[0], rng.integers(1, N, int(rng.integers(3, 80)))]))
        if trial % 3 == 1:
            db = np.array([0])  # the destination one interval: only the source side cuts
        sm, dm = _Mapping(sb, rng.integers(0, 8, len(sb)), N), _Mapping(db, rng.integers(0, 8, len(db)), N)
        edges = np.unique(rng.integers(0, N, int(rng.integers(2, 80))))
        qs, ql = edges[:-1], np.diff(edges)
        ks, kd = np.searchsorted(sb, qs, "right") - 1, np.searchsorted(db, qs, "right") - 1
        ok_s, ok_d = qs + ql <= sm.stop[ks], qs + ql <= dm.stop[kd]
        keep = ok_s | ok_d
        qs, ql = qs[keep], ql[keep]
        if len(qs) == 0:
            continue
        order = rng.permutation(len(qs))
        qs, ql = qs[order], ql[order]
        got = CP._copy_pieces_runs(_Endpoint(qs, ql, sm), _Endpoint(qs, ql, dm))
        want = CP._cut_runs(qs, ql, sm, qs, ql, dm)[0]
        one_sided += len(got.length) > len(qs)
        for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), (trial, f)
    assert one_sided >= 30


def test_rotated_tiles_are_the_remainder():
    """rotated_tiles is (tiles - shift) % tiles for every shift, with the same dtype (the memo keys hash it)."""
    from popvision_lite.emulator.compile.compiled import rotated_tiles

    rng = np.random.default_rng(1)
    for T in (4, 1472, 23552):
        for dt in (np.int64, np.int32, np.uint16):
            a = rng.integers(0, T, 5000).astype(dt)
            for s in (0, 1, 2, T - 2, T - 1):
                want = (a - s) % T
                got = rotated_tiles(a, s, T)
                assert got.dtype == want.dtype and np.array_equal(got, want), (T, dt, s)


def test_per_vertex_pieces_only_where_both_sides_keep_each_vertex_on_one_tile():
    """copy_pieces costs a field-to-field copy per vertex only when every vertex lies in one mapping interval on
    both sides: with the source's vertices whole and some destination vertex split across two tiles (and the
    reverse), its pieces carry each element between the tiles a per-element lookup gives."""
    from popvision_lite.emulator import Graph, Target
    from popvision_lite.emulator import mapping as M
    from popvision_lite.emulator.compile import copy_plans as CP

    def per_pair(plan):
        out: dict = {}
        for s, d, n in zip(plan.src_tile, plan.dst_tile, plan.length, strict=True):
            out[(int(s), int(d))] = out.get((int(s), int(d)), 0) + int(n)
        return out

    rng = np.random.default_rng(5)
    shape, n = (8, 12), 96
    split = M.intervals(np.array([1, 2, 3]), np.array([0, 40, 70]), np.array([40, 70, 96]))  # cuts inside blocks
    for whole_side in ("src", "dst"):
        g = Graph(Target.from_device("ipu-mk2", num_ipus=1))
        blocks = M.by_blocks(shape, (2, 3), rng.integers(0, 6, 16))
        a = g.add_variable(f"a_{whole_side}", shape, "float32", mapping=blocks if whole_side == "src" else split)
        b = g.add_variable(f"b_{whole_side}", shape, "float32", mapping=split if whole_side == "src" else blocks)
        # the blocks of rows 0-3 (block (1, 1), elements 27-29 and 39-41, spans the cut at 40), in two orders
        src = a.blocks((2, 3), np.stack([1 - np.arange(8) // 4, (np.arange(8) + 1) % 4], 1))
        dst = b.blocks((2, 3), np.stack([np.arange(8) // 4, np.arange(8) % 4], 1))
        got = CP.copy_pieces(src, dst)
        assert len(got.length) > 8, whole_side  # cut per run, not one piece per vertex
        se, de = (np.concatenate([np.arange(x, x + k) for x, k in zip(*ep.runs(), strict=True)]) for ep in (src, dst))
        want: dict = {}
        for s, d in zip(a.mapping.tile_of(se), b.mapping.tile_of(de), strict=True):
            want[(int(s), int(d))] = want.get((int(s), int(d)), 0) + 1
        assert per_pair(got) == want, whole_side
        assert int(got.length.sum()) == n // 2
