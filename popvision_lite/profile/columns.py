"""A profile table as typed numpy columns (:class:`Columns`): what the emulator builds and the writer writes, with
no pandas (decision 0471).

A ``Columns`` holds every column of one table of ``schema.TABLE_COLUMNS``, in the stored order, each a 1-D numpy
array of the column's stored dtype (``schema.COLUMN_DTYPES``; a text column: an object array of Python ``str``),
all of one length; the constructor refuses anything else, naming the table and the column.
:meth:`Columns.typed` casts what a producer has (a dict of columns, row dicts or row tuples) to that form with the
checks the writer applies to a DataFrame's columns (:func:`cast_column`: a value that does not fit the stored dtype
is refused, never wrapped).  :meth:`Columns.frame` is the table as a DataFrame, for the callers that want one:
pandas is imported there, on first use, not by this module.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.profile import schema


class TableError(ValueError):
    """A table whose columns do not have the stored form (names the table and the column)."""


def where(table: str, col: str) -> str:
    return f"table '{table}' column '{col}'"


def cast_column(table: str, col: str, values: np.ndarray, want: str) -> np.ndarray:
    """Numeric ``values`` as the stored dtype ``want``; TableError when a value does not fit (NaN or a fraction for
    an integer, a value outside its range, a bool column with values other than 0/1).  The writer's checks of a
    DataFrame column, after pandas turned object / categorical values into numbers."""
    dt = np.dtype(want)
    if values.dtype == dt:
        return values
    at = where(table, col)
    if values.dtype == object or values.dtype.kind in "USO":
        raise TableError(f"{at} must be numeric ({want}), not {values.dtype}")
    if dt.kind == "b":
        if values.dtype.kind in "iuf" and not np.isin(values, (0, 1)).all():
            raise TableError(f"{at} must be boolean (True/False or 0/1)")
        return values.astype(np.bool_)
    if dt.kind in "iu":
        if values.dtype.kind == "f":
            if not np.isfinite(values).all():
                raise TableError(f"{at} has NaN/inf but must be {want}")
            if (values != np.round(values)).any():
                raise TableError(f"{at} has fractional values but must be {want}")
        if values.size:
            info = np.iinfo(dt)
            lo, hi = values.min(), values.max()
            if lo < info.min or hi > info.max:
                raise TableError(f"{at} has values {lo}..{hi} outside {want}")
    return values.astype(dt)


def text_column(values) -> np.ndarray:
    """Text values as an object array of ``str`` (None or NaN as "", anything else as its ``str``: the writer's
    rule for a DataFrame's text column)."""
    arr = values if isinstance(values, np.ndarray) and values.dtype == object else None
    if arr is None:
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
    if len(arr) and set(map(type, arr.tolist())) != {str}:
        arr = np.array(["" if v is None or (isinstance(v, float) and v != v) else str(v) for v in arr.tolist()],
                       dtype=object).reshape(-1)
    return arr


def factorize(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """A text column (an object array of ``str``) dictionary-encoded: (int32 codes, the distinct texts in order of
    first appearance), as ``pandas.factorize`` gives them (one dict look-up a row: ~4x numpy's sort of the column
    as fixed-width text, measured on 200 k rows)."""
    index: dict[str, int] = {}
    put = index.setdefault
    return np.array([put(v, len(index)) for v in values.tolist()], np.int32).reshape(-1), list(index)


class Columns:
    """Table ``name`` as typed numpy columns (see the module doc)."""

    __slots__ = ("name", "data")

    def __init__(self, name: str, data: dict[str, np.ndarray]):
        if name not in schema.TABLE_COLUMNS:
            raise TableError(f"no table {name!r} in the profile schema")
        cols = schema.TABLE_COLUMNS[name]
        missing = [c for c in cols if c not in data]
        extra = [c for c in data if c not in schema.COLUMN_DTYPES[name]]
        if missing or extra:
            raise TableError(f"table '{name}' " + (f"lacks column(s) {missing}" if missing else
                                                   f"has column(s) {extra} not in the schema"))
        n = None
        for c in cols:
            v = data[c]
            want = schema.COLUMN_DTYPES[name][c]
            if not isinstance(v, np.ndarray) or v.ndim != 1:
                raise TableError(f"{where(name, c)} must be a 1-D numpy array, not {type(v).__name__}"
                                 + (f" of {v.ndim} dimensions" if isinstance(v, np.ndarray) else ""))
            if v.dtype != (object if want == "str" else np.dtype(want)):
                raise TableError(f"{where(name, c)} has dtype {v.dtype}, must be "
                                 + ("object (str)" if want == "str" else want))
            if n is None:
                n = len(v)
            elif len(v) != n:
                raise TableError(f"{where(name, c)} has {len(v)} rows, column '{cols[0]}' {n}")
        self.name = name
        self.data = {c: data[c] for c in cols}

    @classmethod
    def typed(cls, name: str, data) -> Columns:
        """Table ``name`` from ``data`` (a dict of columns, a list of row dicts or of row tuples in the stored
        column order, or a DataFrame) with the stored dtypes (:func:`cast_column`, :func:`text_column`)."""
        cols = schema.TABLE_COLUMNS[name]
        if isinstance(data, list | tuple):
            if data and isinstance(data[0], dict):
                data = {c: [r[c] for r in data] for c in cols}
            else:
                data = {c: [r[k] for r in data] for k, c in enumerate(cols)}
        out = {}
        for c in cols:
            if c not in data:
                raise TableError(f"table '{name}' lacks column(s) {[c for c in cols if c not in data]}")
            v = data[c]
            v = v.to_numpy() if hasattr(v, "to_numpy") else v
            want = schema.COLUMN_DTYPES[name][c]
            if want == "str":
                out[c] = text_column(v)
            else:
                out[c] = cast_column(name, c, v if isinstance(v, np.ndarray) else np.asarray(v, dtype=(
                    None if len(v) else want)), want)
        return cls(name, out)

    @classmethod
    def empty(cls, name: str) -> Columns:
        return cls(name, {c: np.zeros(0, object if dt == "str" else dt) for c, dt in schema.COLUMN_DTYPES[name].items()})

    @classmethod
    def concat(cls, name: str, parts: list[Columns]) -> Columns:
        if not parts:
            return cls.empty(name)
        return cls(name, {c: np.concatenate([p.data[c] for p in parts]) for c in schema.TABLE_COLUMNS[name]})

    def __len__(self) -> int:
        return len(next(iter(self.data.values()))) if self.data else 0

    def __getitem__(self, col: str) -> np.ndarray:
        return self.data[col]

    def __setitem__(self, col: str, values) -> None:
        """Column ``col`` replaced by ``values`` (one per row), cast to its stored dtype (:meth:`replace`)."""
        if len(np.shape(values)) and len(values) != len(self):
            raise TableError(f"{where(self.name, col)}: {len(values)} values for {len(self)} rows")
        self.data[col] = self.replace(**{col: values}).data[col]

    def __contains__(self, col) -> bool:
        return col in self.data

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.data)

    def replace(self, **cols) -> Columns:
        """A copy with ``cols`` (column -> values) in place of its columns, cast to the stored dtypes."""
        new = dict(self.data)
        for c, v in cols.items():
            if c not in new:
                raise TableError(f"table '{self.name}' has no column '{c}'")
            want = schema.COLUMN_DTYPES[self.name][c]
            if np.ndim(v) == 0:
                v = np.full(len(self), v, dtype=object if want == "str" else None)
            new[c] = text_column(v) if want == "str" else cast_column(self.name, c, np.asarray(v), want)
        return Columns(self.name, new)

    def frame(self):
        """The table as a pandas DataFrame (columns in the stored order and dtypes; text as object)."""
        import pandas as pd

        return pd.DataFrame(self.data, copy=False)

    def __repr__(self) -> str:
        return f"Columns({self.name!r}, {len(self)} rows)"
