"""Compiled stage graphs kept by what they were built from, for the later runs of this process (issue 49).

A pipelined or phased run builds and compiles each distinct stage program once (``stages.StageGraph``); a
search over placements, a sweep's points run inside one worker (``--isolate worker``) or the fit advisor run
many configs whose stage graphs are the same: another pipeline depth or replica count, another gradient
accumulation or optimizer changes the composition (pipeline.py), not what one IPU's stage program is.  This
cache keeps each compiled stage graph keyed by its *content*: the arguments it was built with and every field
and method of the run config the build read, with the values it got (:class:`ConfigReads` records them while the
graph is built).  A later request whose config gives the same value to every one of those reads is the same
build (the build is a function of what it reads), so the kept graph is returned, with the result of building it
again.  Nothing has to list which fields a stage graph depends on, so a field added later (a new placement, a new
lowering option) is keyed as soon as the builder reads it.

Bounded by bytes (:data:`BUDGET_BYTES`, the arrays and tables a kept graph holds, :func:`retained_bytes`), least
recently used first out; ``emulated.release_graphs`` empties it.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

# the bytes of compiled stage graphs kept at most (a stage graph of GPT-3 175B's TP-32 shard keeps ~60 MB)
BUDGET_BYTES = 768 << 20


class ConfigReads:
    """A run config that records each attribute it is read for, and each method call with its arguments, with what
    it gave (as ``repr``: 1, 1.0 and True are different reads).  The build sees the config itself through it."""

    __slots__ = ("_cfg", "_reads")

    def __init__(self, cfg):
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "_reads", {})

    def __getattr__(self, name: str):
        value = getattr(object.__getattribute__(self, "_cfg"), name)
        reads = object.__getattribute__(self, "_reads")
        if callable(value):
            def call(*args, **kw):
                result = value(*args, **kw)
                reads[(name, args, tuple(sorted(kw.items())))] = repr(result)
                return result
            return call
        reads[name] = repr(value)
        return value

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"a stage graph's build may not change its config ({name})")


def reads_of(view: ConfigReads) -> dict:
    """What the build read through ``view``: {field or (method, args, kwargs): repr of the value}."""
    return dict(object.__getattribute__(view, "_reads"))


def gives_the_same(reads: dict, cfg) -> bool:
    """Whether ``cfg`` gives every recorded read the same value."""
    for key, value in reads.items():
        got = getattr(cfg, key[0])(*key[1], **dict(key[2])) if isinstance(key, tuple) else getattr(cfg, key)
        if repr(got) != value:
            return False
    return True


def retained_bytes(obj, _seen: set | None = None, _depth: int = 0) -> int:
    """Bytes of the numpy arrays, DataFrames, strings and bytes ``obj`` holds (its attributes, containers and
    their contents, each counted once): what keeping it costs, within a few percent."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen or _depth > 12 or obj is None or isinstance(obj, bool | int | float | type | np.generic):
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        if obj.base is not None and id(obj.base) in seen:
            return 0
        return obj.nbytes + (_distinct_object_bytes(obj) if obj.dtype == object else 0)
    pd = sys.modules.get("pandas")  # a DataFrame exists only where pandas is imported: this module does not import it
    if pd is not None and isinstance(obj, pd.DataFrame | pd.Series):
        return _table_bytes(obj, pd)
    if isinstance(obj, str | bytes):
        return len(obj)
    if isinstance(obj, dict):
        items = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, list | tuple | set | frozenset):
        items = list(obj)
    elif hasattr(obj, "__dict__"):
        items = list(vars(obj).values())
    elif hasattr(obj, "__slots__"):
        items = [getattr(obj, s, None) for s in obj.__slots__]
    else:
        return 0
    return sum(retained_bytes(x, seen, _depth + 1) for x in items
               if x is not None and not isinstance(x, bool | int | float | np.generic))  # (no call for a number)


def _distinct_object_bytes(a: np.ndarray) -> int:
    """The bytes of an object array's values, each distinct value once (a profile table's text column held as
    numpy, ``profile.columns``: its names repeat, as in a DataFrame's text column)."""
    try:
        values = set(a.ravel().tolist())
    except TypeError:  # unhashable values: each counted
        values = a.ravel().tolist()
    return sum(sys.getsizeof(v) for v in values)


def _table_bytes(t, pd) -> int:
    """A table's bytes: its columns' and index's arrays, and the strings of its text columns each distinct value
    once (a profile table's names repeat: the vertex table's 17 codelet names in 131 k rows are 17 strings, where
    ``memory_usage(deep=True)`` counted 131 k of them, ~9x the column's memory, in most of the time this took)."""
    n = int(np.sum(t.memory_usage(deep=False)))
    cols = [t] if isinstance(t, pd.Series) else [t.iloc[:, i] for i in range(t.shape[1])]
    for c in [*cols, t.index]:
        if c.dtype == object or isinstance(c.dtype, pd.StringDtype):
            n += _distinct_object_bytes(np.asarray(c, dtype=object))
    return n


class StageGraphCache:
    """Compiled stage graphs by content (see the module's text), least recently used first out of ``budget``."""

    def __init__(self, budget: int = BUDGET_BYTES):
        self.budget = int(budget)
        self._entries: OrderedDict[int, tuple] = OrderedDict()  # serial -> (args, reads, graph, bytes)
        self._serial = 0
        self.hits = self.misses = 0

    @property
    def nbytes(self) -> int:
        return sum(e[3] for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, args: tuple, cfg, serves: Callable | None = None):
        """The kept graph built with ``args`` from a config that read as ``cfg`` does, or None.  ``serves(graph)``
        False: that graph is not one the caller can use (a stage graph kept without the profile tables a later
        run reads); it is dropped, as the graph built in its place is the same build."""
        for serial, (a, reads, graph, _) in self._entries.items():
            if a == args and gives_the_same(reads, cfg):
                if serves is not None and not serves(graph):
                    del self._entries[serial]
                    break
                self._entries.move_to_end(serial)
                self.hits += 1
                return graph
        self.misses += 1
        return None

    def build(self, args: tuple, cfg, make: Callable, serves: Callable | None = None):
        """The graph for ``args`` and ``cfg``: the kept one (where ``serves`` it, see :meth:`get`), else
        ``make(view)`` (``view``: ``cfg`` read through :class:`ConfigReads`), kept if it fits the budget."""
        graph = self.get(args, cfg, serves)
        if graph is not None:
            return graph, True
        view = ConfigReads(cfg)
        graph = make(view)
        self.put(args, reads_of(view), graph)
        return graph, False

    def put(self, args: tuple, reads: dict, graph) -> None:
        n = retained_bytes(graph)
        if n > self.budget:
            return
        while self._entries and self.nbytes + n > self.budget:
            self._entries.popitem(last=False)
        self._serial += 1
        self._entries[self._serial] = (args, reads, graph, n)

    def clear(self) -> bool:
        """Drop every kept graph; True when some were kept."""
        had = bool(self._entries)
        self._entries.clear()
        return had
