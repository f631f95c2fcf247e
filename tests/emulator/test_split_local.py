"""compile.check.split_local: an elementwise op's fields (its output's own worker pieces, marked by
ops.common.mark_split) skip the graph check's interval search only while that search would pass: the fields it
skips pass the full check (_check_local), and a tensor mapped again afterwards, or a group with other tiles, is
checked in full and refused when a vertex's region is off its tile."""

import numpy as np
import pytest

from popvision_lite.emulator import Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.compile import compile_graph
from popvision_lite.emulator.compile.check import _check_local, split_local
from popvision_lite.emulator.graph import Regions
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.errors import EmulatorError


def _build():
    em = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16", needs_values=False)
    x = em.input("x", np.zeros((96, 120), np.float16))
    w = em.input("w", np.zeros((120, 200), np.float16))
    # a matmul's output: rows of blocks, several pieces per tile
    y = em.matmul(x, w, "mm")
    h = em.add(em.relu(y, "act"), y, "res")
    em.mul(h, h, "sq")
    return em


def _fields(em):
    for cs in em.graph.compute_sets:
        for grp in cs.groups:
            for fname, f in grp.fields.items():
                yield grp, fname, f


def test_skipped_fields_pass_the_full_check():
    em = _build()
    skipped = [(grp, fname, f) for grp, fname, f in _fields(em) if split_local(grp, f)]
    assert len(skipped) >= 5  # relu's in / out, add's a / b / out, mul's ... (elementwise ops' fields)
    for grp, fname, f in skipped:
        assert isinstance(f, Regions)
        s, e, ks = _check_local(grp, fname, f)  # the definition: every run inside its interval, on its tile
        assert np.array_equal(np.take(f.tensor.mapping.tile, ks), grp.tiles[:, None])
    compile_graph(em.graph, em.program())  # and the whole check passes


def test_a_tensor_mapped_again_is_checked_in_full():
    em = _build()
    grp, _fname, f = next((g, n, f) for g, n, f in _fields(em) if split_local(g, f) and n == "out")
    t = f.tensor
    # the same elements moved one tile on: the fields' vertices now touch another tile's memory
    m = t.mapping
    em.graph.set_mapping(t, M.intervals((m.tile + 1) % em.graph.target.num_tiles, m.start, m.stop))
    assert not split_local(grp, f)
    with pytest.raises(EmulatorError, match="which lives on tile"):
        compile_graph(em.graph, em.program())


def test_a_mark_holds_for_its_mapping_and_tiles_only():
    em = _build()
    grp, _fname, f = next((g, n, f) for g, n, f in _fields(em) if split_local(g, f))
    other = type(grp).__new__(type(grp))
    other.__dict__.update(grp.__dict__)
    other.tiles = grp.tiles.copy()  # equal values, another array: not the one the mark names
    assert not split_local(other, f)
    unmarked = f.tensor.regions(f.starts, f.sizes)
    assert not split_local(grp, unmarked)

