"""Fuzz the profile reader: mutated valid profiles must open and read consistently or raise ProfileError.

    python -m bench.fuzz_profiles                 # 600 cases, 2 worker processes
    python -m bench.fuzz_profiles --cases 100 --seed 3 --workers 1

Each case is a file (or folder) made from a small valid profile by one mutation: truncation,
byte flips, zeroed ranges, dropped / renamed tables, columns, arrays and summaries, wrong shapes
and dtypes, NaN / negative / huge values in tables and arrays, wrong format / version / header
fields, an empty file, a directory, and files of other formats (PNG, JSON, zip, a foreign HDF5).

Every case is read like a consumer would (``read_everything``): open, every table, the memory
array and ``memory.by_tile()``, liveness, a step window, every stored summary level, and the
Summary page's analysis.  Outcomes:

* ``ok``            - opened and every read was consistent (shapes, no NaN, no negative bytes ...);
* ``profile_error`` - raised ProfileError whose message names the file;
* failures: ``other_exception`` (any other exception), ``bad_message`` (ProfileError not naming the
  file), ``inconsistent`` (opened but the data broke an invariant), ``timeout`` (hang past the
  per-case limit) and ``crash`` (the worker process died, e.g. a segfault in a C library).

Cases run in worker subprocesses (``python -m bench.fuzz_profiles --worker``) fed one case at a time,
so a crash or hang costs one case, and the worker is restarted for the rest.
Prints counts by outcome (and mutation kind) and every failure; exit code 1 on any failure.
A ``BENCH-RESULT`` JSON line carries the counts for ``python -m bench``'s report.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np

FAIL_OUTCOMES = ("other_exception", "bad_message", "inconsistent", "timeout", "crash")

# ---------------------------------------------------------------------------------------------
# base profile and mutations
# ---------------------------------------------------------------------------------------------


def make_base(folder: Path) -> Path:
    """A small valid profile: 2 IPUs x 16 tiles, 150 steps (several summary blocks, 2 IPUs)."""
    from popvision_lite.testing.synthetic import write_synthetic

    p = Path(folder) / "base.pvl"
    if not p.exists():
        write_synthetic(p, num_ipus=2, tiles_per_ipu=16, num_steps=150, seed=1, num_layers=1)
    return p


def _h5(path):
    import h5py

    try:
        import hdf5plugin  # noqa: F401  (the writer's Blosc filter, so mutated arrays can be rewritten)
    except ImportError:  # pragma: no cover
        pass
    return h5py.File(path, "r+")


def _datasets(f, group: str) -> list[str]:
    out = []
    f[group].visit(lambda name: out.append(name) if hasattr(f[group][name], "shape") else None)
    return sorted(out)


def _is_dict(ds) -> bool:
    v = ds.attrs.get("encoding")
    return (v.decode() if isinstance(v, bytes) else v) == "dictionary"


def _replace(g, name, data, **kw):
    attrs = dict(g[name].attrs) if name in g else {}
    if name in g:
        del g[name]
    ds = g.create_dataset(name, data=data, **kw)
    for k, v in attrs.items():
        ds.attrs[k] = v
    return ds


# Byte-level mutations -------------------------------------------------------------------------

def m_truncate(rng, src, dst):
    data = src.read_bytes()
    n = rng.randrange(0, len(data))
    dst.write_bytes(data[:n])
    return f"truncated to {n} of {len(data)} bytes"


def m_flip_bytes(rng, src, dst):
    data = bytearray(src.read_bytes())
    k = rng.choice([1, 2, 8, 64])
    # half the cases hit the first 4 KiB (superblock, object headers), half anywhere
    hi = 4096 if rng.random() < 0.5 else len(data)
    offs = sorted(rng.randrange(0, min(hi, len(data))) for _ in range(k))
    for o in offs:
        data[o] ^= 1 << rng.randrange(8)
    dst.write_bytes(bytes(data))
    return f"flipped {k} bits at {offs[:4]}{'...' if k > 4 else ''}"


def m_zero_range(rng, src, dst):
    data = bytearray(src.read_bytes())
    o = rng.randrange(0, len(data))
    n = rng.choice([16, 256, 4096])
    data[o:o + n] = bytes(len(data[o:o + n]))
    dst.write_bytes(bytes(data))
    return f"zeroed {n} bytes at {o}"


def m_random_bytes(rng, src, dst):
    data = bytearray(src.read_bytes())
    o = rng.randrange(0, len(data))
    n = rng.choice([8, 128, 2048])
    chunk = bytes(rng.randrange(256) for _ in range(min(n, len(data) - o)))
    data[o:o + len(chunk)] = chunk
    dst.write_bytes(bytes(data))
    return f"random {len(chunk)} bytes at {o}"


# Structure mutations (h5py on a copy) ----------------------------------------------------------

def _copy(src, dst):
    shutil.copy(src, dst)


def m_drop(rng, src, dst):
    _copy(src, dst)
    with _h5(dst) as f:
        what = rng.choice(["table", "column", "array", "summary", "group", "categories"])
        if what == "table":
            name = rng.choice(sorted(f["tables"]))
            del f["tables"][name]
            return f"dropped table {name}"
        if what == "column":
            t = rng.choice(sorted(f["tables"]))
            c = rng.choice(sorted(f["tables"][t]))
            del f["tables"][t][c]
            return f"dropped column {t}/{c}"
        if what == "array":
            name = rng.choice(sorted(f["arrays"]))
            del f["arrays"][name]
            return f"dropped array {name}"
        if what == "summary":
            ds = rng.choice(_datasets(f, "summaries"))
            del f["summaries"][ds]
            return f"dropped summary {ds}"
        if what == "categories":
            cats = [f"{t}/{c}" for t in f["tables"] for c in f["tables"][t] if c.endswith(".categories")]
            c = rng.choice(sorted(cats))
            del f["tables"][c]
            return f"dropped {c}"
        g = rng.choice(["tables", "arrays", "summaries"])
        del f[g]
        return f"dropped group /{g}"


def m_rename(rng, src, dst):
    _copy(src, dst)
    with _h5(dst) as f:
        g = rng.choice(["tables", "arrays", "summaries", "tables/steps", "tables/ops", "tables/variables"])
        name = rng.choice(sorted(f[g]))
        new = name + rng.choice(["_old", "X", "s"])
        f[g].move(name, new)
        return f"renamed {g}/{name} -> {new}"


def m_array_shape(rng, src, dst):
    _copy(src, dst)
    with _h5(dst) as f:
        name = rng.choice(sorted(f["arrays"]))
        ds = f["arrays"][name]
        shape = list(ds.shape)
        how = rng.choice(["shrink", "grow", "ndim", "empty"])
        if how == "shrink":
            ax = rng.randrange(len(shape))
            shape[ax] = max(0, shape[ax] - rng.choice([1, 3]))
        elif how == "grow":
            ax = rng.randrange(len(shape))
            shape[ax] += rng.choice([1, 5])
        elif how == "ndim":
            shape = shape[:-1] if len(shape) > 1 else shape + [2]
        else:
            shape = [0] * len(shape)
        _replace(f["arrays"], name, np.zeros(shape, ds.dtype))
        return f"array {name} shape {tuple(ds.shape) if False else ''}-> {tuple(shape)} ({how})"


def m_column_shape(rng, src, dst):
    _copy(src, dst)
    with _h5(dst) as f:
        t = rng.choice(sorted(f["tables"]))
        cols = [c for c in f["tables"][t] if not c.endswith(".categories")]
        c = rng.choice(sorted(cols))
        ds = f["tables"][t][c]
        v = ds[()]
        how = rng.choice(["shorter", "longer", "2d", "scalar"])
        if how == "shorter":
            nv = v[:-1] if len(v) else v
        elif how == "longer":
            nv = np.concatenate([v, v[:1] if len(v) else np.zeros(1, v.dtype)])
        elif how == "2d":
            nv = np.stack([v, v], axis=1)
        else:
            nv = v[0] if len(v) else np.zeros((), v.dtype)
        _replace(f["tables"][t], c, nv)
        return f"column {t}/{c} {how}"


def m_dtype(rng, src, dst):
    _copy(src, dst)
    with _h5(dst) as f:
        if rng.random() < 0.5:
            name = rng.choice(sorted(f["arrays"]))
            ds = f["arrays"][name]
            nt = rng.choice(["float32", "float64", "int8", "int64", "uint8"])
            _replace(f["arrays"], name, ds[()].astype(nt))
            return f"array {name} as {nt}"
        t = rng.choice(sorted(f["tables"]))
        c = rng.choice(sorted(x for x in f["tables"][t] if not x.endswith(".categories")))
        v = f["tables"][t][c][()]
        nt = rng.choice(["float64", "float16", "S4", "int8", "uint64", "bool"])
        if nt == "S4":
            nv = np.array([str(x)[:4] for x in v], dtype="S4")
        else:
            with np.errstate(all="ignore"):
                nv = v.astype(nt)
        _replace(f["tables"][t], c, nv)
        return f"column {t}/{c} as {nt}"


_SPECIALS = {
    "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
    "neg": -1, "neg_big": -(2 ** 40), "huge": 2 ** 62, "int64_max": 2 ** 63 - 1, "int64_min": -(2 ** 63),
}


def m_table_value(rng, src, dst):
    """NaN / negative / huge values in a numeric table column (floats written as float64)."""
    _copy(src, dst)
    with _h5(dst) as f:
        t = rng.choice(sorted(f["tables"]))
        cols = [c for c in f["tables"][t] if not c.endswith(".categories")
                and not _is_dict(f["tables"][t][c])]
        if not cols or len(f["tables"][t][cols[0]]) == 0:
            return m_table_value(rng, src, dst)
        c = rng.choice(sorted(cols))
        ds = f["tables"][t][c]
        v = ds[()]
        key = rng.choice(sorted(_SPECIALS))
        val = _SPECIALS[key]
        i = rng.randrange(len(v))
        if isinstance(val, float) or v.dtype.kind == "f":
            nv = v.astype(np.float64)
            nv[i] = val
        elif v.dtype.kind == "b":
            nv = v.astype(np.int64)
            nv[i] = val
        else:
            nv = v.astype(np.int64)
            nv[i] = val
        _replace(f["tables"][t], c, nv)
        return f"{t}/{c}[{i}] = {key}"


def m_dict_codes(rng, src, dst):
    _copy(src, dst)
    with _h5(dst) as f:
        cols = [(t, c) for t in f["tables"] for c in f["tables"][t]
                if _is_dict(f["tables"][t][c]) and len(f["tables"][t][c])]
        t, c = rng.choice(sorted(cols))
        ds = f["tables"][t][c]
        v = ds[()].astype(np.int64)
        v[rng.randrange(len(v))] = rng.choice([-1, -(2 ** 31), 10 ** 6, 2 ** 31 - 1])
        _replace(f["tables"][t], c, v.astype(ds.dtype) if ds.dtype.kind == "i" else v)
        return f"codes {t}/{c}"


def m_array_value(rng, src, dst):
    """Negative / huge values in the dense arrays (memory is int64: negatives and overflow bait)."""
    _copy(src, dst)
    with _h5(dst) as f:
        name = rng.choice(sorted(f["arrays"]))
        ds = f["arrays"][name]
        if ds.size == 0:
            return m_array_value(rng, src, dst)
        idx = tuple(rng.randrange(n) for n in ds.shape)
        info = np.iinfo(ds.dtype)
        val = rng.choice([info.min, info.max, -1 if info.min < 0 else info.max, 2 ** 62 if info.max > 2 ** 62 else 7])
        a = ds[()]
        a[idx] = val
        ds[...] = a
        return f"array {name}{list(idx)} = {val}"


def m_summary(rng, src, dst):
    _copy(src, dst)
    with _h5(dst) as f:
        how = rng.choice(["levels_attr", "shape", "nan", "edges"])
        s = f["summaries"]
        if how == "levels_attr":
            val = rng.choice(["not json", "[[0, 0]]", "[[16]]", "{}", "[[-16, 16]]", "[[16, 16], [3, 3]]", "7"])
            s.attrs["levels"] = val
            return f"summaries levels = {val!r}"
        lvl = rng.choice(sorted(s))
        g = s[lvl]
        if how == "shape":
            arr = rng.choice(sorted(k for k in g))
            a = g[arr][()]
            _replace(g, arr, a[:-1] if a.ndim and len(a) > 1 else np.zeros((3, 3), a.dtype))
            return f"summary {lvl}/{arr} shape"
        if how == "edges":
            _replace(g, "tile_edges", np.array([5, 2, -1, 10 ** 6], dtype=np.int64))
            return f"summary {lvl}/tile_edges garbage"
        arr = rng.choice(["min", "mean", "max"])
        a = g[arr][()].astype(np.float64)
        a.flat[rng.randrange(a.size)] = rng.choice([np.nan, -1.0, np.inf])
        _replace(g, arr, a.astype(g[arr].dtype) if g[arr].dtype.kind == "f" else a)
        return f"summary {lvl}/{arr} NaN/neg/inf"


def m_header(rng, src, dst):
    _copy(src, dst)
    with _h5(dst) as f:
        a = f.attrs
        key = rng.choice(["format", "format_version", "format_minor", "complete", "target", "target_field",
                          "run", "extra", "delete"])
        if key == "format":
            a["format"] = rng.choice(["popvision-profile", "", "pvl", "popvision-lite-profile\x00"])
        elif key == "format_version":
            a["format_version"] = rng.choice([0, -1, 2, 999, "abc", 1.5, "1"])
        elif key == "format_minor":
            a["format_minor"] = rng.choice(["x", -3, 10 ** 9, 2.5])
        elif key == "complete":
            a["complete"] = rng.choice([False, 0, "no"])
        elif key == "target":
            a["target"] = rng.choice(["{", "[]", "null", "{}", '"ipu"', "1"])
        elif key == "target_field":
            t = json.loads(a["target"])
            fld = rng.choice(sorted(t))
            t[fld] = rng.choice([None, "x", -1, 0, 1.5, 10 ** 12, [], float("nan")])
            if rng.random() < 0.2:
                t.pop(fld)
            a["target"] = json.dumps(t)
            key = f"target.{fld}={t.get(fld, '<missing>')!r}"
        elif key in ("run", "extra"):
            a[key] = rng.choice(["{", "[1, 2]", "null", '"text"', "42"])
        else:
            k = rng.choice(sorted(a))
            del a[k]
            key = f"deleted attr {k}"
        return f"header {key}"


# Other formats and odd paths ----------------------------------------------------------------

def _png_bytes(rng):
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(12)) for _ in range(4))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def m_other_format(rng, src, dst):
    kind = rng.choice(["png", "json", "zip", "hdf5", "text", "empty", "dir", "hdf5_sig_garbage", "trace_json",
                       "zip_of_profile", "symlink_dangling"])
    if kind == "png":
        dst.write_bytes(_png_bytes(rng))
    elif kind == "json":
        dst.write_text(json.dumps({"format": "popvision-lite-profile", "format_version": 1}))
    elif kind == "trace_json":
        dst.write_text(json.dumps({"traceEvents": [{"ph": "X", "ts": 0, "dur": 1, "name": "x"}]}))
    elif kind == "zip":
        with zipfile.ZipFile(dst, "w") as z:
            z.writestr("a.txt", "hello")
    elif kind == "zip_of_profile":
        with zipfile.ZipFile(dst, "w") as z:
            z.write(src, "base.pvl")
    elif kind == "hdf5":
        import h5py

        with h5py.File(dst, "w") as h:
            h["x"] = np.arange(10)
            if rng.random() < 0.5:
                h.attrs["format"] = "popvision-lite-profile"
                h.attrs["format_version"] = 1
                h.attrs["complete"] = True
    elif kind == "text":
        dst.write_text("model,cycles\nmlp,100\n" * rng.randrange(1, 50))
    elif kind == "empty":
        dst.write_bytes(b"")
    elif kind == "dir":
        dst.mkdir()
        if rng.random() < 0.5:
            (dst / "zarr.json").write_text("{}")
    elif kind == "hdf5_sig_garbage":
        dst.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(rng.choice([0, 8, 600]))))
    elif kind == "symlink_dangling":
        os.symlink(dst.parent / "does-not-exist.pvl", dst)
    return f"other format: {kind}"


MUTATORS = {
    "truncate": (m_truncate, 3),
    "flip_bytes": (m_flip_bytes, 4),
    "zero_range": (m_zero_range, 2),
    "random_bytes": (m_random_bytes, 2),
    "drop": (m_drop, 3),
    "rename": (m_rename, 2),
    "array_shape": (m_array_shape, 2),
    "column_shape": (m_column_shape, 2),
    "dtype": (m_dtype, 2),
    "table_value": (m_table_value, 5),
    "dict_codes": (m_dict_codes, 1),
    "array_value": (m_array_value, 3),
    "summary": (m_summary, 2),
    "header": (m_header, 4),
    "other_format": (m_other_format, 3),
}


def make_cases(base: Path, folder: Path, n: int, seed: int) -> list[dict]:
    """n mutated files under ``folder``; each case is {id, kind, what, path}.  Deterministic in seed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    kinds = list(MUTATORS)
    weights = [MUTATORS[k][1] for k in kinds]
    cases = []
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        # round-robin first so every kind appears even in small runs, then weighted
        kind = kinds[i] if i < len(kinds) else rng.choices(kinds, weights)[0]
        dst = folder / f"case{i:04d}_{kind}.pvl"
        fn = MUTATORS[kind][0]
        try:
            what = fn(rng, base, dst)
        except Exception as e:  # a mutation that does not apply to this file: record and skip
            what = f"mutation failed: {type(e).__name__}: {e}"
            if dst.is_dir():
                shutil.rmtree(dst)
            elif dst.exists() or dst.is_symlink():
                dst.unlink()
            cases.append(dict(id=i, kind=kind, what=what, path=None))
            continue
        cases.append(dict(id=i, kind=kind, what=what, path=str(dst)))
    return cases


# ---------------------------------------------------------------------------------------------
# reading a case like a consumer
# ---------------------------------------------------------------------------------------------

class Inconsistent(AssertionError):
    pass


def _check(cond, what):
    if not cond:
        raise Inconsistent(what)


def read_everything(path) -> dict:
    """Open and read every part of a profile the way the app does; check what comes back.

    Raises ProfileError from the reader, or Inconsistent when the reader let garbage through.
    """
    import pandas as pd

    import popvision_lite as pvl
    from popvision_lite.analysis.summary import summarize
    from popvision_lite.profile import schema

    with pvl.open(path) as p:
        t = p.target
        nt = t.num_tiles
        _check(nt > 0 and t.clock_hz > 0 and np.isfinite(t.clock_hz), f"target {t}")
        _check(isinstance(p.run, dict), f"run header is {type(p.run).__name__}")
        tables = {}
        for name, cols in schema.TABLE_COLUMNS.items():
            df = p.stored_table(name)
            want = cols + schema.DERIVED_COLUMNS.get(name, ())  # stored columns, then the reader's derived ones
            _check(isinstance(df, pd.DataFrame) and tuple(df.columns) == want, f"table {name} columns")
            for c in cols:
                v = df[c].to_numpy()
                if v.dtype.kind == "f":
                    _check(np.isfinite(v).all(), f"{name}.{c} has NaN/inf")
                if v.dtype.kind in "iuf" and len(v):
                    _check(v.min() >= -1, f"{name}.{c} has value {v.min()} < -1")
            tables[name] = df
        steps = tables["steps"]
        _check(len(steps) == p.num_steps, "steps rows vs step_tile rows")
        _check((steps["end_cycle"] >= steps["start_cycle"]).all(), "step ends before it starts")
        _check(steps["kind"].between(0, len(schema.STEP_KINDS) - 1).all(), "step kind code out of range")
        for tname in ("vertices", "variable_tiles"):
            tl = tables[tname]["tile"]
            _check(tl.between(0, nt - 1).all(), f"{tname}.tile out of range")
        mem = p.memory.array()
        _check(mem.shape == (nt, len(schema.MEMORY_CATEGORIES), 2), "memory shape")
        _check(mem.min(initial=0) >= 0, "negative memory bytes")
        bt = p.stored_table("memory_by_tile")
        _check(len(bt) == nt and (bt["total"] >= 0).all(), "by_tile totals negative (overflow?)")
        for name in schema.TABLES:  # the notebook form of every table converts what the reader let through
            pub = p.table(name)
            _check(len(pub) == len(tables[name]) if name in tables else True, f"table {name} rows (notebook form)")
        _check((bt["total"] == bt["always_live"] + bt["not_always_live"]).all(), "by_tile parts do not add up")
        lv = p.liveness.tile_bytes()
        _check(lv.shape == (len(tables["liveness_steps"]), nt), "liveness shape")
        n = p.num_steps
        a, b = n // 3, min(n, n // 3 + 40)
        w = p.step_tiles.window(a, b)
        for arr in w:
            _check(arr.shape == (b - a, nt), f"window shape {arr.shape}")
        w2 = p.step_tiles.window(a, b, tiles=np.arange(0, nt, 3))
        _check(w2.cycles.shape == (b - a, len(range(0, nt, 3))), "tile-subset window shape")
        levels = p.step_tiles.levels
        _check(len(levels) > 0, "no summary levels")
        for sb, tb in levels:
            s = p.step_tiles.summary(sb, tb)
            n_sb = -(-n // sb)
            for k in ("min", "mean", "max"):
                arr = np.asarray(s[k])
                _check(arr.ndim == 2 and arr.shape[0] == n_sb, f"summary {sb}x{tb} {k} shape {arr.shape}")
                _check(arr.shape[1] == len(s["tile_edges"]), f"summary {sb}x{tb} {k} vs tile_edges")
                if arr.dtype.kind == "f":
                    _check(np.isfinite(arr).all(), f"summary {sb}x{tb} {k} NaN")
                _check(arr.min(initial=0) >= 0, f"summary {sb}x{tb} {k} negative")
            e = np.asarray(s["tile_edges"])
            _check(len(e) == 0 or (e[0] == 0 and (np.diff(e) > 0).all() and e[-1] < nt), "tile_edges")
        p.step_tiles.summary(*p.step_tiles.pick_level(), start=a, stop=b)
        summ = summarize(p)
        tot = p.totals  # the notebook's totals: the Summary's numbers, one row per (phase, step kind)
        _check(len(tot) == 0 or abs(float(tot["share"].sum()) - 1.0) < 1e-6, "totals' shares do not add up to 1")
        return dict(steps=n, tiles=nt, total_cycles=getattr(summ, "total_cycles", None))


def classify(path) -> tuple[str, str]:
    """(outcome, detail) of reading one case in this process."""
    from popvision_lite.errors import ProfileError

    try:
        read_everything(path)
        return "ok", ""
    except ProfileError as e:
        msg = str(e)
        if not e.problem or str(Path(path)) not in msg:
            return "bad_message", msg[:300]
        return "profile_error", msg[:300]
    except Inconsistent as e:
        return "inconsistent", str(e)[:300]
    except Exception as e:
        import traceback

        tb = traceback.format_exc(limit=-3)
        return "other_exception", f"{type(e).__name__}: {e}"[:300] + "\n" + tb[-900:]


def _worker() -> int:
    """Read case paths from stdin (one JSON per line), answer one JSON line each."""
    import warnings

    warnings.simplefilter("ignore")
    import popvision_lite.analysis.summary  # noqa: F401  (imports before the first case's clock)
    import popvision_lite.profile.reader  # noqa: F401

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        if case.get("selftest") == "segfault":
            import ctypes

            ctypes.string_at(0)  # deliberate crash: checks the harness catches it
        if case.get("selftest") == "hang":
            time.sleep(3600)
        t0 = time.perf_counter()
        outcome, detail = classify(case["path"])
        print(json.dumps({"id": case["id"], "outcome": outcome, "detail": detail,
                          "s": round(time.perf_counter() - t0, 4)}), flush=True)
    return 0


def serve(classify, mem_mb: int = 0) -> int:
    """A capped worker's loop (``bench.fuzz_hostile``, ``bench.fuzz_records``): the app's modules imported before
    the first case's clock, the address space capped at ``mem_mb`` MiB, then one JSON case per stdin line answered
    with ``classify(case) -> (outcome, detail)`` (a MemoryError under the cap is the ``memory`` outcome)."""
    import resource
    import warnings

    warnings.simplefilter("ignore")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import popvision_lite.analysis.summary  # noqa: F401
    import popvision_lite.cli  # noqa: F401
    import popvision_lite.profile.reader  # noqa: F401

    if mem_mb:
        cap = mem_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        t0 = time.perf_counter()
        try:
            outcome, detail = classify(case)
        except MemoryError as e:
            outcome, detail = "memory", f"MemoryError under the cap: {e}"[:200]
        print(json.dumps({"id": case["id"], "outcome": outcome, "detail": detail,
                          "s": round(time.perf_counter() - t0, 4)}), flush=True)
    return 0


def print_outcomes(results: list[dict], fail_outcomes, header: str, width: int = 18) -> tuple[Counter, list]:
    """Print ``header``, the counts by outcome and by kind, and every failure; returns (counts, failures)."""
    by = Counter(r["outcome"] for r in results)
    by_kind: dict[str, Counter] = {}
    for r in results:
        by_kind.setdefault(r["kind"], Counter())[r["outcome"]] += 1
    fails = [r for r in results if r["outcome"] in fail_outcomes]
    print(header)
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    for kind, c in sorted(by_kind.items()):
        print(f"  {kind:<{width}} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    for r in fails:
        print(f"FAIL case {r['id']} [{r['kind']}] {r['what']}: {r['outcome']}: {r['detail']}")
    return by, fails


class _Worker:
    def __init__(self, module: str = "bench.fuzz_profiles", args=()):
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", module, "--worker", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1, env=env, cwd=root)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.case = None
        self.started = time.monotonic()
        self.ready = False

    def send(self, case):
        self.case = case
        self.started = time.monotonic()
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.sel.close()


def run_cases(cases: list[dict], workers: int = 2, timeout: float = 20.0, progress=None,
              module: str = "bench.fuzz_profiles", args=()) -> list[dict]:
    """Run cases in worker subprocesses; returns one result dict per case (case fields + outcome).

    A worker that dies while holding a case marks it ``crash``; one silent for ``timeout`` seconds
    marks it ``timeout`` and is killed; either way a fresh worker takes the remaining cases.
    """
    todo = [c for c in cases if c.get("path") or c.get("selftest") or c.get("argv")]
    results = {c["id"]: dict(c, outcome="skipped", detail=c["what"]) for c in cases if c not in todo}
    queue = list(reversed(todo))
    pool = [_Worker(module, args) for _ in range(min(workers, len(todo)))]
    start_timeout = max(120.0, timeout)

    def retire(w, outcome=None, detail=""):
        if w.case is not None and outcome:
            results[w.case["id"]] = dict(w.case, outcome=outcome, detail=detail)
        w.kill()
        pool.remove(w)
        if queue:
            pool.append(_Worker(module, args))

    while pool:
        for w in pool:
            if w.ready and w.case is None and queue:
                w.send(queue.pop())
        if not queue and all(w.case is None for w in pool if w.ready) and all(w.ready for w in pool):
            break
        now = time.monotonic()
        for w in list(pool):
            if w.case is not None and now - w.started > timeout:
                retire(w, "timeout", f"no answer in {timeout:.0f} s")
            elif not w.ready and now - w.started > start_timeout:
                retire(w)
        for w in list(pool):
            if not w.sel.select(timeout=0.02):
                continue
            line = w.proc.stdout.readline()
            if not line:  # the worker died: the case it held crashed it
                retire(w, "crash", f"worker died with exit code {w.proc.wait()}")
                continue
            msg = json.loads(line)
            if msg.get("ready"):
                w.ready = True
                continue
            results[msg["id"]] = dict(w.case, outcome=msg["outcome"], detail=msg["detail"], s=msg["s"])
            w.case = None
            if progress:
                progress(len(results), len(cases))
    for w in pool:
        w.proc.stdin.close()
        w.kill()
    return [results[c["id"]] for c in cases if c["id"] in results]


def summarize_results(results: list[dict]) -> dict:
    by_outcome = Counter(r["outcome"] for r in results)
    by_kind: dict[str, Counter] = {}
    for r in results:
        by_kind.setdefault(r["kind"], Counter())[r["outcome"]] += 1
    failures = [r for r in results if r["outcome"] in FAIL_OUTCOMES]
    return dict(by_outcome=dict(by_outcome), by_kind={k: dict(v) for k, v in sorted(by_kind.items())},
                failures=failures)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench.fuzz_profiles", description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--keep", help="keep the case files in this folder")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker()
    tmp = None
    folder = Path(args.keep) if args.keep else Path(tmp := tempfile.mkdtemp(prefix="pvl-fuzz-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        base = make_base(folder)
        cases = make_cases(base, folder / "cases", args.cases, args.seed)
        t1 = time.perf_counter()
        results = run_cases(cases, workers=args.workers, timeout=args.timeout)
        t2 = time.perf_counter()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    s = summarize_results(results)
    print(f"fuzzed profiles: {len(results)} cases (seed {args.seed}) made in {t1 - t0:.1f} s, "
          f"read in {t2 - t1:.1f} s with {args.workers} worker processes, per-case timeout {args.timeout:.0f} s")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(s["by_outcome"].items())))
    print(f"{'mutation':<14} " + " ".join(f"{o:>14}" for o in ("ok", "profile_error", "skipped", "failures")))
    for kind, c in s["by_kind"].items():
        fails = sum(c.get(o, 0) for o in FAIL_OUTCOMES)
        print(f"{kind:<14} " + " ".join(f"{c.get(o, 0):>14}" for o in ("ok", "profile_error", "skipped")) +
              f" {fails:>14}")
    for r in s["failures"]:
        print(f"FAIL case {r['id']} [{r['kind']}] {r['what']}: {r['outcome']}: {r['detail']}")
    n_fail = len(s["failures"])
    print(f"failures: {n_fail}")
    print("BENCH-RESULT " + json.dumps({
        "bench": "fuzz_profiles", "cases": len(results), "seed": args.seed,
        "outcomes": s["by_outcome"], "failures": n_fail, "seconds": round(t2 - t1, 1)}))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
