"""What a matmul split builds on tile positions, kept for the process (issue 49, decision 0501).

A K-split matmul's partials mapping (one window per tile in every plane) and its K reduction's vertices and gather
depend on the split (M, N, K, the block sizes, the tile count) and not on the tiles the op starts at: two ops of one
split differ only in the tiles the positions 0..T-1 stand for.  ``validate`` builds the BERT / GPT stage graphs'
layers again and again (the same split in every graph, on rotated tiles: the op memo replays an op only where its
start tile is the same), and the op context's own layouts (``OpContext.window_layouts``) go with each graph.  The
arrays kept here go with the process: the positions' arrays are the ones the first op's mapping and fields hold (the
mappings and fields of a kept graph share them: :mod:`popvision_lite.emulator.shared_arrays`), so what they add is
bounded by ``SPLIT_LAYOUTS_BYTES``, the oldest unused going first."""

from __future__ import annotations

import threading

import numpy as np

from popvision_lite.emulator import mapping as M

# the bytes of arrays kept (the least recently used go first past it); a 1024 x 1024 x 1024 matmul split 5 x 32 x 8
# keeps ~6 MB for its partials mapping
SPLIT_LAYOUTS_BYTES = 64 << 20

_lock = threading.Lock()  # graphs may be built on several threads (a GUI worker)
_kept: dict = {}
_asked: dict = {}  # hash(key) -> how many times kept() found nothing under it


def kept(key):
    """The value kept under ``key`` (:func:`keep`), or None; a hit becomes the newest."""
    with _lock:
        hit = _kept.pop(key, None)
        if hit is None:
            if len(_asked) >= 1 << 16:
                _asked.clear()
            h = hash(key)
            _asked[h] = _asked.get(h, 0) + 1
            return None
        _kept[key] = hit
        return hit[0]


def keep(key, value, nbytes: int) -> None:
    """Keep ``value`` (of ``nbytes``) under ``key``, dropping the least recently used past ``SPLIT_LAYOUTS_BYTES``;
    only from the second time :func:`kept` found nothing under ``key``: a split built once (every matmul of a
    ResNet graph) is not kept, so that it neither holds memory nor drops the splits that repeat."""
    with _lock:
        if _asked.get(hash(key), 0) < 2:
            return
        _kept[key] = (value, int(nbytes))
        total = sum(v[1] for v in _kept.values())
        while total > SPLIT_LAYOUTS_BYTES and len(_kept) > 1:
            total -= _kept.pop(next(iter(_kept)))[1]


def clear() -> None:
    """Drop everything kept (tests)."""
    with _lock:
        _kept.clear()
        _asked.clear()


def planes_by_windows(shape, c_shape, c_org, vt, layouts: dict) -> M.Mapping:
    """``M.by_windows(shape, c_shape, c_org, vt, layouts)`` for the partials (G * pk, Mm, N): window i in plane
    i // (pm * pn), every plane cut alike, each window on a tile of its own.  One plane's layout (on tile positions)
    placed at every plane: the mapping's intervals are the planes' in plane order, none merged across planes (their
    tiles differ), so it is by_windows' mapping without cutting and ordering every plane's row runs again
    (tests/emulator/ops/test_matmul_planes.py compares them).  The placed starts and stops, the plane's tile
    positions and the windows' frozen record depend on the windows alone: kept for the process (:func:`keep`), an
    op of the same split takes its tiles at the positions and nothing else."""
    T, planes = len(vt), int(shape[0])
    per = T // planes if planes else 0
    vt = np.asarray(vt, np.int64)
    if planes < 2 or per * planes != T or int(vt.min()) < 0 or int(np.bincount(vt).max()) != 1 or \
            not (np.array_equal(c_org[:, 0], np.arange(T) // per) and np.all(c_shape[:, 0] == 1)
                 and np.array_equal(c_shape[per:, 1:], np.tile(c_shape[:per, 1:], (planes - 1, 1)))
                 and np.array_equal(c_org[per:, 1:], np.tile(c_org[:per, 1:], (planes - 1, 1)))):
        return M.by_windows(shape, c_shape, c_org, vt, layouts)
    shape = tuple(int(d) for d in shape)
    ps, po = np.asarray(c_shape[:per, 1:], np.int64), np.asarray(c_org[:per, 1:], np.int64)
    key = ("planes", shape, ps.shape, ps.tobytes(), po.tobytes())
    hit = kept(key)
    if hit is None:
        lay = M.by_windows(shape[1:], ps, po, np.arange(per, dtype=np.int64), layouts)
        off = (np.arange(planes, dtype=np.int64) * (shape[1] * shape[2]))[:, None]
        m = M.Mapping(_plane_tiles(vt, planes, per, lay.tile), (lay.start[None, :] + off).ravel(),
                      (lay.stop[None, :] + off).ravel(), _fresh=True)
        hit = (lay.tile, m.start, m.stop, M._frozen(c_shape), M._frozen(c_org))
        keep(key, hit, sum(a.nbytes for a in hit))
    else:
        lay_tile, start, stop = hit[:3]
        m = M.Mapping(_plane_tiles(vt, planes, per, lay_tile), start, stop, _fresh=True)
    m._derived["merged"] = "itself"
    m._derived["own_windows"] = (shape, hit[3], hit[4], M._frozen(vt))
    return m


def _plane_tiles(vt: np.ndarray, planes: int, per: int, lay_tile: np.ndarray) -> np.ndarray:
    """Plane p's interval k on ``vt[p * per + lay_tile[k]]``, planes one after another (int64, fresh).  ``np.take``
    along the positions' axis, not ``vt.reshape(planes, per)[:, lay_tile]``: numpy's mixed slice / index path
    (a subspace iterator per plane row) took ~15x as long on a 0.1-0.6 M-interval partials mapping (the hot part
    of the function in ``validate``)."""
    return np.take(vt.reshape(planes, per), lay_tile, axis=1).ravel()


def shape_groups(shapes: np.ndarray):
    """The rows of ``shapes`` (tiles' block shapes, (n, d) ints) grouped: (the distinct rows in lexicographic order,
    per distinct row the indices of its rows ascending, those indices one group after another), read-only.  They
    depend on the split alone (the tiles' blocks, not the tiles): kept."""
    shapes = np.asarray(shapes, np.int64)
    key = ("groups", shapes.shape, shapes.tobytes())
    hit = kept(key)
    if hit is None:
        keys, inv = M.unique_rows(shapes)
        sels = [np.nonzero(inv == c)[0] for c in range(len(keys))]
        hit = (keys, sels, np.concatenate(sels) if sels else np.zeros(0, np.int64))
        for a in (keys, hit[2], *sels):
            a.setflags(write=False)
        keep(key, hit, 2 * shapes.nbytes + keys.nbytes)
    return hit
