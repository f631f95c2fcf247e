"""The op memo is kept with the stage graphs from one run to the next (models/pipeline.py ``_OP_MEMO``): a later
run's stage graphs replay the ops an earlier run's built with the same reads (on a target equal in every value,
not the same object), and the run is the one it is alone."""

from __future__ import annotations

from bench.same_profiles import differences
from popvision_lite.emulator.backends.op_memo import OpMemo
from popvision_lite.emulator.models import emulated
from popvision_lite.emulator.models import pipeline as PL
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.target import Target
from tests.conftest import SMALL_DEVICE

# two distinct stage graphs over two IPUs (the memo is used where a run builds more than one)
KW = dict(layers=2, hidden=64, heads=4, seq=32, vocab=512, batch=2, ipus=2)


def test_a_later_run_replays_an_earlier_runs_ops_and_is_the_run_alone(tmp_path):
    emulated.release_graphs()
    try:
        emulated.run_model(make_config("bert", **KW, available_memory_proportion=0.6), SMALL_DEVICE,
                           timing_only=True)
        memo = PL._OP_MEMO
        hits, misses = memo.hits, memo.misses
        later = emulated.run_model(make_config("bert", **KW, available_memory_proportion=0.55), SMALL_DEVICE,
                                   timing_only=True)
        assert PL._OP_MEMO is memo and memo.misses > misses
        # the ops that read no proportion replayed from the first run's stage graphs, beyond the run's own replays
        replayed = memo.hits - hits
        emulated.write_run(later, tmp_path / "later.pvl")
        emulated.release_graphs()
        assert PL._OP_MEMO is None                                   # dropped with the stage graphs
        alone = emulated.run_model(make_config("bert", **KW, available_memory_proportion=0.55), SMALL_DEVICE,
                                   timing_only=True)
        assert replayed > PL._OP_MEMO.hits > 0
        emulated.write_run(alone, tmp_path / "alone.pvl")
    finally:
        emulated.release_graphs()
    assert differences(tmp_path / "later.pvl", tmp_path / "alone.pvl") == []


def test_targets_equal_in_every_value_share_entries_and_only_those():
    memo = OpMemo()
    a, b = Target.from_device(SMALL_DEVICE, num_ipus=1), Target.from_device(SMALL_DEVICE, num_ipus=1)
    assert a is not b and memo._target_key(a) == memo._target_key(b) == memo._target_key(a)
    c = Target.from_device(SMALL_DEVICE, num_ipus=1)
    c.em["exchange_bytes_per_cycle"] = 2 * c.em["exchange_bytes_per_cycle"]
    d = Target.from_device(SMALL_DEVICE, num_ipus=2)
    assert len({memo._target_key(t) for t in (a, c, d)}) == 3
