"""Lazy reader of ``.pvl`` profiles: ``open_profile(path) -> Profile``.

Opening reads and checks only the header (attributes and dataset shapes); tables are
read on first access and cached; step x tile data is read by window.  Every problem with
the file is raised as a :class:`~popvision_lite.errors.ProfileError` subclass naming the
file and what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

import numpy as np
import pandas as pd

from popvision_lite.errors import ArgumentTypeError, ProfileError
from popvision_lite.profile import consistency, h5safety, header, public, schema, step_tiles
from popvision_lite.profile.run_record import RunRecord, Schedule
from popvision_lite.profile.step_tiles import STEP_TILE_ARRAYS, StepTileWindow, _Liveness, _Memory, _StepTiles

__all__ = ["Profile", "StepTileWindow", "open_profile", "preload"]

log = logging.getLogger(__name__)

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
CHUNK_CACHE_BYTES = 32 << 20



def preload() -> None:
    """Import h5py and register the compression filters now (~0.5 s cold), e.g. while a start page
    shows, so opening the first profile does not pay for it."""
    _import_h5()


def _vfd_handle(f) -> int | None:
    """A descriptor of its own on the file h5py has open (``f``, the default sec2 driver), or None."""
    try:
        h = f.id.get_vfd_handle()
    except Exception:  # noqa: BLE001 - another driver: the chunk checks open the path (ChunkGuard)
        return None
    return os.dup(h) if isinstance(h, int) and h >= 0 else None


def _identity(fd: int | None, st) -> tuple | None:
    """Which file, in which state, this profile read (None without a descriptor): its device, inode, size and
    change times, and a digest of its first and last 64 KiB (HDF5 keeps its superblock and metadata there), so
    a file rewritten in place within one timestamp tick still differs (gui/state/analysis_store.py)."""
    if fd is None:
        return None
    n = 1 << 16
    head, tail = os.pread(fd, n, 0), os.pread(fd, n, max(0, st.st_size - n))
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
            hashlib.blake2b(head + tail, digest_size=16).hexdigest())


def _import_h5():
    import h5py

    try:  # registers the Blosc/zstd filters with HDF5
        import hdf5plugin  # noqa: F401
    except Exception:  # pragma: no cover
        pass
    return h5py


def _format_hint(e: Exception) -> str:
    """What to do when this HDF5 library is older than the file format (HDF5 1.14 reading a profile that
    HDF5 2.0 wrote with its newest messages: every profile written before decision 0201), else ''."""
    import h5py

    if "bad version number" not in str(e) or h5py.version.hdf5_version_tuple >= (2, 0, 0):
        return ""
    return (f"; the file uses a newer HDF5 file format than this h5py {h5py.version.version} (HDF5 "
            f"{h5py.version.hdf5_version}) reads - profiles written by popvision-lite before decision 0201 need "
            "HDF5 2.0: pip install 'h5py>=3.16'")


class Profile:
    """One open profile file.  See docs/architecture.md for the API."""

    def __init__(self, path):
        self.path = Path(path)
        self._lock = threading.RLock()
        self._f = None
        self._tables: dict[str, pd.DataFrame] = {}  # stored form
        self._public: dict[str, pd.DataFrame] = {}  # notebook form (profile/public.py)
        self._safe = None
        self._tiles: pd.DataFrame | None = None
        self._record: RunRecord | None = None
        self._open()
        self.memory = _Memory(self)
        self.liveness = _Liveness(self)
        self.step_tiles = _StepTiles(self)

    # ---- opening and validation -------------------------------------------------------
    def _err(self, problem: str) -> ProfileError:
        return ProfileError(self.path, problem)

    def _open(self) -> None:
        p = self.path
        if p.is_dir():
            raise self._err("is a directory, not a profile file")
        # a FIFO, device or socket is refused before anything opens it (opening a FIFO blocks for ever)
        st = h5safety.check_regular_file(p, "profile file", err=self._err)
        head = h5safety.read_head(p, 8, self._err)
        if len(head) == 0:
            raise self._err("file is empty (0 bytes); not a popvision-lite profile")
        if head != HDF5_SIGNATURE:
            raise self._err("not a popvision-lite profile (no HDF5 signature; expected a .pvl file)")
        h5py = _import_h5()
        try:
            # no chunk cache at first: a read decodes each chunk into one reused buffer; a dataset whose
            # chunks are read again (a scrolled window) is reopened with one (``_chunk_source``)
            self._f = h5py.File(p, "r", locking=False, rdcc_nbytes=0)
        except Exception as e:  # truncated / corrupt HDF5
            raise self._err(f"cannot open profile, the file is truncated or corrupt ({type(e).__name__}: {e})"
                            + _format_hint(e)) from e
        # the chunk checks read the file HDF5 has open (its descriptor), not the path again: a writer may rename
        # another profile onto the path meanwhile (an atomic replace), and HDF5's chunk addresses are this file's
        fd = _vfd_handle(self._f)
        self._chunks = h5safety.ChunkGuard(self._err, p, fd=fd)
        if fd is not None:
            st = os.fstat(fd)  # the size of the file open, for the same reason
        self.identity = _identity(fd, st)
        self._cached: dict = {}
        self._codes: dict[tuple[str, str], np.ndarray] = {}  # (table, text column) -> its dictionary codes
        try:
            # before any attribute or data is read: no link leading outside the file; each dataset is
            # checked (no undocumented filter or storage, no claim beyond what it stores) before its
            # first use, here for those the header check needs and the tables' when they are read
            self._names = h5safety.check_links(self._f, self._err)
            self._safe = h5safety.DatasetGuard(self._f, st.st_size, self._err, p)
            self._check_header()
        except ProfileError:
            self.close()
            raise
        except Exception as e:  # h5py / HDF5 errors from damaged metadata
            self.close()
            raise self._err(f"cannot read the profile's structure, the file is corrupt "
                            f"({type(e).__name__}: {e})" + _format_hint(e)) from e

    def _check_header(self) -> None:
        try:
            attrs = dict(self._f.attrs)
        except Exception as e:
            raise self._err(f"header attributes unreadable: {e}{_format_hint(e)}") from e
        h = header.read_header(attrs, self.path, self._err)
        self.format_version, self.format_minor = h.format_version, h.format_minor
        self.target, self.run, self.extra = h.target, h.run, h.extra

        # structure: every group, table and array present with consistent shapes; a table's columns are
        # checked when its row count is first needed (the step x tile arrays need steps' and
        # liveness_steps' now, every table's when it is read)
        self._stored_tables = header.stored_tables(self._names, self._err)
        nt = self.target.num_tiles
        arrays = {name: self._array_dataset(name) for name in schema.ARRAYS}  # checked before any table
        self._counts = _RowCounts(self._table_rows)
        n_steps = self._counts["steps"]
        expect = header.array_shapes(nt, n_steps, self._counts["liveness_steps"])
        self._shapes: dict[str, tuple[int, ...]] = {}
        # format 3: a step x tile array holds the steps its column of "step_tile_stored" marks; the marks are
        # read on the first read of such an array, which checks that each array has one row per marked step
        self._rows: dict[str, np.ndarray] = {}
        self._mask = None
        # format 4: a step x tile array's stored rows are one IPU's tiles, named by (step, IPU) in "<array>.rows"
        self._ipu_keys: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if h.format_version == 3:
            header.check_stored_rows(self._names, self._safe, n_steps, self._err)
        for name, shape in expect.items():
            header.check_array(name, arrays[name], shape, h.format_version, nt, self._err, self.target.tiles_per_ipu)
            if h.format_version >= 4 and name in STEP_TILE_ARRAYS:
                header.check_ipu_rows(self._names, self._safe, name, tuple(arrays[name].shape), self._err)
            self._shapes[name] = shape

    def _array_dataset(self, name: str):
        path = f"arrays/{name}"
        if path not in self._names:
            raise self._err(f"array '{name}' is not a dataset")
        ds = self._safe.stored(path)  # its shape and dtype checked here; h5py's object made when it is read
        if ds.shape is None:
            raise self._err(f"array '{name}' is not a dataset")
        return ds

    def _table_rows(self, name: str) -> int:
        """Rows of table ``name``: its columns present and 1-D, all of one length.  The first column is
        checked in full (a row count beyond what it stores is refused here); the others' lengths come
        from their dataspaces, their stored data is checked when they are read."""
        lengths = set()
        for i, col in enumerate(schema.TABLE_COLUMNS[name]):
            path = f"tables/{name}/{col}"
            if path not in self._names:
                raise self._err(f"table '{name}' lacks column '{col}'")
            shape = self._safe.stored(path).shape if i == 0 else self._safe.shape(path)
            if shape is None or len(shape) != 1:
                raise self._err(f"table '{name}' column '{col}' is not a 1-D dataset")
            lengths.add(shape[0])
        if len(lengths) > 1:
            raise self._err(f"table '{name}' has columns of different lengths {sorted(lengths)}")
        return lengths.pop() if lengths else 0

    # ---- low-level reads ----------------------------------------------------------------
    def _guard(self, fn, what: str):
        if self._f is None:
            raise self._err("profile is closed")
        with self._lock:
            try:
                return fn()
            except ProfileError:
                raise
            except Exception as e:
                raise self._err(f"cannot read {what}: the file is truncated or corrupt "
                                f"({type(e).__name__}: {e})") from e

    def _chunk_source(self, path: str, ranges) -> object:
        """The dataset at ``path`` to read ``ranges`` ([(lo, hi)] per axis) through, the chunks they touch
        checked.  The first read of a chunk goes through the plain dataset (no chunk cache: the decoded
        chunk lands in one buffer HDF5 reuses); once a read comes back to chunks read before, as a
        scrolled window does, the dataset is reopened with a CHUNK_CACHE_BYTES chunk cache and read
        through that from then on.  Filling a cache costs fresh memory for every decoded chunk (the
        page faults are a third of a one-off 600-step window's CPU time), which only pays when chunks
        are read again."""
        ds = self._safe.get(path)
        cached = self._cached.get(path)
        if cached is None and self._chunks.seen(path, ranges):
            import h5py

            dapl = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
            dapl.set_chunk_cache(10007, CHUNK_CACHE_BYTES, 0.75)
            cached = self._cached[path] = h5py.Dataset(h5py.h5d.open(self._f.id, path.encode(), dapl))
        self._chunks.check(ds, path, ranges)
        return ds if cached is None else cached

    def _shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def _read_array(self, name: str) -> np.ndarray:
        def read():
            ds = self._safe.get(f"arrays/{name}")
            self._chunks.check(ds, f"arrays/{name}")
            return ds[()]

        return self._guard(read, f"array '{name}'")

    def _tile_edges(self, g, name: str) -> np.ndarray:
        edges = np.asarray(self._read_whole(self._safe.get(name), name))
        nt = self.target.num_tiles
        if (edges.ndim != 1 or edges.dtype.kind not in "iu" or len(edges) == 0 or edges[0] != 0
                or (np.diff(edges) <= 0).any() or edges[-1] >= nt):
            raise self._err(f"'{name}' are not increasing tile indices from 0 below {nt}; the file is corrupt")
        return edges.astype(np.int64)

    def _read_whole(self, ds, name: str):
        """All of a (small) dataset, its chunks (or its strings' size) checked before it is decoded."""
        self._chunks.check(ds, name)
        self._safe.check_vlen_heap(ds, name)
        return h5safety.read_all(ds)

    def _read_rows(self, name: str, start: int, stop: int, tiles=None) -> np.ndarray:
        return step_tiles.read_rows(self, name, start, stop, tiles)

    def _stored_rows(self, name: str) -> np.ndarray | None:
        """Step index of each stored row of step x tile array ``name`` (format 3), or None when every step
        is stored (older files, liveness).  The first call reads ``arrays/step_tile_stored`` and checks it
        against the three arrays' rows."""
        if self.format_version != 3 or name not in STEP_TILE_ARRAYS:
            return None
        if self._mask is None:
            path = f"arrays/{schema.STORED_ROWS}"
            ds = self._safe.get(path)
            if ds.dtype.kind != "b":
                raise self._err(f"array '{schema.STORED_ROWS}' has dtype {ds.dtype}, expected bool")
            mask = np.asarray(self._read_whole(ds, path), dtype=np.bool_)
            for arr, n in zip(STEP_TILE_ARRAYS, mask.sum(axis=0), strict=True):
                shape = tuple(self._safe.get(f"arrays/{arr}").shape)
                if shape[0] != n:
                    full = self._shapes[arr]
                    raise self._err(f"array '{arr}' has shape {shape}, expected {(int(n), full[1])} (one row per "
                                    f"step marked in '{schema.STORED_ROWS}', of {full}: steps rows x target tiles)")
            self._mask = mask
        rows = self._rows.get(name)
        if rows is None:
            rows = self._rows[name] = np.flatnonzero(self._mask[:, STEP_TILE_ARRAYS.index(name)])
        return rows

    def _ipu_rows(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(step, IPU) of each stored row of step x tile array ``name`` (format 4), or None (older files,
        liveness).  Read and checked on the first call: steps in range, IPUs of the target, strictly increasing."""
        if self.format_version < 4 or name not in STEP_TILE_ARRAYS:
            return None
        got = self._ipu_keys.get(name)
        if got is None:
            got = self._ipu_keys[name] = step_tiles.check_ipu_keys(self, name)
        return got

    def _summary_levels(self) -> list[tuple[int, int]]:
        def read():
            levels = json.loads(header.as_str(self._f["summaries"].attrs["levels"]))
            ok = isinstance(levels, list) and len(levels) > 0 and all(
                isinstance(x, list) and len(x) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                            for v in x) and x[0] > 0 and x[1] >= 0
                for x in levels)
            if not ok:
                raise self._err(f"summary levels {levels!r} are not a list of [step_block > 0, tile_block >= 0]")
            return [(int(a), int(b)) for a, b in levels]

        return self._guard(read, "summary levels")

    def _summary_group(self, step_block: int, tile_block: int):
        from popvision_lite.profile.writer import level_name

        if (step_block, tile_block) not in self.step_tiles.levels:
            raise ProfileError(self.path, f"no stored summary level ({step_block}, {tile_block}); "
                               f"stored levels are {self.step_tiles.levels}")
        name = level_name(step_block, tile_block)
        return self._guard(lambda: self._f["summaries"][name], f"summary group '{name}'")

    def _read_table(self, name: str) -> pd.DataFrame:
        def read():
            n = self._counts[name]  # the table's columns checked, all of one length
            if name == "phases" and n > consistency.MAX_PHASES:  # refused before any row is read
                raise self._err(f"table 'phases' has {n:,} rows; a training step has at most "
                                f"{consistency.MAX_PHASES} phases")
            data = {}
            for col in schema.TABLE_COLUMNS[name]:
                # each column through HDF5's low-level API (h5safety.Stored), checked as h5py's objects were
                ds = self._safe.stored(f"tables/{name}/{col}")
                is_dict = header.as_str(h5safety.attr(ds, "encoding")) == "dictionary"
                cpath = f"tables/{name}/{col}.categories"
                if is_dict and cpath not in self._names:
                    raise self._err(f"table '{name}' column '{col}' lacks its categories")
                vals = self._read_whole(ds, f"tables/{name}/{col}")
                want = schema.COLUMN_DTYPES[name][col]
                if (want == "str") != bool(is_dict):
                    raise self._err(f"table '{name}' column '{col}' has dtype {vals.dtype}"
                                    f"{' (text)' if is_dict else ''}, expected {want}")
                if is_dict:
                    cds = self._safe.stored(cpath)
                    self._chunks.check(cds, cpath)
                    self._safe.check_vlen_heap(cds, cpath)
                    cats = h5safety.read_text(cds, "utf-8")  # fixed-length UTF-8 (or old vlen)
                    cats = np.asarray(cats, dtype=object)
                    consistency.check_categories(name, col, cats, self._err)
                    if vals.size and (vals.min() < 0 or vals.max() >= len(cats)):
                        raise self._err(f"table '{name}' column '{col}' has codes outside its categories")
                    if len(cats) and len(pd.unique(cats)) == len(cats):  # codes one-to-one with the texts
                        self._codes[(name, col)] = vals
                    vals = _expand(cats, vals) if len(cats) else np.array([""] * len(vals), dtype=object)
                elif vals.dtype.kind not in consistency.NUMERIC_KINDS:
                    raise self._err(f"table '{name}' column '{col}' has unsupported dtype {vals.dtype}, "
                                    f"expected {want}")
                else:
                    vals = consistency.checked_numbers(name, col, vals, want, self.target, self._err)
                data[col] = vals
            # the columns are arrays of their own (read, cast or decoded here): no copy into consolidated blocks
            df = pd.DataFrame(data, columns=list(schema.TABLE_COLUMNS[name]), copy=False)
            if name == "steps" and len(df) and (df["end_cycle"] < df["start_cycle"]).any():
                i = int(np.flatnonzero((df["end_cycle"] < df["start_cycle"]).to_numpy())[0])
                raise self._err(f"table 'steps' row {i}: end_cycle is before start_cycle")
            return df

        return self._guard(read, f"table '{name}'")

    def table(self, name: str) -> pd.DataFrame:
        """Table ``name`` (any of ``schema.TABLES``) in its notebook form (``profile/public.py``): index = its id
        column (``step``, ``op_id``, ... ; row numbers for ``vertices``, ``variable_tiles``,
        ``variable_intervals``), ``<NA>`` for none, quantities int64 / float64, snake_case names with units.
        A fresh shallow copy each time: editing it never changes what the next call (or a view) reads."""
        self._check_name(name)
        t = self._public.get(name)
        if t is None:
            t = self._public[name] = public.public(name, self.stored_table(name), self._public_extra(name))
        return t.copy(deep=False)

    def stored_table(self, name: str) -> pd.DataFrame:
        """Table ``name`` as the file stores it, which the analyses and views read: the stored columns and
        dtypes (``schema.COLUMN_DTYPES``, -1 for none) plus ``schema.DERIVED_COLUMNS``, a RangeIndex equal to
        the id column (``tiles``: ``tile``, ``ipu``, ``tile_in_ipu``, ``capacity_bytes``; ``memory_by_tile``:
        Poplar's category names, ``always_live``, ``not_always_live``, ``total``, ``capacity``,
        ``over_capacity``).  A shallow copy (an edit never reaches the cache)."""
        self._check_name(name)
        if name == "tiles":
            return self._stored_tiles().copy(deep=False)
        if name == "memory_by_tile":
            return self.memory._stored_by_tile()
        if name not in self._tables:
            if name not in self._stored_tables:  # an optional table an older writer did not store
                self._tables[name] = self._rebuilt_table(name)
                return self._tables[name].copy(deep=False)
            df = self._read_table(name)
            # before any view or analysis sees it (the row counts of the tables it refers to are read here)
            codes = {c: self._codes.pop((t, c)) for (t, c) in list(self._codes) if t == name}  # used once
            self._guard(lambda: consistency.check_table(name, df, self._counts, self._err, self.target.num_tiles,
                                                        codes), f"table '{name}'")
            self._check_between(name, df)
            self._tables[name] = _with_derived(name, df, self.target)
        # a shallow copy: free under pandas' copy-on-write, and an edit of the returned frame never reaches the
        # cached table that every later call (and every view) reads
        return self._tables[name].copy(deep=False)

    def _check_name(self, name) -> None:
        if not isinstance(name, str):
            raise ArgumentTypeError(f"table name must be text (one of {', '.join(schema.TABLES)}), got {type(name).__name__}")
        if name not in schema.TABLES:
            raise ProfileError(self.path, f"unknown table '{name}'; tables are {', '.join(schema.TABLES)}")

    def _public_extra(self, name: str) -> dict | None:
        """The columns the notebook form adds to a stored table: the steps' weights (``runs``: how many times the
        stored step runs per training step, ``profile/phases.step_runs``, the weighting of every total) and
        the IPU time they stand for."""
        if name != "steps":
            return None
        from popvision_lite.profile.phases import step_runs

        steps = self.stored_table("steps")
        runs, _ = step_runs(self.stored_table("phases"), steps, self.target.num_ipus)
        lanes = np.where(steps["ipu"].to_numpy(np.int64) < 0, self.target.num_ipus, 1)
        ipu_cycles = steps["cycles"].to_numpy(np.float64) * lanes * runs
        return {"runs": runs, "ipu_cycles": ipu_cycles, "ipu_seconds": ipu_cycles / float(self.target.clock_hz)}

    def _check_between(self, name: str, df: pd.DataFrame) -> None:
        """Checks of a table against the run record or another table (consistency.check_phases / check_intervals)."""
        if name == "phases":
            consistency.check_phases(df, self._step_cycles(), self._err)
        elif name == "variable_intervals":
            consistency.check_intervals(df, self.stored_table("variables"), self._err)

    def _step_cycles(self) -> float | None:
        """Wall cycles of the step the phases must add up to: the schedule's step (its seconds, host terms
        included, at the target's clock), else the run's total cycles, else not recorded (None)."""
        rec = self.record
        if rec.schedule.step_seconds > 0:
            return rec.schedule.step_seconds * float(self.target.clock_hz)
        if "total_cycles" in rec:
            return float(rec.total_cycles)
        return None

    def _rebuilt_table(self, name: str) -> pd.DataFrame:
        """An optional table of ``schema.OPTIONAL_TABLES`` rebuilt for a file written before it existed."""
        from popvision_lite.profile.phases import phases_from_schedule

        if name == "variable_intervals":  # before 3.1 every variable was recorded with one live interval
            return schema.empty_table(name)
        try:
            df = phases_from_schedule(self.schedule, self.stored_table("steps"), self.target.clock_hz)
        except ValueError as e:
            raise self._err(f"table 'phases' cannot be rebuilt from run['schedule']: {e}") from e
        for col, want in schema.COLUMN_DTYPES[name].items():
            df[col] = df[col].astype(object if want == "str" else want)
        counts = _RowCounts(self._table_rows)
        counts.update(self._counts)
        counts[name] = len(df)
        consistency.check_table(name, df, counts, self._err, self.target.num_tiles)
        self._check_between(name, df)
        return df

    # ---- public API ---------------------------------------------------------------------
    @property
    def num_steps(self) -> int:
        return self._shapes["step_tile_cycles"][0]

    def _stored_tiles(self) -> pd.DataFrame:
        if self._tiles is None:
            t = self.target
            g = np.arange(t.num_tiles, dtype=np.int64)
            self._tiles = pd.DataFrame({
                "tile": g,
                "ipu": (g // t.tiles_per_ipu).astype(np.int16),
                "tile_in_ipu": (g % t.tiles_per_ipu).astype(np.int32),
                "capacity_bytes": np.full(t.num_tiles, t.sram_bytes_per_tile, dtype=np.int64),
            })
        return self._tiles

    @property
    def tiles(self) -> pd.DataFrame:
        """One row per tile of the target (index = ``tile``, the global tile id): ``ipu``, ``tile_in_ipu`` and
        the SRAM ``capacity_bytes``."""
        return self.table("tiles")

    @property
    def steps(self) -> pd.DataFrame:
        """One row per STORED BSP step, in time order (index = ``step``).

        **A stored step may stand for many.**  A profile stores a few representative steps of one training step
        of one replica (``phases``): e.g. at pod scale ONE steady-state micro-batch stands for the 184 the step
        runs.  ``runs`` says how many times each stored step runs per training step (float: a drawn pipeline
        cycle can stand for a share of undrawn ones), and ``ipu_cycles`` = ``cycles`` x the IPUs it occupies
        x ``runs`` (``ipu_seconds`` at the clock) is the IPU time it stands for.  So weight before adding up::

            p.steps.groupby("kind_name", observed=True)["ipu_seconds"].sum()   # IPU time of the stored steps

        (``seconds.sum()`` counts each stored step once: 0.11 s of a 1.81 s pod-scale step).  The Summary and
        ``info`` also count the phases stored without steps (all-reduce, optimizer, streams, host terms) and the
        IPUs waiting at syncs for each other: ``p.totals`` has every row of those numbers.

        Columns: ``kind`` (code) and ``kind_name`` (categorical: compute / sync / exchange_internal /
        exchange_global / stream_copy), ``op_id`` and ``prog_id`` (``<NA>``: none), ``ipu`` (``<NA>``: every
        IPU), ``start_cycle``, ``end_cycle``, ``cycles``, ``seconds`` (at the target's clock; one run),
        ``busy_max_cycles`` / ``busy_mean_cycles`` over tiles, ``tiles_active``, ``bytes_in`` / ``bytes_out``
        (summed over tiles), ``runs``, ``ipu_cycles``, ``ipu_seconds``.  Steps of different IPUs may overlap in
        time (pipelines)."""
        return self.table("steps")

    @property
    def totals(self) -> pd.DataFrame:
        """Where one training step's IPU time goes, from ``analysis/run_totals.py``: the numbers of the Summary
        and ``popvision-lite info``, one row per (phase, step kind) with IPU time, plus one per phase for the
        IPUs waiting at syncs for the others.  Index: row numbers.  Columns: ``phase`` (``phases.name``),
        ``phase_id``, ``kind_name`` (step kind; waiting counts as ``sync``), ``part`` (compute / exchange /
        sync / stream), ``waiting`` (bool), ``ipu_cycles`` (float64), ``ipu_seconds``, ``share`` (of the step's
        IPU time; the column sums to 1)::

            p.totals.groupby("part", observed=True)["share"].sum()    # the Summary's compute / exchange / ... shares
        """
        from popvision_lite.profile import BUILDERS

        return BUILDERS["totals"](self)

    @property
    def ops(self) -> pd.DataFrame:
        """One row per model operation (index = ``op_id``): ``name``, ``type``, ``ipu`` (``<NA>``: several),
        ``precision``, ``flops``, bytes by level (``bytes_sram``, ``bytes_exchange``, ``bytes_ipu_link``,
        ``bytes_ddr``, ``min_bytes``), ``cycles`` split into ``compute_cycles`` / ``exchange_cycles`` /
        ``sync_cycles`` / ``stream_cycles``, ``tiles_used`` and the planner's ``plan``.

        **What a row counts** (``run["op_counts"]``, docs/profile-format.md): on the whole-graph path one op of ONE
        micro-batch of one replica; in a pipelined profile the FLOPs, bytes and cycles of one op over one whole
        training step of one replica (its ``runs_per_step`` runs), ``min_bytes`` one run's."""
        return self.table("ops")

    @property
    def programs(self) -> pd.DataFrame:
        """The program tree, parents before children (index = ``prog_id``): ``parent_id`` (``<NA>``: the root),
        ``kind``, ``name``, ``op_id``, ``repeat``, ``cs_id``, the stored steps it issued (``first_step`` ..
        ``last_step``), ``code_bytes``, ``cycles`` of its stored steps (children included, each run once) and,
        for leaves, the liveness step ``lstep`` (``<NA>``: none)."""
        return self.table("programs")

    @property
    def compute_sets(self) -> pd.DataFrame:
        """One row per compute set (index = ``cs_id``): ``name``, ``op_id``, ``num_vertices``, ``num_tiles``."""
        return self.table("compute_sets")

    @property
    def vertices(self) -> pd.DataFrame:
        """Vertices aggregated per (compute set, codelet, tile) (index: row numbers): ``cs_id``, ``codelet``,
        ``tile``, ``num_vertices``, ``cycles``, ``state_bytes``, ``code_bytes``."""
        return self.table("vertices")

    @property
    def variables(self) -> pd.DataFrame:
        """One row per variable (index = ``var_id``): ``name``, ``kind`` (variable / constant), ``dtype``,
        ``shape``, ``bytes``, ``always_live``, its live range ``first_lstep`` .. ``last_lstep`` (``<NA>`` when
        always live) and the producing ``op_id`` (``<NA>``: an input or weight)."""
        return self.table("variables")

    @property
    def variable_tiles(self) -> pd.DataFrame:
        """Where each variable lives (index: row numbers): ``var_id``, ``tile``, ``bytes``."""
        return self.table("variable_tiles")

    @property
    def variable_intervals(self) -> pd.DataFrame:
        """The live intervals (``var_id``, ``first_lstep``, ``last_lstep``; index: row numbers) of the variables
        live more than once (a re-run program writes them anew); every other variable is live over its own
        first..last step.  Empty for files before 3.1."""
        return self.table("variable_intervals")

    @property
    def liveness_steps(self) -> pd.DataFrame:
        """One row per liveness step (leaf program in compile order, index = ``lstep``): ``prog_id``, ``name``,
        not-always-live ``total_bytes`` over the chip, and ``max_tile_bytes`` on the fullest ``max_tile``."""
        return self.table("liveness_steps")

    @property
    def phases(self) -> pd.DataFrame:
        """The training step's phases (fill, steady state, drain, all-reduce, optimizer, streams; index =
        ``phase_id``): ``name``, ``kind``, ``ipu`` (``<NA>``: every IPU), ``start_cycle``, ``cycles`` of ONE run,
        ``runs_per_step``, the stored steps that stand for it (``first_step`` .. ``last_step``, ``<NA>`` when
        none are stored, then ``time_kind`` says which step kind its time counts as), ``stored_runs`` and the
        busy IPU cycles of one run per step kind the emulator composed (``ipu_compute_cycles`` ...,
        ``<NA>``: not recorded).  ``p.totals`` adds it all up."""
        return self.table("phases")

    @property
    def record(self) -> RunRecord:
        """The header's ``run`` object, typed and checked (``profile/run_record.py``): the schedule, op counts,
        config keys and training state analysis reads.  Checked when first asked for (like a table); a value of
        the wrong kind or out of its bounds is a ProfileError naming the key.  ``run`` stays the raw object."""
        if self._record is None:
            self._record = RunRecord.read(self.run, self._err, "run")
        return self._record

    @property
    def schedule(self) -> Schedule:
        """The training step's composition, typed (``record.schedule``; empty for a file without one)."""
        return self.record.schedule

    @property
    def replicas(self) -> int:
        """Replicas of the run (``record.replicas_of_run``: the schedule's, else ``run["replicas"]``, else the
        config's, else 1)."""
        return self.record.replicas_of_run

    def close(self) -> None:
        """Close the file (also on leaving ``with pvl.open(path) as p:``); tables already read stay usable."""
        self._safe = None
        self._cached = {}
        chunks = getattr(self, "_chunks", None)
        if chunks is not None:
            chunks.close()
        if self._f is not None:
            try:
                self._f.close()
            finally:
                self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _repr_html_(self) -> str:
        """A short card for notebooks: target, model, fit, steps, tables (every text escaped)."""
        import html

        t = getattr(self, "target", None)
        run = getattr(self, "run", None) or {}
        rows = [("file", str(self.path)), ("format", str(self.format_version))]
        if t is not None:
            rows += [("target", f"{t.name} [{t.device}] x {t.num_ipus} IPU(s), {t.tiles_per_ipu} tiles each")]
        rows += [("model", str(run.get("model", ""))), ("fits", str(run.get("fits", ""))),
                 ("steps", f"{self._shapes.get('step_tile_cycles', (0,))[0]:,}"),
                 ("tables", ", ".join(schema.TABLES))]
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                       f"{html.escape(v)}</td></tr>" for k, v in rows)
        return f"<table><caption>popvision-lite profile</caption>{body}</table>"

    def __repr__(self) -> str:
        t = getattr(self, "target", None)
        what = f"{t.device} x{t.num_ipus}" if t else "?"
        return f"<Profile {self.path} {what} steps={self._shapes.get('step_tile_cycles', (0,))[0]}>"


class _RowCounts(dict):
    """Rows of each table, found (and the table's columns checked) when first asked for."""

    def __init__(self, rows_of):
        super().__init__()
        self._rows_of = rows_of

    def __missing__(self, name: str) -> int:
        n = self[name] = self._rows_of(name)
        return n


def _expand(cats: np.ndarray, codes: np.ndarray):
    """The texts of a dictionary column: ``cats[codes]``, as the array pandas makes of it.  Where pandas stores text
    in its string dtype (pandas 3), the (few) categories are converted once and taken by code, instead of
    converting every row's text when the table's frame is built; the column is the same.  (No rows: pandas keeps
    an empty column of objects as objects, so it stays one.)"""
    if not len(codes):
        return cats[codes]
    array = pd.Series(cats, copy=False).array
    return array.take(codes) if isinstance(array.dtype, pd.StringDtype) else cats[codes]


def _with_derived(name: str, df: pd.DataFrame, target) -> pd.DataFrame:
    """``df`` with the columns ``schema.DERIVED_COLUMNS[name]`` appended (steps: kind names, durations)."""
    if name == "steps":
        cycles = (df["end_cycle"] - df["start_cycle"]).astype(np.int64)
        df["kind_name"] = pd.Categorical.from_codes(df["kind"].to_numpy(np.int64), categories=list(schema.STEP_KINDS))
        df["cycles"] = cycles
        df["seconds"] = cycles.to_numpy(np.float64) / float(target.clock_hz)
    return df


def open_profile(path) -> Profile:
    """Open a profile lazily (reads only the header).  Raises ProfileError subclasses."""
    p = Profile(path)
    log.debug("opened %s: format %d.%d, %s x %d IPU(s), %d steps", p.path, p.format_version, p.format_minor,
              p.target.device, p.target.num_ipus, p.num_steps)
    return p
