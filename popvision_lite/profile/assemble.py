"""The one profile assembler: typed tables, parts concatenated by the key map of ``schema``.

Every producer of :class:`~popvision_lite.profile.schema.ProfileData` (the emulator's whole-graph builder,
the stage pipeline's composition, the synthetic maker) makes its tables here:

* :func:`typed_table` puts a table's columns in the stored order with the stored dtypes
  (``schema.COLUMN_DTYPES``), so no producer casts column by column;
* :func:`concat_parts` joins parts that each number their ids from 0 (one stage graph per IPU of a
  pipeline): every id and reference column of ``schema.ID_COLUMNS`` / ``REFERENCES`` / ``PARENT_COLUMNS``
  is shifted past the rows of the parts before it, every tile column of ``schema.TILE_COLUMNS`` by the
  part's first global tile; -1 ("none") stays -1.  References into a table no part holds (the programs'
  steps, when the steps are composed afterwards) become -1 for the producer to fill;
* :func:`program_step_spans` gives each program its first and last step from the steps table (leaves
  from their own steps, containers from their children's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from popvision_lite.profile import schema
from popvision_lite.profile.columns import Columns


def typed_table(name: str, data):
    """Table ``name`` as a DataFrame from ``data`` (a DataFrame, ``Columns``, a dict of columns or a list of row
    dicts), its columns in the stored order with the stored dtypes; text columns are kept as given (str, object or
    categorical).  (The emulator builds ``Columns.typed`` tables: no pandas.)"""
    import pandas as pd

    cols = list(schema.TABLE_COLUMNS[name])
    if isinstance(data, Columns):
        return data.frame()
    df = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data, columns=cols)
    df = df[cols]
    casts = {c: dt for c, dt in schema.COLUMN_DTYPES[name].items() if dt != "str" and df[c].dtype != dt}
    return df.astype(casts) if casts else df


def key_columns(name: str) -> dict[str, str]:
    """Column -> the table whose rows it numbers or refers to ("tile" for a global tile index)."""
    out = {}
    if name in schema.ID_COLUMNS:
        out[schema.ID_COLUMNS[name]] = name
    for (t, col), (ref, _minus_one) in schema.REFERENCES.items():
        if t == name:
            out[col] = ref
    if name in schema.PARENT_COLUMNS:
        out[schema.PARENT_COLUMNS[name]] = name
    for col in schema.TILE_COLUMNS.get(name, ()):
        out[col] = "tile"
    return out


@dataclass
class Part:
    """Tables of one part, ids numbered from 0 within it; ``first_tile``: the global tile of its tile 0."""

    tables: dict  # table -> Columns or DataFrame
    first_tile: int = 0


def concat_parts(parts: list[Part]) -> tuple[dict, list[dict[str, int]]]:
    """The parts' tables concatenated (every table any part holds; see the module doc), and the offsets each
    part's ids were shifted by (table -> offset, "tile" -> first tile) for the producer's own references
    (step templates).  A table whose parts are all ``Columns`` is joined as ``Columns`` (no pandas), else as a
    DataFrame."""
    names = list(dict.fromkeys(n for p in parts for n in p.tables))
    offsets, running = [], dict.fromkeys(names, 0)
    for p in parts:
        offsets.append(dict(running, tile=int(p.first_tile)))
        for n in names:
            running[n] += len(p.tables.get(n, ()))
    out = {}
    for n in names:
        keys = key_columns(n)
        held = [(p.tables[n], off) for p, off in zip(parts, offsets, strict=True) if n in p.tables]
        if all(isinstance(t, Columns) for t, _ in held):
            shifted = []
            for t, off in held:
                new = {}
                for col, ref in keys.items():
                    if ref not in off:  # a table no part holds: the producer fills the column
                        new[col] = -1
                    elif off[ref]:
                        v = t[col]
                        new[col] = np.where(v >= 0, v + off[ref], -1)
                shifted.append(t.replace(**new) if new else t)
            out[n] = Columns.concat(n, shifted)
            continue
        import pandas as pd

        frames = []
        for t, off in held:
            df = (t.frame() if isinstance(t, Columns) else t).copy()
            for col, ref in keys.items():
                if ref not in off:  # a table no part holds: the producer fills the column
                    df[col] = -1
                elif off[ref]:
                    v = df[col].to_numpy()
                    df[col] = np.where(v >= 0, v + off[ref], -1)
            frames.append(df)
        out[n] = pd.concat(frames, ignore_index=True)
    return out, offsets


def program_step_spans(parent_id: np.ndarray, step_prog_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first_step, last_step) of every program: a leaf's from the steps it issued, a container's from its
    children's (parent before child); -1 for a program that issued none."""
    npg = len(parent_id)
    first = np.full(npg, np.iinfo(np.int64).max, np.int64)
    last = np.full(npg, -1, np.int64)
    sp = np.asarray(step_prog_id, np.int64)
    ok = sp >= 0
    if ok.any():
        np.minimum.at(first, sp[ok], np.nonzero(ok)[0])
        np.maximum.at(last, sp[ok], np.nonzero(ok)[0])
    parent = np.asarray(parent_id, np.int64)
    for q in range(npg - 1, -1, -1):  # children come after their parent
        p_ = parent[q]
        if p_ >= 0 and last[q] >= 0:
            first[p_] = min(first[p_], first[q])
            last[p_] = max(last[p_], last[q])
    return np.where(last >= 0, first, -1), last


@dataclass
class VariableRow:
    """A variable a producer adds to a profile for memory it accounts without a tensor of its own (training
    state, the other blocks of an outlined kind): its bytes per global tile and its live intervals (none:
    always live)."""

    name: str
    dtype: str
    shape: str
    tile_bytes: np.ndarray
    spans: list = None

    def __post_init__(self):
        self.spans = list(self.spans or [])


def append_variables(data, rows: list[VariableRow]) -> None:
    """Append ``rows`` to ``data``'s variables, variable_tiles and variable_intervals (ids after the existing
    ones), so the variable lists add up to the memory and liveness figures the producer added them to."""
    rows = [r for r in rows if np.any(r.tile_bytes)]
    if not rows:
        return
    n0 = data.num_rows("variables")
    var_rows, tiles_of, iv = [], [], []
    for k, r in enumerate(rows):
        vid = n0 + k
        tb = np.asarray(r.tile_bytes, np.int64)
        tiles = np.nonzero(tb)[0]
        always = not r.spans
        var_rows.append({"var_id": vid, "name": r.name, "kind": "variable", "dtype": r.dtype, "shape": r.shape,
                         "bytes": int(tb.sum()), "always_live": always,
                         "first_lstep": -1 if always else int(r.spans[0][0]),
                         "last_lstep": -1 if always else int(r.spans[-1][1]), "op_id": -1})
        tiles_of.append((np.full(len(tiles), vid, np.int64), tiles, tb[tiles]))
        if len(r.spans) > 1:
            iv += [(vid, int(a), int(z)) for a, z in r.spans]
    tile_cols = {"var_id": np.concatenate([t[0] for t in tiles_of]), "tile": np.concatenate([t[1] for t in tiles_of]),
                 "bytes": np.concatenate([t[2] for t in tiles_of])}
    old_iv = data.table("variable_intervals")
    if all(isinstance(t, Columns) for t in (data.table("variables"), data.table("variable_tiles"))) and (
            old_iv is None or isinstance(old_iv, Columns)):  # the emulator's tables: joined as columns
        data.variables = Columns.concat("variables", [data.table("variables"), Columns.typed("variables", var_rows)])
        data.variable_tiles = Columns.concat("variable_tiles", [data.table("variable_tiles"),
                                                                Columns.typed("variable_tiles", tile_cols)])
        if iv:
            data.variable_intervals = Columns.concat("variable_intervals", [
                old_iv if old_iv is not None else Columns.empty("variable_intervals"),
                Columns.typed("variable_intervals", iv)])
        return
    import pandas as pd

    data.variables = pd.concat([data.variables, typed_table("variables", var_rows)], ignore_index=True)
    data.variable_tiles = pd.concat([data.variable_tiles, typed_table("variable_tiles", pd.DataFrame(tile_cols))],
                                    ignore_index=True)
    if iv:
        old = data.variable_intervals if data.variable_intervals is not None else schema.empty_table("variable_intervals")
        data.variable_intervals = pd.concat([old, typed_table("variable_intervals", iv)], ignore_index=True)
