"""Host allocator settings for the emulator's large temporary arrays (glibc's malloc; elsewhere nothing).

Building and compiling a graph makes and frees millions of numpy temporaries of 1-32 MB: the per-piece
arrays of a copy, the per-vertex arrays of a compute set.  glibc serves a block above its mmap threshold
(128 KB at first, raised as such blocks are freed) from a fresh ``mmap`` and gives freed memory at the top of
the heap back to the kernel above its trim threshold, so the same few hundred MB were faulted in and zeroed
by the kernel again and again: ~650 k page faults and ~5 s of system time in the ResNet-50 replica graph of
the validation report, ~4 s in GPT-2-XL 16 x 4.  With the mmap threshold at glibc's maximum (32 MB) and a
256 MB trim threshold the freed blocks are reused from the heap instead (the same row: ~360 k faults,
~2.6 s of system time; peak RSS unchanged, since the memory kept is what the next arrays take).

Process-wide and set once; it changes no result (allocation is not visible to the emulation).
"""

from __future__ import annotations

import ctypes
import sys

_M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc accepts at most HEAP_MAX_SIZE / 2 = 32 MiB on 64-bit
TRIM_THRESHOLD = 256 << 20

_set = False


def reuse_freed_memory() -> None:
    """Set the two thresholds above (once per process, on Linux; a C library without ``mallopt`` or one that
    ignores it is left as it is)."""
    global _set
    if _set:
        return
    _set = True
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
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
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim.argtypes = (ctypes.c_size_t,)
    trim(0)
