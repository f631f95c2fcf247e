"""Write a :class:`~popvision_lite.profile.schema.ProfileData` to one ``.pvl`` file (HDF5).

Layout (see ``docs/profile-format.md``)::

    /                         attrs: format, format_version, format_minor, target, run, extra (JSON)
    /tables/<table>/<column>  one 1-D dataset per column; string columns dictionary-encoded
    /arrays/<name>            dense arrays from schema.ARRAYS, chunked + compressed
    /summaries/s<S>_t<T>/{min,mean,max}   block summaries of step_tile_cycles

HDF5 builds the whole file in memory (a Python ``BytesIO``, closed by HDF5 before it is read, in the file
format of HDF5 1.10-1.14 that every supported h5py reads: decision 0201; the image is the compressed file).  The finished image is written with plain ``os.write`` calls to a temporary
file in the target folder, fsynced and moved into place with ``os.replace``, so a killed
writer never leaves a file that looks valid at the target path, and a full disk or other I/O
failure is a Python ``OSError`` (-> ProfileError naming the path), never a failure inside HDF5.  Step x tile arrays are streamed in batches of steps,
so any array-like with ``.shape`` and ``a[i:j]`` slicing (e.g. np.memmap or a lazy
generator) can be written without holding it all in memory.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
from pathlib import Path
from typing import Any

# at import time, not in write_profile: a process that preloads this module (the sweep's fork server)
# then has them ready instead of importing them in every point's process
import h5py
import hdf5plugin  # noqa: F401  (registers the Blosc filter of the writer's compression)
import numpy as np

from popvision_lite.atomic_io import check_destination, make_temp, publish_mode, replace_locked
from popvision_lite.errors import ProfileError
from popvision_lite.profile import phases as phases_mod
from popvision_lite.profile import schema
from popvision_lite.profile.columns import Columns, TableError, cast_column, factorize
from popvision_lite.profile.run_record import RunRecord

# minor versions add optional header keys / columns / tables only.  2.1: run["op_counts"] of pipelined runs (how
# often each op of a per-step ops table runs; docs/profile-format.md "Run keys of training runs").  2.2: the
# "phases" table (profile/phases.py) and run["replicas"] / run["stages"].  3.0 (schema.FORMAT_VERSION): step x
# tile arrays store only their non-zero rows.  3.1: the "variable_intervals" table (variables live in more than one
# interval).  3.2: every byte of a tile is in a variable: a pipelined run lists each IPU's stash (live at every
# liveness step of its stage program, which count its bytes) and its optimizer-state stream buffer (at a liveness
# step of its own, the optimizer's); 3.1 files added those bytes to the memory array only (decision 0270); a host
# term phase stores time_kind "" (the part "host", decision 0271), 3.1 files "sync".  4.0 (schema.FORMAT_VERSION):
# a stored step x tile row spans one IPU's tiles, one row per (step, IPU) holding data, named in "<array>.rows"
# (decision 0400)
FORMAT_MINOR = 0

# step_tile_* storage: chunks of STEP_CHUNK stored rows x one IPU's tiles (a stored row is one IPU's, format 4;
# TILE_CHUNK or write_profile's tile_chunk: narrower, measured in decision 0120).
STEP_CHUNK = 32
TILE_CHUNK = None  # None: one IPU's tiles
# Summary levels (step_block, tile_block), finest first.  Tile blocks are per IPU: the last
# block of each IPU may be shorter.  A tile_block of 0 means "one block per IPU".
SUMMARY_LEVELS: tuple[tuple[int, int], ...] = ((16, 16), (128, 64), (1024, 0))
# summary rows (step blocks) per chunk of a level's min / mean / max datasets
SUMMARY_CHUNK = 256
# Steps per write batch; a multiple of every summary step block so blocks never straddle batches.
WRITE_BATCH = 1024
# Liveness steps per write batch (whole chunks of 64 rows)
LIVE_BATCH = 1024

STEP_TILE_ARRAYS = ("step_tile_cycles", "step_tile_bytes_in", "step_tile_bytes_out")
ROWS_CHUNK = 1 << 14  # (step, IPU) pairs per chunk of an array's "<array>.rows"
AGG_COLUMNS = ("busy_max", "busy_mean", "tiles_active", "bytes_in", "bytes_out")


# In-memory HDF5 image (a BytesIO); the finished image goes to disk in os.write calls of WRITE_CHUNK bytes (see
# docs/decisions/0001-profile-format.md, "Write path", and 0201).
WRITE_CHUNK = 8 << 20
# Oldest and newest HDF5 file format the writer uses: objects as HDF5 1.10 writes them (version 2 B-tree / fixed
# and extensible array chunk indexes, compact headers), nothing newer than HDF5 1.14 reads, so the HDF5 1.14 that
# h5py 3.10 (the floor in pyproject.toml) bundles opens every profile (HDF5 2.0's "latest" datatype and layout
# messages it cannot): decision 0201.
LIBVER = ("v110", "v114")

# Blosc codec and level for bulk arrays ("cname-level"); see docs/decisions/0001-profile-format.md.
COMPRESSION = "lz4-5"


def _compression(spec: str | None = None) -> dict[str, Any]:
    """Blosc via hdf5plugin with ``spec`` ("cname-level", optionally "-noshuffle" / "-bitshuffle"; default
    COMPRESSION, byte shuffle), else gzip."""
    cname, level, *rest = (spec or COMPRESSION).split("-")
    try:
        import hdf5plugin

        shuffle = {"": hdf5plugin.Blosc.SHUFFLE, "noshuffle": hdf5plugin.Blosc.NOSHUFFLE,
                   "bitshuffle": hdf5plugin.Blosc.BITSHUFFLE}[rest[0] if rest else ""]
        return dict(hdf5plugin.Blosc(cname=cname, clevel=int(level), shuffle=shuffle))
    except ImportError:  # pragma: no cover - hdf5plugin is a dependency
        return dict(compression="gzip", compression_opts=4, shuffle=True)


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _dumps(obj) -> str:
    return json.dumps(obj, default=_json_default, sort_keys=True)


def _text(s: str) -> np.bytes_:
    """A text attribute stored as a fixed-length UTF-8 string, inside the (checksummed) object header.

    h5py stores a Python str as a variable-length string in HDF5's global heap, which has no checksum:
    a damaged heap made HDF5 2.0 loop for ever reading the header (found by bench/fuzz_profiles).
    """
    return np.bytes_(s.encode("utf-8"))


def tile_block_edges(num_ipus: int, tiles_per_ipu: int, tile_block: int) -> np.ndarray:
    """Start index of every tile block; blocks restart at each IPU boundary."""
    tb = tiles_per_ipu if tile_block <= 0 else tile_block
    per_ipu = np.arange(0, tiles_per_ipu, tb)
    return (np.arange(num_ipus)[:, None] * tiles_per_ipu + per_ipu[None, :]).ravel()


def level_name(step_block: int, tile_block: int) -> str:
    return f"s{step_block}_t{tile_block}"


def block_summary_of_rows(mn: np.ndarray, sm: np.ndarray, mx: np.ndarray, step_block: int, tile_edges: np.ndarray,
                          n_tiles: int):
    """The summary of :func:`block_summary` from each row's own tile-block minimum, sum (float64) and maximum
    (rows, tile blocks): what an array that knows its rows' block figures without forming the rows gives (the
    emulator's lazy step x tile arrays: ``tile_block_rows``).  The same values: a minimum or maximum in any
    order, and the sums are of integers below 2^53, exact in float64 in any order."""
    rows = mn.shape[0]
    s_edges = np.arange(0, rows, step_block)
    if rows == 0:
        return _step_blocks(np.minimum, mn, step_block), np.zeros((0, len(tile_edges)), np.float32), \
            _step_blocks(np.maximum, mx, step_block)
    s_sizes = np.diff(np.append(s_edges, rows))
    t_sizes = np.diff(np.append(tile_edges, n_tiles))
    mean = np.add.reduceat(sm, s_edges, axis=0) / (s_sizes[:, None] * t_sizes[None, :])
    return _step_blocks(np.minimum, mn, step_block), mean.astype(np.float32), _step_blocks(np.maximum, mx, step_block)


def block_summary(cycles: np.ndarray, step_block: int, tile_edges: np.ndarray):
    """min/sum/max of ``cycles`` (steps, tiles) over blocks; step blocks start at row 0."""
    s_edges = np.arange(0, cycles.shape[0], step_block)
    c = cycles
    mn = np.minimum.reduceat(_step_blocks(np.minimum, c, step_block), tile_edges, axis=1)
    mx = np.maximum.reduceat(_step_blocks(np.maximum, c, step_block), tile_edges, axis=1)
    # sum over tile blocks first, 64 rows at a time, so float64 temporaries stay small
    per_row = np.concatenate([np.add.reduceat(c[r:r + 64], tile_edges, axis=1, dtype=np.float64)
                              for r in range(0, c.shape[0], 64)]) if c.shape[0] else \
        np.zeros((0, len(tile_edges)))
    sm = np.add.reduceat(per_row, s_edges, axis=0) if c.shape[0] else per_row
    s_sizes = np.diff(np.append(s_edges, c.shape[0]))
    t_sizes = np.diff(np.append(tile_edges, c.shape[1]))
    mean = sm / (s_sizes[:, None] * t_sizes[None, :])
    return mn, mean.astype(np.float32), mx


def _step_blocks(ufunc, c: np.ndarray, step_block: int) -> np.ndarray:
    """``ufunc.reduceat(c, np.arange(0, rows, step_block), axis=0)`` for np.minimum / np.maximum: the whole
    blocks as one reduction of a (blocks, step_block, tiles) view, which numpy runs several times faster
    than reduceat over rows (the same values: a minimum or maximum is exact in any order)."""
    rows = c.shape[0]
    full = rows - rows % step_block
    if rows == 0 or full == 0:
        return ufunc.reduceat(c, np.arange(0, rows, step_block), axis=0)
    out = ufunc.reduce(c[:full].reshape(full // step_block, step_block, c.shape[1]), axis=1)
    if full < rows:
        out = np.concatenate([out, ufunc.reduce(c[full:], axis=0, keepdims=True)])
    return out


def _numeric_column(path, table: str, col: str, series, want: str) -> np.ndarray:
    """``series`` (a DataFrame's column) as the schema dtype ``want``; ProfileError when a value does not fit."""
    import pandas as pd

    values = series.to_numpy()
    if values.dtype == object or values.dtype.kind in "USO" or isinstance(series.dtype, pd.CategoricalDtype):
        try:
            values = pd.to_numeric(series, errors="raise").to_numpy()
        except (ValueError, TypeError) as e:
            raise ProfileError(path, f"table '{table}' column '{col}' must be numeric ({want}): {e}") from e
    try:
        return cast_column(table, col, values, want)
    except TableError as e:
        raise ProfileError(path, str(e)) from None


def _frame_columns(path, name: str, df) -> dict:
    """A DataFrame's columns of table ``name`` as the writer stores them: numeric ones in the stored dtype, text
    ones as (int32 codes, categories)."""
    import pandas as pd

    cols = schema.TABLE_COLUMNS[name]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ProfileError(path, f"table '{name}' lacks column(s) {missing}")
    out = {}
    for col in cols:
        series = df[col]
        want = schema.COLUMN_DTYPES[name][col]
        if want != "str":
            out[col] = _numeric_column(path, name, col, series, want)
        elif isinstance(series.dtype, pd.CategoricalDtype):  # already dictionary-encoded
            cats = [str(c) for c in series.cat.categories]
            codes = series.cat.codes.to_numpy().astype(np.int32)
            if (codes < 0).any():  # missing values become ""
                codes = np.where(codes < 0, len(cats), codes)
                cats.append("")
            out[col] = (codes, cats)
        else:
            out[col] = _text_codes(series)
    return out


def _write_table(h5group, name: str, table, path, comp) -> None:
    """Table ``name`` (a ``Columns`` or a DataFrame) into ``h5group``: one dataset per column."""
    cols = schema.TABLE_COLUMNS[name]
    if isinstance(table, Columns):
        stored = {c: factorize(table[c]) if schema.COLUMN_DTYPES[name][c] == "str" else table[c] for c in cols}
    else:
        stored = _frame_columns(path, name, table)
    lengths = {len(table[c]) for c in cols}
    g = h5group.create_group(name)
    g.attrs["columns"] = _text(_dumps(list(cols)))
    g.attrs["rows"] = lengths.pop() if lengths else 0
    for col in cols:
        values = stored[col]
        n = len(values[0]) if isinstance(values, tuple) else len(values)
        opts = comp if n > 1024 else {}
        if not isinstance(values, tuple):
            g.create_dataset(col, data=values, **opts)
            continue
        codes, cats = values
        ds = g.create_dataset(col, data=codes, **opts)
        ds.attrs["encoding"] = _text("dictionary")
        # fixed-length UTF-8 bytes, not variable-length strings (those live in the global heap: see _text)
        enc = [c.encode("utf-8") for c in cats]
        width = max([1, *map(len, enc)])
        g.create_dataset(f"{col}.categories", data=np.array(enc, dtype=f"S{width}"),
                         **(comp if len(enc) > 1024 else {}))


def _text_codes(series) -> tuple[np.ndarray, list[str]]:
    """A text column dictionary-encoded: (int32 codes, the distinct texts in order of first appearance), missing
    values as ""."""
    import pandas as pd

    values = series.to_numpy()
    if values.dtype != object or pd.api.types.infer_dtype(values, skipna=False) != "string":
        # (anything but a column of Python str: each value as its text first)
        values = pd.Series(values, dtype=object).fillna("").astype(str).to_numpy()
    codes, uniq = pd.factorize(values, sort=False)
    return codes.astype(np.int32), [str(c) for c in uniq]


def _as_batch(a, i: int, j: int, path, name: str) -> np.ndarray:
    try:
        out = np.asarray(a[i:j])
    except Exception as e:  # an array-like that fails to produce data
        raise ProfileError(path, f"array '{name}' rows {i}:{j} could not be read: {e}") from e
    return out


def _check_shape(path, name: str, shape, expected) -> None:
    if tuple(shape) != tuple(expected):
        raise ProfileError(path, f"array '{name}' has shape {tuple(shape)}, expected {tuple(expected)}")


def _fill_aggregates(steps, agg: dict[str, np.ndarray]):
    """Fill per-step aggregate columns the producer left out or NaN (a ``Columns`` table has every column: only
    NaN is filled)."""
    if isinstance(steps, Columns):
        new = {}
        for col in AGG_COLUMNS:
            cur = steps[col].astype(np.float64)
            bad = ~np.isfinite(cur)
            if bad.any():
                cur[bad] = agg[col][bad]
            new[col] = cur
        return steps.replace(**new)
    import pandas as pd

    steps = steps.copy()
    for col in AGG_COLUMNS:
        computed = agg[col]
        if col not in steps.columns:
            steps[col] = computed
            continue
        cur = np.array(pd.to_numeric(steps[col], errors="coerce"), dtype=np.float64)
        bad = ~np.isfinite(cur)
        if bad.any():
            cur[bad] = computed[bad]
        steps[col] = cur
    for col, dt in (("busy_max", np.int64), ("tiles_active", np.int32), ("bytes_in", np.int64),
                    ("bytes_out", np.int64)):
        steps[col] = steps[col].astype(dt)
    steps["busy_mean"] = steps["busy_mean"].astype(np.float64)
    return steps


def _aggregates_missing(steps) -> bool:
    """Whether the steps table lacks a per-step aggregate column or holds a NaN in one (the writer then computes
    them from the step x tile rows)."""
    if isinstance(steps, Columns):
        return not all(np.isfinite(steps[c].astype(np.float64, copy=False)).all() for c in AGG_COLUMNS)
    import pandas as pd

    return any(c not in steps.columns or not np.isfinite(pd.to_numeric(steps[c], errors="coerce")
                                                         .to_numpy(np.float64)).all() for c in AGG_COLUMNS)


def _write_image(fd: int, image) -> None:
    """Write ``image`` (bytes) to ``fd`` with plain ``os.write`` calls of at most WRITE_CHUNK bytes, then fsync.

    A full disk, a file size limit or an I/O error surfaces here as Python ``OSError``: HDF5 itself only
    ever writes to memory, so it never sees an I/O failure (HDF5 2.0 crashes the process when a file whose
    write failed on disk is closed or freed).
    """
    view = memoryview(image)
    try:
        done = 0
        while done < len(view):
            done += os.write(fd, view[done:done + WRITE_CHUNK])  # a short write (size limit) just loops
        os.fsync(fd)
    finally:
        view.release()


def run_header(run: dict | None, target: schema.TargetInfo) -> dict:
    """``run`` with ``replicas`` and ``stages`` (IPUs of one replica) set: what every IPU count reads."""
    out = dict(run or {})
    rec = RunRecord.read({k: out[k] for k in ("schedule", "config") if k in out}, ValueError, "run")
    out.setdefault("replicas", rec.replicas_of_run)
    out.setdefault("stages", int(target.num_ipus))
    return out


def checked_record(path, run: dict, target: schema.TargetInfo) -> RunRecord:
    """The run record a profile at ``path`` would store, checked as the reader checks it (``run_record``): a
    producer's value out of its declared bounds is a ProfileError now, not a profile that does not open."""
    try:
        return RunRecord.read(run_header(run, target), lambda problem: ProfileError(path, problem), "run")
    except ValueError as e:
        raise ProfileError(path, str(e)) from None


class _CallerAbort(Exception):
    def __init__(self, inner: BaseException):
        super().__init__(repr(inner))
        self.inner = inner


def _check_inputs(path, data: schema.ProfileData, summary_levels, tile_chunk: int | None) -> int:
    """Check the summary levels, the tile chunk, every array's shape and the run record; returns the tile chunk
    width."""
    checked_record(path, data.run, data.target)
    bad = [sb for sb, _ in summary_levels if sb < 1 or WRITE_BATCH % sb]
    if bad:
        raise ValueError(f"summary step blocks {bad} must divide the write batch of {WRITE_BATCH} steps")
    t = data.target
    tc = tile_chunk or TILE_CHUNK or t.tiles_per_ipu
    if tc < 1 or t.tiles_per_ipu % tc:
        raise ValueError(f"tile chunk width {tc} must divide the {t.tiles_per_ipu} tiles of one IPU")
    n_tiles, n_steps = t.num_tiles, data.num_rows("steps")
    for name in STEP_TILE_ARRAYS:
        _check_shape(path, name, getattr(data, name).shape, (n_steps, n_tiles))
    _check_shape(path, "memory", np.shape(data.memory),
                 (n_tiles, len(schema.MEMORY_CATEGORIES), len(schema.LIVENESS_CLASSES)))
    _check_shape(path, "liveness_tile_bytes", np.shape(data.liveness_tile_bytes),
                 (data.num_rows("liveness_steps"), n_tiles))
    return tc


def _write_header(f, data: schema.ProfileData) -> None:
    f.attrs["format"] = _text(schema.FORMAT_NAME)
    f.attrs["format_version"] = schema.FORMAT_VERSION
    f.attrs["format_minor"] = FORMAT_MINOR
    f.attrs["complete"] = False
    f.attrs["target"] = _text(_dumps(data.target.to_dict()))
    f.attrs["run"] = _text(_dumps(run_header(data.run, data.target)))
    f.attrs["extra"] = _text(_dumps(data.extra or {}))


class _StepTileWriter:
    """The step x tile arrays, their per-step aggregates and the summary levels, written batch by batch.

    Each array stores a row of ONE IPU's tiles for every (step, IPU) whose tiles hold a non-zero value, in (step,
    IPU) order, and ``<array>.rows`` ((rows, 2) int64: step, IPU) names them (format 4): a step of a pipelined run
    runs on one IPU, a tile moves bytes only in exchange and stream steps, and no tile is busy in a sync, so the
    file holds (and a window decodes) only the IPUs' rows that hold data (decisions 0120, 0400).  Which IPU a row is
    on comes from the data, not the steps table: a step of every IPU (ipu -1) stores each IPU's row that holds
    data, and bytes a step of one IPU lands on another IPU's tiles are kept."""

    def __init__(self, f, data: schema.ProfileData, summary_levels, step_chunk: int, tile_chunk: int, comp):
        t = data.target
        self.data, self.target = data, t
        self.n_tiles, self.n_steps = t.num_tiles, data.num_rows("steps")
        self.tpi, self.n_ipus = t.tiles_per_ipu, t.num_ipus
        self.arrays = f.create_group("arrays")
        chunk = (max(1, min(step_chunk, max(self.n_steps, 1))), tile_chunk)
        self.dsets = {name: self.arrays.create_dataset(name, shape=(0, self.tpi), maxshape=(None, self.tpi),
                                                       dtype=np.uint32, chunks=chunk, **comp)
                      for name in STEP_TILE_ARRAYS}
        self.keys: dict[str, list[np.ndarray]] = {name: [] for name in STEP_TILE_ARRAYS}  # (n, 2) per batch
        self.levels = [(sb, tb) for sb, tb in summary_levels]
        summ = f.create_group("summaries")
        summ.attrs["levels"] = _text(_dumps(self.levels))
        self.sdsets = {}
        self.edges = {}  # (step block, tile block) -> the level's tile edges, worked out once
        # each level's summary rows of the batches written so far that do not yet fill a chunk of its datasets:
        # a chunk is stored (compressed) once, whole, not once per batch that adds rows to it (_summary_rows)
        self.pending: dict[tuple[int, int], list] = {}
        self.chunk_rows: dict[tuple[int, int], int] = {}
        self.summary_done = dict.fromkeys(self.levels, 0)
        for sb, tb in self.levels:
            edges = self.edges[(sb, tb)] = tile_block_edges(t.num_ipus, t.tiles_per_ipu, tb)
            nsb = -(-self.n_steps // sb)
            g = summ.create_group(level_name(sb, tb))
            g.attrs["step_block"] = sb
            g.attrs["tile_block"] = tb
            g.create_dataset("tile_edges", data=edges.astype(np.int64))
            self.chunk_rows[(sb, tb)] = min(nsb, SUMMARY_CHUNK)
            opts = dict(chunks=(min(nsb, SUMMARY_CHUNK), len(edges)), **comp) if nsb else {}
            for stat, dt in (("min", np.uint32), ("mean", np.float32), ("max", np.uint32)):
                self.sdsets[(sb, tb, stat)] = g.create_dataset(stat, shape=(nsb, len(edges)), dtype=dt, **opts)
            self.pending[(sb, tb)] = []
        self.agg = {c: np.zeros(self.n_steps, dtype=np.float64) for c in AGG_COLUMNS}
        # the steps table's aggregates are only filled where the producer left them out or NaN (_fill_aggregates):
        # computed from the rows only then
        self.need_agg = _aggregates_missing(data.table("steps"))
        # an array that forms its rows of one IPU's tiles holding data, and each row's tile-block figures, without
        # forming rows over the replica (the emulator's StepTileArray: rows of step templates) is written from
        # those; the file is the same
        self.lazy = not self.need_agg and all(
            callable(getattr(getattr(data, n), "ipu_rows", None)) for n in STEP_TILE_ARRAYS) and callable(
            getattr(data.step_tile_cycles, "tile_block_rows", None))

    def _store(self, name: str, steps: np.ndarray, ipus: np.ndarray, rows: np.ndarray) -> None:
        """Append the rows of one IPU's tiles of (step, IPU) pairs ``steps``, ``ipus`` (in (step, IPU) order) to
        array ``name``."""
        if len(steps):
            ds = self.dsets[name]
            r = ds.shape[0]
            ds.resize(r + len(steps), axis=0)
            ds[r:] = rows
            self.keys[name].append(np.stack([steps, ipus], axis=1).astype(np.int64, copy=False))

    def _ipu_rows_of_dense(self, i: int, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, IPUs, rows) of the IPUs' rows of the dense rows ``b`` of steps i.. that hold data."""
        b3 = b.reshape(len(b), self.n_ipus, self.tpi)
        keep = b3.any(axis=2) if self.tpi else np.zeros(b3.shape[:2], np.bool_)
        s, u = np.nonzero(keep)  # row-major: step order, then IPU order
        return s.astype(np.int64) + i, u.astype(np.int64), b3[s, u]

    def _write_lazy_batch(self, path, i: int, j: int) -> None:
        for name in STEP_TILE_ARRAYS:
            arr = getattr(self.data, name)
            try:  # formed per IPU from the step templates (the emulator's StepTileArray.ipu_rows)
                steps, ipus, rows = arr.ipu_rows(i, j, self.tpi)
            except Exception as e:  # an array-like that fails to produce data
                raise ProfileError(path, f"array '{name}' rows {i}:{j} could not be read: {e}") from e
            steps, ipus = np.asarray(steps, np.int64), np.asarray(ipus, np.int64)
            _check_shape(path, f"{name}[{i}:{j}] (IPU rows with data)", rows.shape, (len(steps), self.tpi))
            self._store(name, steps, ipus, rows.astype(np.uint32, copy=False))
        for sb, tb in self.levels:
            edges = self.edges[(sb, tb)]
            self._summary_rows(sb, tb, i, *block_summary_of_rows(
                *self.data.step_tile_cycles.tile_block_rows(i, j, edges), sb, edges, self.n_tiles))

    def _batch_array(self, path, name: str, i: int, j: int) -> np.ndarray:
        b = _as_batch(getattr(self.data, name), i, j, path, name)
        _check_shape(path, f"{name}[{i}:{j}]", b.shape, (j - i, self.n_tiles))
        if b.dtype != np.uint32:
            if b.size and (b.min() < 0 or b.max() > np.iinfo(np.uint32).max):
                raise ProfileError(path, f"array '{name}' has values outside uint32 in steps {i}:{j}")
            b = b.astype(np.uint32)
        self._store(name, *self._ipu_rows_of_dense(i, b))
        return b

    def write_batch(self, path, i: int, j: int) -> None:
        if self.lazy:
            self._write_lazy_batch(path, i, j)
            return
        batch = {name: self._batch_array(path, name, i, j) for name in STEP_TILE_ARRAYS}
        cyc, agg = batch["step_tile_cycles"], self.agg
        agg["busy_max"][i:j] = cyc.max(axis=1) if self.n_tiles else 0
        agg["busy_mean"][i:j] = cyc.mean(axis=1, dtype=np.float64) if self.n_tiles else 0
        agg["tiles_active"][i:j] = np.count_nonzero(cyc, axis=1)
        agg["bytes_in"][i:j] = batch["step_tile_bytes_in"].sum(axis=1, dtype=np.int64)
        agg["bytes_out"][i:j] = batch["step_tile_bytes_out"].sum(axis=1, dtype=np.int64)
        for sb, tb in self.levels:
            self._summary_rows(sb, tb, i, *block_summary(cyc, sb, self.edges[(sb, tb)]))

    def _summary_rows(self, sb: int, tb: int, i: int, mn: np.ndarray, mean: np.ndarray, mx: np.ndarray) -> None:
        """Level (sb, tb)'s summary rows of the batch from step ``i`` (batches come in step order, each a whole
        number of step blocks but the last): kept until they fill whole chunks of the level's datasets, which are
        then stored in one write each (``flush_summaries`` stores the rest).  The same values in the same chunks as
        writing each batch's rows at once; HDF5 then compresses every chunk once instead of compressing a
        partly filled chunk, reading it back and compressing it again for each batch that adds rows to it (a
        chunk of the finest level spans 4 batches, and is larger than HDF5's default chunk cache)."""
        pend = self.pending[(sb, tb)]
        pend.append((mn, mean, mx))
        held = sum(len(p[0]) for p in pend)
        whole = held - held % self.chunk_rows[(sb, tb)] if self.chunk_rows[(sb, tb)] else 0
        if whole:
            self._store_summaries(sb, tb, whole)

    def _store_summaries(self, sb: int, tb: int, rows: int) -> None:
        """Store the first ``rows`` pending summary rows of level (sb, tb); keep the rest pending."""
        pend = self.pending[(sb, tb)]
        stats = [np.concatenate([p[k] for p in pend]) if len(pend) > 1 else pend[0][k] for k in range(3)]
        a = self.summary_done[(sb, tb)]
        for stat, v in zip(("min", "mean", "max"), stats, strict=True):
            self.sdsets[(sb, tb, stat)][a:a + rows] = v[:rows]
        self.summary_done[(sb, tb)] = a + rows
        rest = tuple(v[rows:] for v in stats)
        pend[:] = [rest] if len(rest[0]) else []

    def flush_summaries(self) -> None:
        """Store every level's pending summary rows (after the last batch)."""
        for sb, tb in self.levels:
            held = sum(len(p[0]) for p in self.pending[(sb, tb)])
            if held:
                self._store_summaries(sb, tb, held)

    def finish(self, comp) -> None:
        """The summaries' last rows; the (step, IPU) of the stored rows, the memory and liveness arrays."""
        self.flush_summaries()
        arrays, data = self.arrays, self.data
        for name, parts in self.keys.items():  # written whole: the reader reads it whole, on the first window
            keys = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)
            opts = dict(chunks=(min(len(keys), ROWS_CHUNK), 2), **comp) if len(keys) else {}
            arrays.create_dataset(schema.rows_of(name), data=keys, **opts)
        arrays.create_dataset("memory", data=np.asarray(data.memory, dtype=np.int64), **comp)
        live = data.liveness_tile_bytes
        n, width = np.shape(live)
        if not (n and width):
            arrays.create_dataset("liveness_tile_bytes", data=np.zeros((n, width), np.uint32))
            return
        # streamed in batches of whole chunks, as the step x tile arrays are: an array-like (a pipelined run's
        # block rows) is never formed whole
        rows = max(1, min(64, n))
        ds = arrays.create_dataset("liveness_tile_bytes", shape=(n, width), dtype=np.uint32,
                                   chunks=(rows, self.target.tiles_per_ipu), **comp)
        step = rows * max(1, LIVE_BATCH // rows)
        for i in range(0, n, step):
            j = min(n, i + step)
            b = np.asarray(live[i:j])
            ds[i:j] = b if b.dtype == np.uint32 else b.astype(np.uint32)


def _write_tables(f, path, data: schema.ProfileData, agg, comp) -> None:
    tables = f.create_group("tables")
    steps = _fill_aggregates(data.table("steps"), agg)
    phases = data.table("phases")
    if phases is None:
        try:
            rec = checked_record(path, data.run, data.target)
            phases = phases_mod.phase_columns(rec.schedule, steps, data.target.clock_hz)
        except ValueError as e:
            raise ProfileError(path, f"table 'phases' cannot be built: {e}") from e
    for name in schema.TABLE_COLUMNS:
        df = steps if name == "steps" else phases if name == "phases" else data.table(name)
        if df is None and name == "variable_intervals":
            df = Columns.empty(name)
        if df is None:
            raise ProfileError(path, f"table '{name}' is missing (None)")
        _write_table(tables, name, df, path, comp)


def _file_image(path, data: schema.ProfileData, summary_levels, step_chunk: int, tile_chunk: int,
                compression: str | None, progress) -> memoryview:
    """The whole profile as an HDF5 file image in memory: a BytesIO that HDF5 writes through h5py's file-object
    driver and closes like a file on disk, so the image is a finished file (the core driver's
    ``get_file_image`` of a file still open gives HDF5 1.14 a superblock whose checksum fails: decision 0201)."""
    comp = _compression(compression)
    buf = io.BytesIO()
    with h5py.File(buf, "w", libver=LIBVER) as f:
        _write_header(f, data)
        writer = _StepTileWriter(f, data, summary_levels, step_chunk, tile_chunk, comp)
        n_steps = writer.n_steps
        for i in range(0, n_steps, WRITE_BATCH):
            j = min(n_steps, i + WRITE_BATCH)
            writer.write_batch(path, i, j)
            if progress is not None:
                try:
                    progress(j, n_steps)
                except BaseException as e:  # cancel: clean up in the caller, re-raise as is
                    raise _CallerAbort(e) from e
        writer.finish(comp)
        _write_tables(f, path, data, writer.agg, comp)
        f.attrs["complete"] = True
    return buf.getbuffer()  # no copy; the buffer is freed with the last reference to the view


def _fsync_folder(folder) -> None:
    """Make the rename itself durable."""
    with contextlib.suppress(OSError):
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _write_error(path, e: Exception) -> ProfileError:
    if isinstance(e, OSError):
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return ProfileError(path, "disk full while writing the profile")
        if e.errno == errno.EFBIG:
            return ProfileError(path, "file size limit reached while writing the profile")
        return ProfileError(path, f"cannot write profile: {e}")
    # anything else from h5py/HDF5 or a producer's data (e.g. out of memory for the image): name the file
    return ProfileError(path, f"cannot write profile: {type(e).__name__}: {e}")


def write_profile(path, data: schema.ProfileData, *, summary_levels=SUMMARY_LEVELS,
                  step_chunk: int = STEP_CHUNK, tile_chunk: int | None = None, compression: str | None = None,
                  progress=None) -> Path:
    """Write ``data`` atomically to ``path`` (a ``.pvl`` file); returns the path.

    ``progress(done_steps, total_steps)`` is called after each batch of steps when given; an
    exception it raises (e.g. a GUI worker's cancel) stops the write, removes the temporary file and
    propagates unchanged.  ``step_chunk`` x ``tile_chunk`` (a divisor of one IPU's tiles; default TILE_CHUNK, else
    the IPU's) is the chunk of the step x tile arrays and ``compression`` the Blosc codec ("cname-level[-noshuffle|
    -bitshuffle]", default COMPRESSION): the options ``bench.chunk_layout`` compares.
    Raises :class:`ProfileError` for inconsistent data or an unwritable destination.
    """
    path, folder = check_destination(path, example="run.pvl")
    tc = _check_inputs(path, data, summary_levels, tile_chunk)

    # the temp file is made first so an unwritable folder fails before any work; it stays empty until the
    # in-memory image is complete
    fd, tmp_name = make_temp(path, folder)  # also removes a killed writer's stale temp files
    tmp = Path(tmp_name)
    publish_mode(fd)  # mkstemp's 0600 -> 0666 less umask, as a plain open() would give
    ok = False
    image = None
    try:
        image = _file_image(path, data, summary_levels, step_chunk, tc, compression, progress)
        _write_image(fd, image)
        image.release()
        image = None
        fd, locked = -1, fd
        replace_locked(locked, tmp, path)  # closes it, renamed or not
        ok = True
        _fsync_folder(folder)
    except _CallerAbort as e:
        raise e.inner from None
    except ProfileError:
        raise
    except Exception as e:
        raise _write_error(path, e) from e
    finally:
        image = None  # an error's traceback keeps this frame alive: drop the image now
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        if not ok:
            with contextlib.suppress(OSError):
                tmp.unlink()
    return path
