"""A View of a tensor repeated along its first axis (``Backend.repeat``, GPT's positions for every sequence of a
batch) is the ``take`` of ``np.tile`` of its positions, without that index: the same graph and values."""

import numpy as np

from popvision_lite.emulator import Target
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
from tests.emulator.test_op_memo import _graph
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)


def _add_positions(be, lazy: bool, B=3, S=8, H=16):
    rng = np.random.default_rng(1)
    e = be.input("e", rng.normal(size=(B * S, H)))
    pos = be.weight("pos", rng.normal(size=(S, H)))
    p = be.repeat(pos, B) if lazy else be.take(pos, np.tile(np.arange(S * H, dtype=np.int64), B).reshape(B * S, H))
    assert p.shape == (B * S, H)
    return be.add(e, p, "position_add"), p


def test_repeat_builds_the_graph_of_the_tiled_take():
    target = Target.from_device(SMALL, num_ipus=1)
    graphs = []
    for lazy in (True, False):
        be = EmulatorBackend(target, "fp16", needs_values=False)
        _, p = _add_positions(be, lazy)
        graphs.append(_graph(be))
        assert lazy == (p._index is None)  # the add read no index of the repeated view
    assert graphs[0] == graphs[1]


def test_repeat_gives_the_tiled_values():
    outs = [np.asarray(_add_positions(NumpyBackend("fp32"), lazy)[0]) for lazy in (True, False)]
    np.testing.assert_array_equal(outs[0], outs[1])
