"""codelets.base.size_sum: the int64 sum of a field's sizes, without casting every element to int64: one broadcast
size times the count, int32 sizes in chunks whose sums stay in int32 (several chunks where the total passes
2**31), anything else as before; and the codelet flops and SRAM bytes that read it."""

import numpy as np

from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.codelets import popops
from popvision_lite.emulator.codelets.base import size_sum


def test_size_sum_equals_the_int64_sum():
    rng = np.random.default_rng(49)
    cases = [np.zeros(0, np.int32), np.broadcast_to(np.int32(7), (1000,)), np.broadcast_to(np.int64(3), (5,)),
             rng.integers(0, 100, 10_000).astype(np.int32),
             np.full(5, 2**31 - 1, np.int32),  # five chunks of one element
             rng.integers(2**29, 2**31 - 1, 4097).astype(np.int32),  # ~2**41 in all: chunks of 1-4 elements
             np.array([0, 0, 0], np.int32), np.array([-3, 5, 2**31 - 1], np.int32),  # negative: the int64 sum
             np.array([-2**31, -1], np.int32),
             rng.integers(0, 2**40, 300), rng.integers(0, 50, (4, 6)).astype(np.int32)]
    for a in cases:
        got = size_sum(a)
        assert type(got) is int and got == int(np.asarray(a).sum(dtype=np.int64)), a[:4]


def test_elementwise_flops_and_sram_bytes_read_the_sizes_sum():
    t = Target.from_device("ipu-mk2", num_ipus=1)
    g = Graph(t)
    n = 6 * 1000 + 5
    x = g.add_variable("x", (n,), "float16", mapping=M.linear(n, np.arange(4)))
    y = g.add_variable("y", (n,), "float16", mapping=M.linear(n, np.arange(4)))
    cs = g.add_compute_set("cs")
    starts = np.arange(0, n, 7)
    sizes = np.minimum(7, n - starts)
    for codelet in (popops.EXP, popops.RELU):
        grp = g.add_vertices(cs, codelet, tiles=x.mapping.tile_of(starts),
                             fields={"in": x.regions(starts, sizes), "out": y.regions(starts, sizes)})
        want = int(sizes.sum())
        assert grp.codelet.flops(grp) == grp.codelet.flops_per_element * want > 0
        assert grp.codelet.sram_bytes(grp) == 2 * want * 2  # in and out, 2 bytes an element
    equal = g.add_vertices(cs, popops.EXP, tiles=np.zeros(100, np.int64),
                           fields={"in": x.regions(np.arange(100), 1), "out": y.regions(np.arange(100), 1)})
    assert equal.fields["out"].sizes.strides == (0,)  # one size broadcast: the count times it
    assert equal.codelet.flops(equal) == 4 * 100 and equal.codelet.sram_bytes(equal) == 2 * 100 * 2
