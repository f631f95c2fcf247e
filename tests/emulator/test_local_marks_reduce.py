"""The weight-update path's fields marked local by construction (ops.common.mark_split): the K reduction's
ReduceAdd fields (ops/matmul.py _reduce_vertices, ops/conv_wu.py _reduce_partials) and SgdUpdate's fields
(ops/basic.py sgd).  Every such field is marked, and each marked one passes the full check (_check_local) with
its runs on its vertex's tile; a field of that kind built unmarked and off its tile, or marked but on a tensor
mapped again, is still refused by the graph check."""

import numpy as np
import pytest

from popvision_lite.emulator import Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.codelets.poplin_conv import ConvShape
from popvision_lite.emulator.compile import compile_graph
from popvision_lite.emulator.compile.check import _check_local, split_local
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.errors import EmulatorError

MARKED = ("ReduceAdd", "SgdUpdate")


def _build():
    em = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16", needs_values=False)
    x = em.input("x", np.zeros((16, 8192), np.float16))
    w = em.input("w", np.zeros((8192, 16), np.float16))
    y = em.matmul(x, w, "mm")  # a K split: staged and last ReduceAdd vertices
    s = ConvShape(2, 8, 8, 16, 32, 3, 1, 1)
    dw = em.conv2d_weight_update(em.input("cx", np.zeros((2 * 8 * 8, 16), np.float16)),
                                 em.input("dy", np.zeros((2 * 8 * 8, 32), np.float16)), s, "c")
    em.sgd(em.input("v", np.zeros((16, 16), np.float16)), y, 0.1, "v_sgd")  # the gradient copied to v's mapping
    em.sgd(em.input("k", np.zeros(dw.shape, np.float16)), dw, 0.1, "k_sgd")
    return em


def _fields(em, codelets=MARKED):
    for cs in em.graph.compute_sets:
        for grp in cs.groups:
            # (ReduceAdd: the last stage's; _intermediate_stage's staged sums are checked in full)
            if grp.codelet.name in codelets and "_stage" not in cs.name:
                for fname, f in grp.fields.items():
                    yield cs, grp, fname, f


def test_the_fields_are_marked_and_pass_the_full_check():
    em = _build()
    seen = {(grp.codelet.name, cs.name.split("/")[0].split("#")[0]) for cs, grp, _n, _f in _fields(em)}
    assert {("ReduceAdd", "mm"), ("ReduceAdd", "c"), ("SgdUpdate", "v_sgd"), ("SgdUpdate", "k_sgd")} <= seen
    n = 0
    for _cs, grp, fname, f in _fields(em):
        assert split_local(grp, f), (grp.codelet.name, fname, f.tensor.name)
        s, e, ks = _check_local(grp, fname, f)  # the definition: every run inside its interval, on its tile
        nonempty = e > s
        assert np.array_equal(np.take(f.tensor.mapping.tile, ks)[nonempty],
                              np.broadcast_to(grp.tiles[:, None], ks.shape)[nonempty])
        n += 1
    assert n == 8  # (in, out) of the two ReduceAdd groups and the two SgdUpdate groups
    compile_graph(em.graph, em.program())


def test_an_unmarked_misplaced_reduce_field_is_refused():
    em = _build()
    _cs, grp, fname, f = next((c, g, n, f) for c, g, n, f in _fields(em, ("ReduceAdd",)) if n == "in")
    # the same kind of field (the gathered partials' regions), each vertex reading its neighbour's slice
    moved = f.tensor.regions(np.roll(np.asarray(f.starts), 1), np.roll(np.asarray(f.sizes), 1))
    assert not split_local(grp, moved)
    grp.fields[fname] = moved
    with pytest.raises(EmulatorError, match="which lives on tile"):
        compile_graph(em.graph, em.program())


def test_a_marked_field_on_a_tensor_mapped_again_is_checked_in_full():
    em = _build()
    _cs, grp, _fname, f = next((c, g, n, f) for c, g, n, f in _fields(em, ("SgdUpdate",)) if n == "out")
    m = f.tensor.mapping
    em.graph.set_mapping(f.tensor, M.intervals((m.tile + 1) % em.graph.target.num_tiles, m.start, m.stop))
    assert not split_local(grp, f)
    with pytest.raises(EmulatorError, match="which lives on tile"):
        compile_graph(em.graph, em.program())
