"""Malformed graphs and programs raise EmulatorError naming the object and the fix."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import poplin as CL
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.errors import EmulatorError


@pytest.fixture(scope="module")
def mk2():
    return Target.from_device("ipu-mk2", num_ipus=1)


def _copy_prog(g):
    a = g.tensors[0]
    b = g.add_variable("dst", a.shape, a.dtype, mapping=M.single_tile(a.size, 3))
    return P.Copy(a, b)


def test_unmapped_tensor(mk2):
    g = Graph(mk2)
    g.add_variable("weights", (10, 10), "float32")
    with pytest.raises(EmulatorError, match=r"tensor 'weights'.*not mapped.*fix: g.set_mapping"):
        Engine(g, _copy_prog(g)).compile()


def test_partially_mapped_tensor(mk2):
    g = Graph(mk2)
    x = g.add_variable("act", (100,), "float32")
    with pytest.raises(EmulatorError, match=r"tensor 'act': 40 of 100 elements are not mapped"):
        g.set_mapping(x, M.intervals([0], [0], [60]))


def test_overlapping_mapping(mk2):
    g = Graph(mk2)
    x = g.add_variable("act", (100,), "float32")
    with pytest.raises(EmulatorError, match=r"tensor 'act'.*overlap"):
        g.set_mapping(x, M.intervals([0, 1], [0, 50], [60, 100]))


def test_unknown_dtype(mk2):
    g = Graph(mk2)
    with pytest.raises(EmulatorError, match=r"tensor 'x64': unknown dtype 'float64'.*float16, float32, int32"):
        g.add_variable("x64", (4,), "float64")
    with pytest.raises(EmulatorError, match=r"constant 'c'.*unknown dtype"):
        g.add_constant("c", np.ones(3, np.float64))


def test_tile_out_of_range(mk2):
    g = Graph(mk2)
    x = g.add_variable("x", (12,), "float32", mapping=M.single_tile(12, 0))
    cs = g.add_compute_set("cs")
    with pytest.raises(EmulatorError, match=rf"tile index {mk2.num_tiles} out of range 0..{mk2.num_tiles - 1}"):
        g.add_vertices(cs, CO.RELU, [mk2.num_tiles], fields={"in": x.regions([0], 12), "out": x.regions([0], 12)})
    y = g.add_variable("y", (12,), "float32")
    with pytest.raises(EmulatorError, match=r"tensor 'y': mapped to tile -1"):
        g.set_mapping(y, M.single_tile(12, -1))


def test_field_shape_mismatch(mk2):
    g = Graph(mk2)
    x = g.add_variable("x", (12,), "float32", mapping=M.single_tile(12, 0))
    y = g.add_variable("y", (12,), "float32", mapping=M.single_tile(12, 0))
    cs = g.add_compute_set("addcs")
    with pytest.raises(EmulatorError, match=r"'Add' in 'addcs': vertex 0: field '\w+' has \d+ elements"):
        g.add_vertices(cs, CO.ADD, [0], fields={"a": x.regions([0], 8), "b": x.regions([0], 8),
                                               "out": y.regions([0], 6)})
    with pytest.raises(EmulatorError, match=r"field 'out' has 2 connections for 1 vertices"):
        g.add_vertices(cs, CO.RELU, [0], fields={"in": x.regions([0], 6), "out": y.regions([0, 6], 6)})
    with pytest.raises(EmulatorError, match=r"missing \['b'\]"):
        g.add_vertices(cs, CO.ADD, [0], fields={"a": x.regions([0], 6), "out": y.regions([0], 6)})
    a = g.add_variable("A", (16, 16), "float32", mapping=M.single_tile(256, 0))
    with pytest.raises(EmulatorError, match=r"do not chain"):
        g.add_vertices(cs, CL.BLOCK_MATMUL, [0], fields={"a": a.blocks((8, 4), [[0, 0]]), "b": a.blocks((8, 8), [[0, 0]]),
                                                        "out": a.blocks((8, 8), [[1, 1]])})


def test_field_not_on_vertex_tile(mk2):
    g = Graph(mk2)
    x = g.add_variable("remote", (12,), "float32", mapping=M.single_tile(12, 5))
    y = g.add_variable("y", (12,), "float32", mapping=M.single_tile(12, 0))
    cs = g.add_compute_set("relu")
    g.add_vertices(cs, CO.RELU, [0], fields={"in": x.regions([0], 12), "out": y.regions([0], 12)})
    with pytest.raises(EmulatorError, match=r"vertex 0 of 'Relu' in compute set 'relu' \(tile 0\): field 'in'.*"
                                            r"'remote' which lives on tile 5.*Copy it there"):
        Engine(g, P.Execute(cs)).compile()


def test_program_cycle(mk2):
    g = Graph(mk2)
    g.add_variable("x", (4,), "float32", mapping=M.single_tile(4, 0))
    inner = P.Sequence([_copy_prog(g)], name="inner")
    outer = P.Sequence([inner], name="outer")
    inner.add(outer)
    with pytest.raises(EmulatorError, match=r"program 'outer' \(Sequence\) contains itself"):
        Engine(g, outer).compile()
    loop = P.Sequence([], name="self")
    loop.add(P.Repeat(2, loop))
    with pytest.raises(EmulatorError, match=r"'self'.*contains itself"):
        Engine(g, loop).compile()


def test_bad_copies_and_inputs(mk2):
    g = Graph(mk2)
    a = g.add_variable("a", (10,), "float32", mapping=M.single_tile(10, 0))
    b = g.add_variable("b", (8,), "float32", mapping=M.single_tile(8, 1))
    h = g.add_variable("h", (10,), "float16", mapping=M.single_tile(10, 1))
    k = g.add_constant("k", np.zeros(10, np.float32), mapping=M.single_tile(10, 2))
    with pytest.raises(EmulatorError, match=r"Copy 'Copy a->b'.*10 elements.*8"):
        P.Copy(a, b)
    with pytest.raises(EmulatorError, match=r"dst 'k' is a constant"):
        P.Copy(a, k)
    with pytest.raises(EmulatorError, match=r"float32 but dst 'h' is float16.*CAST"):
        Engine(g, P.Copy(a, h)).compile()
    with pytest.raises(EmulatorError, match=r"'a' needs 10 elements"):
        Engine(g, P.Sync()).run(inputs={"a": np.ones(3)})
    with pytest.raises(EmulatorError, match=r"mode must be one of full, timing"):
        Engine(g, P.Sync(), mode="fast")
    with pytest.raises(EmulatorError, match=r"name 'a' is already used"):
        g.add_variable("a", (1,), "int32")
