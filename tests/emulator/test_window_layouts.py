"""mapping.by_windows with ``layouts`` (an op context's dict of window layouts on tile positions): the mapping of
windows on distinct tiles is the layout with each position's tile put in, the same arrays and merge as by_windows
builds them afresh; a layout is made once per distinct set of windows and reused for other tiles; tiles that repeat
take the plain path (there the merge of adjacent windows depends on the tiles)."""

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.ops import matmul as MM
from popvision_lite.emulator.ops.matmul import _parts


def _split(shape, pm, pn, lead=None):
    """The windows of an uneven pm x pn block split of the last two dims (a matmul's output or partials)."""
    msz, moff = _parts(shape[-2], pm)
    nsz, noff = _parts(shape[-1], pn)
    ii, jj = (x.ravel() for x in np.meshgrid(np.arange(pm), np.arange(pn), indexing="ij"))
    bs, org = np.stack([msz[ii], nsz[jj]], 1), np.stack([moff[ii], noff[jj]], 1)
    if lead is not None:  # a 3-D tensor: one plane per window group
        g = np.repeat(np.arange(lead), len(ii))
        bs = np.concatenate([np.ones((len(g), 1), np.int64), np.tile(bs, (lead, 1))], 1)
        org = np.concatenate([g[:, None], np.tile(org, (lead, 1))], 1)
    return bs, org


def _same(a: M.Mapping, b: M.Mapping):
    for x, y in ((a.tile, b.tile), (a.start, b.start), (a.stop, b.stop)):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert M._merge(a) is a and M._merge(b) is b  # both merged: no adjacent intervals on one tile left


CASES = [  # (shape, pm, pn, lead): uneven splits; full-width windows (pn = 1) whose rows merge on a tile
    ((37, 53), 5, 7, None),
    ((64, 48), 6, 1, None),
    ((3, 29, 31), 4, 3, 3),
    ((2, 40, 16), 3, 1, 2),
]


def test_layout_on_distinct_tiles_is_the_plain_mapping():
    rng = np.random.default_rng(5)
    for shape, pm, pn, lead in CASES:
        bs, org = _split(shape, pm, pn, lead)
        layouts: dict = {}
        n = len(bs)
        for rot in range(3):
            tiles = (np.arange(n) + 7 * rot) % 1472 if rot < 2 else rng.permutation(1472)[:n]
            _same(M.by_windows(shape, bs, org, tiles, layouts), M.by_windows(shape, bs, org, tiles))
        assert len(layouts) == 1  # made once, reused for the rotated and the permuted tiles


def test_repeated_tiles_take_the_plain_path():
    for shape, pm, pn, lead in CASES:
        bs, org = _split(shape, pm, pn, lead)
        # vertically adjacent windows on one tile: their runs join where the windows are full width
        tiles = np.arange(len(bs)) // 2
        layouts: dict = {}
        _same(M.by_windows(shape, bs, org, tiles, layouts), M.by_windows(shape, bs, org, tiles))
        assert layouts == {}


def _same_red(a: dict, b: dict):
    assert list(a) == list(b)
    for k in a:
        if k == "blocks":
            _same_red(a[k], b[k])
        else:
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k


def test_k_partials_on_positions_put_on_tiles_are_the_plain_vertices():
    """matmul.k_partial_vertices_uneven with ``layouts``: the vertices laid out once on tile positions and put on
    each call's tiles (rotated, permuted, or repeating: the order by tile is found again) equal those built on the
    tiles themselves (the function without ``layouts``)."""
    rng = np.random.default_rng(3)
    for G, pk, Mm, N, pm, pn in ((1, 4, 37, 53, 5, 7), (2, 3, 29, 31, 4, 3), (1, 8, 64, 48, 6, 1)):
        msz, moff = MM._parts(Mm, pm)
        nsz, noff = MM._parts(N, pn)
        T = G * pk * pm * pn
        layouts: dict = {}
        for vt in (np.arange(T) + 5, (np.arange(T) + 900) % 1472, rng.permutation(1472)[:T],
                   rng.integers(0, 40, T)):
            plain = MM.k_partial_vertices_uneven(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, vt)
            _same_red(MM.k_partial_vertices_uneven(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, vt, layouts), plain)
        assert len(layouts) == 1


def test_layouts_past_their_budget_drop_the_oldest(monkeypatch):
    monkeypatch.setattr(M, "LAYOUTS_BYTES", 3000)
    layouts: dict = {}
    maps = []
    for shape, pm, pn, lead in CASES:  # each layout a few hundred to a few thousand bytes
        bs, org = _split(shape, pm, pn, lead)
        tiles = np.arange(len(bs)) + 3
        _same(M.by_windows(shape, bs, org, tiles, layouts), M.by_windows(shape, bs, org, tiles))
        maps.append((shape, bs, org, tiles))
        assert sum(v[1] for v in layouts.values()) <= 3000 or len(layouts) == 1
    assert 1 <= len(layouts) < len(CASES)
    shape, bs, org, tiles = maps[-1]  # the newest is kept, and reused
    kept = dict(layouts)
    _same(M.by_windows(shape, bs, org, tiles + 1, layouts), M.by_windows(shape, bs, org, tiles + 1))
    assert layouts.keys() == kept.keys()


def test_a_built_graph_holds_no_layouts(monkeypatch):
    """The layouts serve the build only: a whole graph (emulated.build_model) keeps none through its compile and
    run, though its build made some."""
    from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import build_model

    made = []
    built = EmulatorBackend.built
    monkeypatch.setattr(EmulatorBackend, "built", lambda be: (made.append(len(be.ctx.window_layouts)), built(be)))
    be, _ = build_model(make_config("bert-tiny"), needs_values=False)
    assert made and made[0] > 0
    assert be.ctx.window_layouts == {}
