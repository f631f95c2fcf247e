"""ops.common.unit_steps counts a read-only index's runs once while the memory it reads lives (a model's head
layouts, read by several attention matmuls as views), and an index whose memory may change every time."""

import gc

import numpy as np

from popvision_lite.emulator.models.transformer import _Heads
from popvision_lite.emulator.ops import common as C


def _counting(monkeypatch):
    calls = []
    real = C._unit_steps

    def counted(index, axis):
        calls.append(axis)
        return real(index, axis)

    monkeypatch.setattr(C, "_unit_steps", counted)
    return calls


def _want(index, axis):
    return int(np.count_nonzero(np.diff(index, axis=axis) == 1))


def test_read_only_index_counted_once_while_it_lives(monkeypatch):
    calls = _counting(monkeypatch)
    hd = _Heads(2, 24, 3, 8)
    for view in (hd.split_t, hd.split_t.transpose(0, 2, 1), hd.split):
        for axis in (-1, -2):
            assert C.unit_steps(view, axis) == _want(view, axis)
            n = len(calls)
            again = view.transpose(0, 1, 2)  # another view object of the same memory, shape and strides
            assert C.unit_steps(again, axis) == _want(view, axis) and len(calls) == n
    keys = len(C._STEPS)
    del hd, view, again
    gc.collect()
    assert len(C._STEPS) <= keys - 6  # the entries go with the layouts' memory


def test_memory_that_may_change_is_counted_every_time(monkeypatch):
    calls = _counting(monkeypatch)
    owner = np.arange(6 * 40, dtype=np.int64).reshape(6, 40)
    ro = owner[:, ::2]
    ro.flags.writeable = False  # a read-only view of a writeable array: its values may still change
    for index in (owner, ro):
        before = len(calls)
        assert C.unit_steps(index, -1) == _want(index, -1)
        owner[0, :4] = [9, 3, 7, 1]
        assert C.unit_steps(index, -1) == _want(index, -1) and len(calls) == before + 2
