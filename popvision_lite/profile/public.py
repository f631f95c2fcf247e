"""The notebook form of every table (``Profile.steps``, ``Profile.table(name)``, ``memory.by_tile()`` ...): the
stored tables converted at the Python API boundary (docs/decisions/0250-pandas-conventions-at-the-api.md).

The file keeps its format (ids dense from 0, -1 for "none", the narrowest integer that holds a column) and the
analyses and views read that stored form (``Profile.stored_table``).  What a notebook gets follows pandas'
conventions instead, the same for every table:

* **index** = the table's id column, named after it (``step``, ``op_id``, ``prog_id``, ``cs_id``, ``var_id``,
  ``lstep``, ``phase_id``, ``tile``): ``df.loc[i]`` is row ``i``, ``merge(..., left_on="op_id", right_index=True)``
  joins.  A table without an id (``vertices``, ``variable_tiles``, ``variable_intervals``) keeps an unnamed
  RangeIndex (row numbers).
* **missing** = ``<NA>`` in a nullable dtype (``Int32``, ``Int64``, ``string``), never a -1 or "" sentinel: a
  step of no op, a program without a parent, a phase with no stored step, an ``ipu`` of "every IPU".
* **quantities** (cycles, bytes, counts, runs, seconds) are ``int64`` or ``float64`` (``Int64`` where one can
  be missing): no unsigned or narrow integer that wraps on subtraction.  Ids and codes keep their width.
* **names** are snake_case with the unit in the name where the name alone does not say it (``busy_max_cycles``,
  ``capacity_bytes``, ``vertex_code_bytes``).  A renamed column, and an id column now in the index, can still be
  read by its old name for one release, with a ``DeprecationWarning`` (:class:`Table`).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd

from popvision_lite.profile import schema

# the index of each table (None: row numbers)
INDEX: dict[str, str | None] = {**schema.ID_COLUMNS, "vertices": None, "variable_tiles": None,
                                "variable_intervals": None, "tiles": "tile", "memory_by_tile": "tile"}


def snake(name: str) -> str:
    """``vertexCode`` -> ``vertex_code``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


# stored name -> public name (only the names that change)
RENAMED: dict[str, dict[str, str]] = {
    "steps": {"busy_max": "busy_max_cycles", "busy_mean": "busy_mean_cycles"},
    "vertices": {"count": "num_vertices"},
    "phases": {f"ipu_{k}": f"ipu_{k}_cycles" for k in schema.STEP_KINDS},
    "memory_by_tile": {**{c: f"{snake(c)}_bytes" for c in schema.MEMORY_CATEGORIES},
                       "always_live": "always_live_bytes", "not_always_live": "not_always_live_bytes",
                       "total": "total_bytes", "capacity": "capacity_bytes"},
}
# the memory_by_tile column of each Poplar category (schema.MEMORY_CATEGORIES order)
CATEGORY_COLUMNS: tuple[str, ...] = tuple(RENAMED["memory_by_tile"][c] for c in schema.MEMORY_CATEGORIES)
# stored columns whose -1 (or "") means "none": <NA> in the public form
_MISSING = {
    "steps": ("op_id", "prog_id", "ipu"),
    "ops": ("ipu",),
    "programs": ("parent_id", "op_id", "cs_id", "first_step", "last_step", "lstep"),
    "compute_sets": ("op_id",),
    "variables": ("first_lstep", "last_lstep", "op_id"),
    "liveness_steps": ("prog_id",),
    "phases": ("ipu", "first_step", "last_step", "time_kind", *(f"ipu_{k}" for k in schema.STEP_KINDS)),
}
# quantities stored narrower than int64 (counts of tiles): widened
_WIDEN = {"steps": ("tiles_active",), "ops": ("tiles_used",), "compute_sets": ("num_tiles",)}
_NULLABLE = {"int8": "Int8", "int16": "Int16", "int32": "Int32", "int64": "Int64"}


class Table(pd.DataFrame):
    """A DataFrame whose renamed columns (and id column now in the index) still answer to their old names, with
    a DeprecationWarning, for one release: ``df["capacity"]`` reads ``df["capacity_bytes"]``, ``p.steps["step"]``
    reads the index.  Everything else is plain pandas; frames derived from it keep the aliases."""

    _metadata = ["_aliases"]

    @property
    def _constructor(self):
        return Table

    def _alias(self, key):
        aliases = getattr(self, "_aliases", None) or {}
        if not isinstance(key, str) or key in self.columns or key not in aliases:
            return None
        new = aliases[key]
        index = new == self.index.name and new not in self.columns
        warnings.warn(f"column '{key}' is now {'the index' if index else repr(new)}: read "
                      f"{'df.index (or df.reset_index())' if index else f'df[{new!r}]'}; the old name goes in the "
                      "next release", DeprecationWarning, stacklevel=3)
        if index:
            return self.index.to_series(index=self.index, name=key)
        return super().__getitem__(new)

    def __getitem__(self, key):
        old = self._alias(key)
        if old is not None:
            return old
        if isinstance(key, list) and any(self._alias_name(k) for k in key):
            return pd.DataFrame({k: self[k] for k in key}, index=self.index)
        return super().__getitem__(key)

    def _alias_name(self, key) -> bool:
        aliases = getattr(self, "_aliases", None) or {}
        return isinstance(key, str) and key not in self.columns and key in aliases

    def __getattr__(self, name):
        if not name.startswith("_") and self._alias_name(name):
            return self._alias(name)
        return super().__getattr__(name)


def _table(df: pd.DataFrame, aliases: dict[str, str]) -> Table:
    t = Table(df)
    t._aliases = dict(aliases)
    return t


def public(name: str, stored: pd.DataFrame, extra: dict[str, np.ndarray | pd.Series] | None = None) -> Table:
    """Table ``name`` in its public form, from its stored form ``stored`` (which is not modified); ``extra``:
    columns appended after the stored (and derived) ones, already in their public form."""
    df = stored.copy(deep=False)
    for col in _MISSING.get(name, ()):
        if col not in df.columns:
            continue
        v = df[col]
        if v.dtype.kind in "iu":
            arr = v.to_numpy()
            out = pd.array(arr, dtype=_NULLABLE.get(str(v.dtype), "Int64"))
            out[arr < 0] = pd.NA
            df[col] = out
        else:  # text: "" is none
            s = v.astype("string")
            df[col] = s.mask(s == "")
    for col in _WIDEN.get(name, ()):
        if col in df.columns:
            df[col] = df[col].astype(np.int64)
    if extra:
        for col, values in extra.items():
            df[col] = values
    renamed = RENAMED.get(name, {})
    df = df.rename(columns=renamed)
    aliases = {old: new for old, new in renamed.items()}
    idx = INDEX.get(name)
    if idx is not None and idx in df.columns:
        df = df.set_index(idx)
        aliases[idx] = idx
    else:
        df.index = pd.RangeIndex(len(df))
    return _table(df, aliases)
