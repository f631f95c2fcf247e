"""The reduce vertices of a K-split matmul ordered by their tile's rank in the op's rotated tile order
(ops/matmul.k_partial_vertices and k_partial_vertices_uneven with ``rank``): on tiles that do not rotate the order is
the order by tile (the definition); on rotated tiles it is the unrotated op's order with every tile moved by the
rotation, so two matmuls of one split gather their partials with the same exchange on rotated tiles and the copy
memo replays the later one (its replay must equal the fresh compile, tests/emulator/compile/test_copy_memo.py's
comparison)."""

import numpy as np

from popvision_lite.emulator import Target
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
from popvision_lite.emulator.ops import matmul as MM
from tests.emulator.compile.test_copy_memo import _assert_same, _compile_both
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

SPAN = 92
UNEVEN = ((1, 4, 37, 53, 5, 7), (2, 3, 29, 31, 4, 3), (1, 8, 64, 48, 6, 1))  # (G, pk, Mm, N, pm, pn)
EVEN = ((1, 4, 40, 48, 5, 6), (2, 3, 24, 30, 4, 3), (1, 6, 36, 12, 3, 2))


def _uneven(case, vt, rank=None, layouts=None):
    G, pk, Mm, N, pm, pn = case
    msz, moff = MM._parts(Mm, pm)
    nsz, noff = MM._parts(N, pn)
    return MM.k_partial_vertices_uneven(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, vt, layouts, rank)


def _even(case, vt, rank=None):
    G, pk, Mm, N, pm, pn = case
    if rank is None:
        return MM.k_partial_vertices(G, pk, pm, pn, Mm // pm, N // pn, Mm, N, vt)
    return MM.k_partial_vertices(G, pk, pm, pn, Mm // pm, N // pn, Mm, N, vt, rank)


def _same(a: dict, b: dict, moved: int = 0, keys_moved=("tile",)):
    """``a`` equals ``b`` with the tile arrays of ``b`` moved by ``moved`` (mod SPAN)."""
    assert list(a) == list(b)
    for k in a:
        if k == "blocks":
            _same(a[k], b[k], moved, ("owner",))
            continue
        y = (b[k] + moved) % SPAN if (k in keys_moved and moved) else b[k]
        assert a[k].dtype == y.dtype and np.array_equal(a[k], y), k


def _cases():
    for case in UNEVEN:
        yield case, lambda c, vt, rank=None: _uneven(c, vt, rank)
        layouts: dict = {}  # one per split, as an op context keeps them: the order by position kept and reused
        yield case, lambda c, vt, rank=None, layouts=layouts: _uneven(c, vt, rank, layouts)
    for case in EVEN:
        yield case, _even


def test_rank_order_on_unrotated_tiles_is_the_order_by_tile():
    for case, fn in _cases():
        G, pk, _, _, pm, pn = case
        T = G * pk * pm * pn
        # the IPU's tiles from the first (repeating past the last, as the op takes them when it needs more), few tiles
        for vt in (np.arange(T) % SPAN, np.arange(T) % 7):
            _same(fn(case, vt, (0, SPAN)), fn(case, vt))


def test_rank_order_on_rotated_tiles_is_the_unrotated_order_moved():
    """The rotations include ones whose tiles wrap past the last tile (there the order by tile differs)."""
    wrapped = 0
    for case, fn in _cases():
        G, pk, _, _, pm, pn = case
        T = G * pk * pm * pn
        if T >= SPAN:
            continue  # (an op on every tile does not rotate)
        base = fn(case, np.arange(T), (0, SPAN))
        for off in (2, 40, SPAN - T + 4, SPAN - 6):
            vt = (np.arange(T) + off) % SPAN
            wrapped += bool(vt[-1] < vt[0])
            got = fn(case, vt, (off, SPAN))
            _same(got, base, off)
            # each tile's vertices in the order by tile's (only the order between tiles differs)
            plain = fn(case, vt)
            for t in np.unique(vt):
                assert np.array_equal(got["out_start"][got["tile"] == t], plain["out_start"][plain["tile"] == t])
    assert wrapped > 0


def test_order_by_position_kept_once_and_shared():
    """With ``layouts`` and tiles whose ranks are their positions (an op from its rotating offset), the ordered
    vertices are kept once per split: later calls share every array but the tiles, and equal the plain call."""
    case = UNEVEN[1]
    G, pk, _, _, pm, pn = case
    T = G * pk * pm * pn
    layouts: dict = {}
    outs = []
    for off in (0, 30, SPAN - 10):
        vt = (np.arange(T) + off) % SPAN
        outs.append(_uneven(case, vt, (off, SPAN), layouts))
        _same(outs[-1], _uneven(case, vt, (off, SPAN)))
    assert sum(1 for k in layouts if k[-1] == "by_position") == 1
    assert outs[1]["out_start"] is outs[0]["out_start"] and outs[2]["by_start"] is outs[0]["by_start"]
    assert not outs[0]["len"].flags.writeable
    # tiles whose ranks are not their positions (permuted) take the sort, and still equal the plain call
    vt = np.random.default_rng(1).permutation(SPAN)[:T]
    _same(_uneven(case, vt, (int(vt[0]), SPAN), layouts), _uneven(case, vt, (int(vt[0]), SPAN)))


def _rotated_matmuls(n: int):
    target = Target.from_device(SMALL, num_ipus=1)
    be = EmulatorBackend(target, "fp16", needs_values=False)
    a = be.input("a", np.zeros((24, 2048), np.float16))
    for i in range(n):
        be.matmul(a, be.weight(f"w{i}", np.zeros((2048, 20), np.float16)), f"mm{i}")
    return be


def test_rotated_matmuls_replay_their_partials_gather_as_compiled_fresh(monkeypatch):
    """Four matmuls of one split at rotating start tiles, two of them wrapping past the last tile: every gather of
    partials after the first is replayed from the copy memo, and the compile equals the one that compiles every copy
    afresh."""
    import popvision_lite.emulator.compile.copies as CO

    be = _rotated_matmuls(4)
    gathers = [p for p in be.ctx.programs if p.name.endswith("/gather_partials")]
    assert len(gathers) == 4
    assert any(int(p.dst.tensor.mapping.tile[-1]) < int(p.dst.tensor.mapping.tile[0]) for p in gathers)  # wraps
    fresh = []
    orig = CO._compile_copy_fresh
    monkeypatch.setattr(CO, "_compile_copy_fresh", lambda c, info: (fresh.append(info.prog.name), orig(c, info))[1])
    memo, plain, n_memo, n_plain = _compile_both(monkeypatch, be.graph, be.program())
    assert [n for n in fresh[:n_memo] if n.endswith("/gather_partials")] == ["mm0/gather_partials"]
    assert n_memo < n_plain
    _assert_same(memo, plain)


def _graph_arrays(be):
    """Every tensor's mapping, every copy's endpoints' runs and every vertex field's runs of a graph."""
    out = [(t.name, m.tile.tolist(), m.start.tolist(), m.stop.tolist())
           for t in be.graph.tensors if (m := t.mapping) is not None]
    for p in be.ctx.programs:
        if isinstance(p, P.Copy):
            out.append((p.name, *(np.asarray(a).tolist() for ep in (p.src, p.dst) for a in ep.runs())))
    for g in be.graph.groups:
        out.append((g.cs.name, g.tiles.tolist(),
                    *(np.asarray(a).tolist() for _, f in sorted(g.fields.items()) for a in f.runs())))
    return out


def test_gather_arrays_kept_per_split_are_the_fresh_ones():
    """Three rotated matmuls of one uneven split with a one-stage K reduction (15 partials), two wrapping: the
    gather's arrays (reduce_k_partials) kept beside the split's ordered vertices and shared by the later ops give the
    graph that building each op with nothing kept gives."""
    target = Target.from_device(SMALL, num_ipus=1)

    def build(keep: bool):
        be = EmulatorBackend(target, "fp16", needs_values=False)
        a = be.input("a", np.zeros((37, 600), np.float16))
        for i in range(3):
            if not keep:
                be.ctx.window_layouts.clear()
            be.matmul(a, be.weight(f"w{i}", np.zeros((600, 53), np.float16)), f"mm{i}")
        return be

    kept, fresh = build(True), build(False)
    assert sum(1 for k in kept.ctx.window_layouts if k[0] == "reduce") == 1
    gathers = [p for p in kept.ctx.programs if p.name.endswith("/gather_partials")]
    assert len(gathers) == 3 and any(int(p.dst.tensor.mapping.tile[-1]) < int(p.dst.tensor.mapping.tile[0])
                                     for p in gathers)
    assert _graph_arrays(kept) == _graph_arrays(fresh)
