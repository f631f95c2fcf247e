"""Host allocator settings for the emulator's large temporary arrays (glibc's malloc; elsewhere nothing).

Building and compiling a graph makes and frees millions of numpy temporaries of 1-32 MB: the per-piece
arrays of a copy, the per-vertex arrays of a compute set.  glibc serves a block above its mmap threshold
(128 KB at first, raised as such blocks are freed) from a fresh ``mmap`` and gives freed memory at the top of
the heap back to the kernel above its trim threshold, so the same few hundred MB were faulted in and zeroed
by the kernel again and again: ~650 k page faults and ~5 s of system time in the ResNet-50 replica graph of
the validation report, ~4 s in GPT-2-XL 16 x 4.  With the mmap threshold at glibc's maximum (32 MB) and a
256 MB trim threshold the freed blocks are reused from the heap instead (the same row: ~360 k faults,
~2.6 s of system time; peak RSS unchanged, since the memory kept is what the next arrays take).

numpy also asks the kernel for transparent huge pages on its large arrays (``madvise(MADV_HUGEPAGE)``, numpy's
default on Linux).  Where the kernel's THP defrag mode makes such a fault compact memory synchronously
(``/sys/kernel/mm/transparent_hugepage/defrag`` set to ``always``, ``madvise`` or ``defer+madvise``; ``madvise``
is the kernel's default), each first touch of a fresh 2 MB page can stall in the kernel, the more so on a busy,
fragmented machine: GPT-2-XL 16 x 4 spent ~4.2 s of system time in 276 k faults, against ~1.3 s in 695 k plain
4 KB faults with the advice off (user time the same, 12.5 s; peak RSS the same).  So there the advice is turned
off (``numpy._core.multiarray._set_madvise_hugepage``), unless ``NUMPY_MADVISE_HUGEPAGE`` is set, which
numpy reads itself and which then decides.

The trim threshold was 256 MB at first.  A ResNet-50 replica graph frees more than that at the top of the heap
again and again (its 21 M vertices' arrays, its largest copies), and each time the heap was handed back and
faulted in again: ~970 k page faults (3.9 GB touched for a 1.9 GB peak), 2.4-3.3 s of system time, 21.8-22.3 s
CPU per row (2026-12-04, a quiet box).  At 1 GB: ~810 k faults, ~1.4 s of system time, 19.1 s CPU; peak RSS
unchanged (1.93 GB).  Also serving the blocks above 32 MB from the heap (``M_MMAP_MAX`` = 0) cut the faults to
~490 k, but the heap fragmented and ``validate``'s peak rose from 1.97 to 2.08 GB, so blocks above the mmap
threshold still get their own mapping.  A caller that has freed a whole graph hands the heap back with
:func:`return_freed_memory` (the validation report does, between its graphs).

Process-wide and set once; it changes no result (allocation is not visible to the emulation).
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import sys

_M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc accepts at most HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit
TRIM_THRESHOLD = 1 << 30  # (mallopt takes an int)

_set = False


@functools.cache
def _libc() -> ctypes.CDLL:
    """The process's C library, loaded once: each ``ctypes.CDLL`` makes its own function-pointer class, a
    reference cycle the garbage collector would otherwise meet after every ``return_freed_memory``."""
    return ctypes.CDLL(None)


def reuse_freed_memory() -> None:
    """Set the allocator settings above (once per process, on Linux; a C library without ``mallopt`` or one that
    ignores it is left as it is)."""
    global _set
    if _set:
        return
    _set = True
    if not sys.platform.startswith("linux"):
        return
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ and huge_page_faults_compact():
        try:
            from numpy._core.multiarray import _set_madvise_hugepage
        except ImportError:  # another numpy: its default stays
            pass
        else:
            _set_madvise_hugepage(False)
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def return_freed_memory() -> None:
    """Give the heap's free pages back to the kernel (glibc ``malloc_trim(0)``; elsewhere nothing).  With the
    thresholds above a freed graph's memory stays in the heap for the next one; a caller that has just freed
    a whole graph and builds one of another shape next (the validation report between its groups of rows)
    calls this, so the next graph starts from the memory it needs rather than from the last one's peak."""
    if not sys.platform.startswith("linux"):
        return
    try:
        trim = _libc().malloc_trim
    except (OSError, AttributeError):
        return
    trim.argtypes = (ctypes.c_size_t,)
    trim(0)


THP_DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag"


def huge_page_faults_compact(path: str = THP_DEFRAG) -> bool:
    """True when the kernel's THP defrag mode (the bracketed one in ``path``) compacts memory synchronously on a
    huge-page fault in a ``madvise(MADV_HUGEPAGE)`` region: ``always``, ``madvise`` or ``defer+madvise``
    (``defer`` and ``never`` do not stall); False when it cannot be read."""
    try:
        with open(path) as f:
            m = re.search(r"\[([^\]]+)\]", f.read())
    except OSError:
        return False
    return m is not None and m.group(1) in ("always", "madvise", "defer+madvise")
