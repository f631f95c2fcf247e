"""The pipelined profile's liveness array (models/pipeline_profile._liveness): built as stored, one IPU's block at a
time, with each row's total, fullest tile and its bytes as the whole dense row gives them."""

from types import SimpleNamespace

import numpy as np
import pandas as pd

from popvision_lite.emulator.models.pipeline_profile import _liveness


def _dense(base, kinds, stages, n_rows, T):
    """The reference: the dense int64 rows, then their figures."""
    S = len(stages)
    ltb = np.zeros((n_rows, S * T), np.int64)
    r = 0
    for s, a in enumerate(stages):
        cur = np.asarray(base[kinds[s]].liveness_tile_bytes, np.int64)
        stash = a.get("stash_variable", ("", "", None))[2]
        ltb[r:r + len(cur), s * T:(s + 1) * T] = cur + (0 if stash is None else np.asarray(stash, np.int64))
        r += len(cur)
        buf = a.get("stream_variable", ("", "", None))[2]
        if buf is not None and np.any(buf):
            ltb[r, s * T:(s + 1) * T] = buf
            r += 1
    return ltb, ltb.sum(axis=1), ltb.argmax(axis=1), ltb.max(axis=1, initial=0)


def test_liveness_blocks_and_row_figures_match_the_dense_rows():
    T = 4
    rng = np.random.default_rng(3)
    a = SimpleNamespace(liveness_tile_bytes=rng.integers(0, 50, (3, T)).astype(np.uint32))
    b = SimpleNamespace(liveness_tile_bytes=np.vstack([np.zeros((1, T)), rng.integers(0, 2**31, (2, T))]))
    base = {"a": a, "b": b}
    stages = [{"stash_variable": ("stash", "float16", np.array([1, 0, 2, 0]))},
              {"stream_variable": ("state", "float32", np.array([0, 9, 9, 1]))},
              {}]
    kinds = ["a", "b", "b"]
    n = 3 + 3 + 1 + 3
    for S in (1, 3):
        ls = pd.DataFrame({"lstep": np.arange(n if S == 3 else 3)})
        got, rows = _liveness(base, kinds[:S], stages[:S], ls, T)
        ltb, total, arg, mx = _dense(base, kinds[:S], stages[:S], len(ls), T)
        np.testing.assert_array_equal(got, ltb.astype(np.uint32))
        assert got.dtype == np.uint32
        np.testing.assert_array_equal(ls["total_bytes"], total)
        np.testing.assert_array_equal(ls["max_tile"], arg)
        np.testing.assert_array_equal(ls["max_tile_bytes"], mx)
        assert [r.name for r in rows] == ["ipu0/stash", "ipu1/state"][:S if S == 1 else 2]
