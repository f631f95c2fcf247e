"""The op memo compares the available memory proportion only for an op that read it (``OpContext`` notes the read,
backends/op_memo.py): a stage graph built at another proportion replays the ops whose plan does not depend on it
and builds those whose plan does, and is the graph building it alone gives."""

from popvision_lite.emulator import Target
from popvision_lite.emulator.backends.op_memo import OpMemo
from popvision_lite.emulator.models.config import make_config
from tests.emulator.test_op_memo import CFG, _graph, _stage
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)


def _at(target, cfg, stage, amp, memo=None):
    import popvision_lite.emulator.backends.emulator_backend as eb

    real = eb.EmulatorBackend.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        self.ctx.available_memory_proportion = amp

    eb.EmulatorBackend.__init__ = init
    try:
        return _stage(target, cfg, stage, memo)
    finally:
        eb.EmulatorBackend.__init__ = real


def _plans(be) -> list:
    return [(r["name"], r["plan"]) for r in be.ctx.records if r["type"] == "matmul"]


def test_a_stage_at_another_proportion_replays_only_what_did_not_read_it():
    target = Target.from_device(SMALL, num_ipus=1)
    cfg = make_config("gpt2-small", **CFG)
    memo = OpMemo()
    first = _at(target, cfg, 1, 0.6, memo)
    calls = memo.misses
    other = _at(target, cfg, 1, 0.55, memo)
    alone = _at(target, cfg, 1, 0.55)
    # the matmuls read the proportion (their plans name the budget they fitted): each built again; every other op
    # (scale, softmax, add, layer norms, gelu and their gradients) replayed from the stage at 0.6
    matmuls = len(_plans(other))
    assert _plans(other) != _plans(first) and 0 < matmuls < calls
    assert (memo.hits, memo.misses - calls) == (calls - matmuls, matmuls)
    assert _graph(other) == _graph(alone)
    # at a proportion met before every op replays, the matmuls included
    again = _at(target, cfg, 1, 0.55, memo)
    assert (memo.hits, memo.misses) == (2 * calls - matmuls, calls + matmuls)
    assert _graph(again) == _graph(alone)
