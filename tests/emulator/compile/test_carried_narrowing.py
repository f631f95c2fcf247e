"""compile.CarriedCopies narrows the kept copies' effect arrays when the next compile for the same copy cost key
attaches (decision 0503), not right after the compile that made them: kept wide until then, int32 where the
values fit from then on, and a graph replaying them gets what compiling it alone gives."""

import numpy as np

import popvision_lite.emulator.compile as C
from popvision_lite.emulator import Target
from tests.emulator.compile.test_copy_memo import _assert_same, _broadcast_graph


def _dtypes(carry) -> set:
    return {a.dtype.str for _plan, effects, _code, _shift in carry.copies.values() for _fn, args, _kw in effects
            for a in args if isinstance(a, np.ndarray)}


def test_carried_copies_are_narrowed_when_the_next_compile_attaches():
    mk2 = Target.from_device("ipu-mk2", num_ipus=1)
    carry = C.CarriedCopies()
    C.compile_graph(*_broadcast_graph(mk2, ((40, 0), (48, 0))), copy_memo=carry)
    assert len(carry.copies) == 4 and carry.wide
    assert "<i8" in _dtypes(carry)  # kept as recorded: nothing narrowed yet
    g2, p2 = _broadcast_graph(mk2, ((40, 0), (48, 0), (56, 0), (40, 100)))
    c2 = C.Compiled(g2, p2)
    carry.attach(c2)
    assert not carry.wide and "<i8" not in _dtypes(carry) and "<i4" in _dtypes(carry)  # narrowed on attach
    carried = C.compile_graph(g2, p2, copy_memo=carry)
    _assert_same(carried, C.compile_graph(*_broadcast_graph(mk2, ((40, 0), (48, 0), (56, 0), (40, 100)))))
    assert len(carry.copies) == 6 and carry.wide
    two = Target.from_device("ipu-mk2", num_ipus=2)  # another cost key: the wide entries are dropped, not narrowed
    C.compile_graph(*_broadcast_graph(two, ((24, 0),)), copy_memo=carry)
    assert len(carry.copies) == 2 and carry.wide
    carry.clear()
    assert carry.copies == {} and not carry.wide
