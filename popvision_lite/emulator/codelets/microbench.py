"""The SRAM-reader microbenchmark codelet (Jia et al. 2019; not a poplibs vertex)."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.codelets.base import Codelet
from popvision_lite.emulator.estimators.microbench import sram_reader_cycles
from popvision_lite.emulator.graph import DTYPES, Regions
from popvision_lite.errors import EmulatorError


class ReadSum(Codelet):
    """Microbenchmark SRAM reader: out[v] = sum of region ``in`` of vertex v.

    ``assembly=True`` models Jia et al.'s hand-written loop (one 128-bit load per instruction,
    spec ``sram_load_bytes_per_cycle``); ``False`` models a compiled C++ loop (a 64-bit load,
    spec ``memcpy_bytes_per_cycle``, plus one add per load: 2 instructions per 64 bits).
    """

    fields = {"in": "in", "out": "out"}
    code_bytes = 192
    state_bytes = 8

    def __init__(self, assembly: bool):
        self.assembly = assembly
        self.name = "ReadSumAsm" if assembly else "ReadSum"

    def check(self, group):
        for fname in ("in", "out"):
            if not isinstance(group.fields[fname], Regions):
                raise EmulatorError(f"codelet '{self.name}': field '{fname}' must be tensor.regions(...)")
        if np.any(group.fields["out"].sizes != 1):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': 'out' must be 1 element per vertex")

    def cycles(self, group, target):
        nbytes = group.fields["in"].sizes * group.fields["in"].tensor.itemsize
        per = target.em["sram_load_bytes_per_cycle" if self.assembly else "memcpy_bytes_per_cycle"]
        return sram_reader_cycles(nbytes, per, self.assembly)

    def flops(self, group):
        return int(group.fields["in"].sizes.sum())

    def compute(self, group, data):
        fi = group.fields["in"]
        x = fi.gather(data).astype(np.float32)
        offs = np.cumsum(fi.sizes) - fi.sizes
        sums = np.add.reduceat(x, offs) if len(x) else np.zeros(group.n, np.float32)
        sums = np.where(fi.sizes > 0, sums, 0)
        group.fields["out"].scatter(data, sums.astype(DTYPES[group.fields["out"].tensor.dtype]))


READ_SUM = ReadSum(False)


READ_SUM_ASM = ReadSum(True)
