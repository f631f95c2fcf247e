"""Cycle estimates of the SRAM-reader microbenchmark codelet (not a poplibs vertex).

Jia et al., "Dissecting the Graphcore IPU Architecture via Microbenchmarking" (2019) read tile SRAM
with a hand-written loop (one 128-bit load per instruction: the spec's
``sram_load_bytes_per_cycle``) and with a compiled C++ loop (a 64-bit load, the spec's
``memcpy_bytes_per_cycle``, plus one add per load: 2 instructions per load).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.estimators.popops import ELEMENTWISE_OVERHEAD

COMPILED_LOOP_INSTRUCTIONS_PER_LOAD = 2  # a 64-bit load and an add


def sram_reader_cycles(nbytes, bytes_per_load: float, assembly: bool) -> np.ndarray:
    """Worker cycles to read and sum ``nbytes`` bytes (set-up as every elementwise vertex)."""
    loads = np.ceil(np.asarray(nbytes) / float(bytes_per_load)).astype(np.int64)
    return ELEMENTWISE_OVERHEAD + (1 if assembly else COMPILED_LOOP_INSTRUCTIONS_PER_LOAD) * loads
