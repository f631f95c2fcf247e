"""Structural fuzzer: hostile-but-valid HDF5 profiles, special files and CLI/TOML abuse (issue 19).

    python -m bench.fuzz_hostile                    # 2,400 cases, 2 worker processes
    python -m bench.fuzz_hostile --cases 200 --seed 3

Byte mutations (``bench.fuzz_profiles``) break the HDF5 structure, so HDF5 itself refuses them.  The
dangerous files are *valid* HDF5 with hostile content: external storage / external links / virtual
datasets pointing at other local files, soft links, undocumented filters, damaged Blosc headers that
crash the decoder, files claiming 10^8 steps, duplicate ids, parent cycles, 1 MiB strings, impossible
device numbers.  Each case is one such file (a seeded variation of one kind), a special file (FIFO,
device) given as profile, or a command line (``emulate``/``export`` options and TOML configs).

Every case runs in a worker subprocess (``bench.fuzz_profiles``'s harness) with a memory cap
(``resource.setrlimit(RLIMIT_AS)``, ``--mem-mb``) and a per-case timeout, so a segfault (``crash``), a
hang (``timeout``) or a blow-up (``memory``: MemoryError under the cap) counts as a failure.  A profile
case is read like the app reads it (``fuzz_profiles.read_everything``); any text containing the marker
of the decoy "secret" file the hostile links point at is a ``leak`` failure.  A CLI case must exit 2
with a one-line message (``cli_bad``/``other_exception`` otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import fuzz_profiles as fz

SECRET = b"PVL_SECRET_MARKER=the-viewer-must-never-show-this\n"
FAILS = (*fz.FAIL_OUTCOMES, "leak", "memory", "cli_bad", "accepted")
# address-space cap of a worker: 4 GiB since workers also host offscreen Qt and every view (threads' stacks
# and their mappings need about 1 GiB of address space of their own)
MEM_MB = 4096
VIEWS_EVERY = 2  # hostile profile cases that open go through every view: every one of the new kinds, 1 in 2 of these
# kinds whose every case breaks a rule of the format: reading one without a ProfileError is a failure
# (blosc_header may damage a chunk the reads do not touch; long_string's HTML/formula names are legal)
MUST_REFUSE = {"soft_link", "filter", "claim_rows", "claim_target", "ids", "refs", "dup_pairs", "null_space",
               "values", "vlen_claim"}


def _copy(src, dst):
    shutil.copyfile(src, dst)


def secret_file(folder: Path) -> Path:
    p = Path(folder) / "secret.txt"
    if not p.exists():
        p.write_bytes(SECRET * 64)
    return p


def _datasets(f) -> list[str]:
    out: list[str] = []
    f.visititems(lambda n, o: out.append(n) if hasattr(o, "shape") else None)
    return sorted(out)


def _pick(rng, f, pred=lambda n, d: True) -> str:
    names = [n for n in _datasets(f) if pred(n, f[n])]
    return rng.choice(names)


def _replace(f, name, **kw):
    attrs = dict(f[name].attrs)
    del f[name]
    ds = f.create_dataset(name, **kw)
    for k, v in attrs.items():
        ds.attrs[k] = v
    return ds


# --- reads outside the file -------------------------------------------------------------------
def h_external_storage(rng, src, dst):
    """A dataset whose raw data lives in another file (the decoy secret, absolute or ../ relative)."""
    _copy(src, dst)
    secret = secret_file(dst.parent)
    with fz._h5(dst) as f:
        name = _pick(rng, f, lambda n, d: d.dtype.kind in "iuS" and d.ndim == 1 and d.size > 0)
        d = f[name]
        target = rng.choice([str(secret), os.path.relpath(secret, Path.cwd()), "/proc/self/environ"])
        n = d.size * d.dtype.itemsize
        _replace(f, name, shape=d.shape, dtype=d.dtype, external=[(target, 0, n)])
        return f"{name} stored in external file {target}"


def h_external_link(rng, src, dst):
    _copy(src, dst)
    other = dst.with_suffix(".other.h5")
    import h5py

    with h5py.File(other, "w") as o:
        o["data"] = np.frombuffer(SECRET * 4, dtype="S1").astype("S8")[: 16]
    with fz._h5(dst) as f:
        name = _pick(rng, f) if rng.random() < 0.8 else rng.choice(["tables/ops", "arrays", "summaries"])
        del f[name]
        f[name] = h5py.ExternalLink(str(other) if rng.random() < 0.5 else other.name, "/data")
        return f"{name} -> external link"


def h_soft_link(rng, src, dst):
    _copy(src, dst)
    import h5py

    with fz._h5(dst) as f:
        name = _pick(rng, f)
        target = rng.choice(["/tables/ops/type.categories", "/nowhere", "/" + name])
        del f[name]
        f[name] = h5py.SoftLink(target)
        return f"{name} -> soft link {target}"


def h_virtual(rng, src, dst):
    _copy(src, dst)
    import h5py

    other = dst.with_suffix(".vsrc.h5")
    with h5py.File(other, "w") as o:
        o["data"] = np.arange(10 ** 4, dtype=np.int64)
    with fz._h5(dst) as f:
        name = _pick(rng, f, lambda n, d: d.ndim == 1 and 0 < d.size <= 10 ** 4 and d.dtype.kind in "iu")
        d = f[name]
        layout = h5py.VirtualLayout(shape=d.shape, dtype=d.dtype)
        layout[:] = h5py.VirtualSource(str(other), "data", shape=(10 ** 4,))[: d.shape[0]]
        attrs = dict(d.attrs)
        del f[name]
        v = f.create_virtual_dataset(name, layout)
        for k, val in attrs.items():
            v.attrs[k] = val
        return f"{name} virtual from {other.name}"


def h_filter(rng, src, dst):
    """An undocumented filter: gzip (incl. a chunk bomb), lzf, szip-less shuffle, fletcher32."""
    _copy(src, dst)
    with fz._h5(dst) as f:
        name = _pick(rng, f, lambda n, d: d.size > 0 and d.dtype.kind in "iuf")
        d = f[name]
        data = d[()]
        opts = rng.choice([dict(compression="gzip"), dict(compression="lzf"), dict(shuffle=True),
                           dict(fletcher32=True), dict(compression="gzip", compression_opts=9)])
        _replace(f, name, data=data, chunks=True, **opts)
        if rng.random() < 0.2:  # a gzip bomb beside the data: one 96 MiB chunk of zeros
            f.create_dataset("extra/bomb", shape=(12 << 20,), dtype=np.int64, chunks=(12 << 20,),
                             compression="gzip", compression_opts=9, data=np.zeros(12 << 20, np.int64))
            return f"{name} with {opts} + 96 MiB gzip chunk"
        return f"{name} with {opts}"


def h_blosc_header(rng, src, dst):
    """A damaged Blosc header: 'memcpyed' flag with sizes past the chunk (crashed the filter), wrong
    nbytes / cbytes / blocksize / block offsets."""
    _copy(src, dst)
    with fz._h5(dst) as f:
        name = _pick(rng, f, lambda n, d: d.chunks is not None and d.id.get_num_chunks() > 0
                     and any(d.id.get_create_plist().get_filter(i)[0] == 32001
                             for i in range(d.id.get_create_plist().get_nfilters())))
        d = f[name]
        info = d.id.get_chunk_info(rng.randrange(d.id.get_num_chunks()))
    size = rng.choice([1 << 20, 64 << 20, 0x7FFFFFF0, 8, rng.randrange(1, 1 << 24)])
    with open(dst, "r+b") as fh:
        off = info.byte_offset
        what = rng.choice(["memcpy", "nbytes", "cbytes", "blocksize", "starts", "version"])
        if what == "memcpy":
            fh.seek(off + 2)
            fh.write(bytes([0x02 | rng.choice([0, 1, 0x10])]))
            fh.seek(off + 4)
            fh.write(struct.pack("<I", size))
            fh.seek(off + 12)
            fh.write(struct.pack("<I", size + 16))
        elif what in ("nbytes", "blocksize", "cbytes"):
            fh.seek(off + {"nbytes": 4, "blocksize": 8, "cbytes": 12}[what])
            fh.write(struct.pack("<I", size))
        elif what == "starts":
            fh.seek(off + 16)
            fh.write(struct.pack("<I", size))
        else:
            fh.seek(off)
            fh.write(bytes([rng.choice([0, 3, 255])]))
    return f"{name} chunk {info.chunk_offset}: {what} = {size}"


# --- sizes claimed beyond what is stored ---------------------------------------------------------
def h_claim_rows(rng, src, dst):
    """Every column of a table (and the step x tile arrays for steps) claims 10^6..10^8 rows, unallocated."""
    _copy(src, dst)
    n = rng.choice([10 ** 6, 10 ** 7, 10 ** 8])
    with fz._h5(dst) as f:
        t = rng.choice(sorted(f["tables"]))
        for c in list(f["tables"][t]):
            d = f["tables"][t][c]
            if c.endswith(".categories"):
                continue
            _replace(f, f"tables/{t}/{c}", shape=(n,), dtype=d.dtype, chunks=(min(n, 1 << 16),),
                     compression="gzip" if rng.random() < 0.3 else None)
        if t == "steps":
            for a in ("step_tile_cycles", "step_tile_bytes_in", "step_tile_bytes_out"):
                d = f["arrays"][a]
                _replace(f, f"arrays/{a}", shape=(n, d.shape[1]), dtype=d.dtype, chunks=d.chunks)
        return f"table {t} claims {n} rows"


def h_claim_tiles(rng, src, dst):
    _copy(src, dst)
    with fz._h5(dst) as f:
        t = json.loads(f.attrs["target"])
        key = rng.choice(["tiles_per_ipu", "num_ipus", "sram_bytes_per_tile", "clock_hz", "threads_per_tile"])
        t[key] = rng.choice([2 ** 20, 2 ** 24, 10 ** 12, 1e300, 1.5, -3, 0])
        f.attrs["target"] = np.bytes_(json.dumps(t).encode())
        return f"target.{key} = {t[key]}"


# --- inconsistent tables -------------------------------------------------------------------------
_ID_COLS = {"steps": "step", "ops": "op_id", "programs": "prog_id", "compute_sets": "cs_id",
            "variables": "var_id", "liveness_steps": "lstep"}
_REF_COLS = [("steps", "op_id"), ("steps", "prog_id"), ("programs", "parent_id"), ("programs", "op_id"),
             ("programs", "cs_id"), ("programs", "lstep"), ("programs", "first_step"),
             ("compute_sets", "op_id"), ("vertices", "cs_id"), ("variables", "op_id"),
             ("variables", "first_lstep"), ("variable_tiles", "var_id"), ("liveness_steps", "prog_id"),
             ("ops", "ipu"), ("steps", "ipu")]


def _set(f, t, c, fn):
    d = f["tables"][t][c]
    v = d[()].astype(np.int64)
    i = fn(v)
    _replace(f, f"tables/{t}/{c}", data=v.astype(d.dtype) if d.dtype.kind in "iu" and
             np.iinfo(d.dtype).max >= v.max() and np.iinfo(d.dtype).min <= v.min() else v)
    return i


def h_ids(rng, src, dst):
    """Duplicate, missing, huge (2^31-1) or shuffled ids."""
    _copy(src, dst)
    with fz._h5(dst) as f:
        t = rng.choice(sorted(_ID_COLS))
        c = _ID_COLS[t]
        how = rng.choice(["duplicate", "huge", "gap", "swap"])

        def fn(v):
            if len(v) < 2:
                v[0] = 7
                return "v[0]=7"
            i = rng.randrange(1, len(v))
            if how == "duplicate":
                v[i] = v[i - 1]
            elif how == "huge":
                v[i] = 2 ** 31 - 1
            elif how == "gap":
                v[i:] += 1
            else:
                v[i], v[i - 1] = v[i - 1], v[i]
            return i

        i = _set(f, t, c, fn)
        return f"{t}.{c} {how} at {i}"


def h_refs(rng, src, dst):
    """A reference column pointing past its table (or a program parent cycle)."""
    _copy(src, dst)
    with fz._h5(dst) as f:
        t, c = rng.choice(_REF_COLS)
        if t == "programs" and c == "parent_id" and rng.random() < 0.5:
            def cyc(v):
                n = len(v)
                a = rng.randrange(1, n)
                b = rng.randrange(1, n)
                v[a], v[b] = b, a  # a <-> b (or a self-loop when a == b)
                if rng.random() < 0.5:
                    v[0] = n - 1  # the root gets a parent
                return (a, b)
            return f"programs.parent_id cycle {_set(f, t, c, cyc)}"
        big = rng.choice([10 ** 6, 2 ** 31 - 1, 5000])

        def fn(v):
            i = rng.randrange(len(v))
            v[i] = big
            return i
        return f"{t}.{c}[{_set(f, t, c, fn)}] = {big}"


def h_duplicate_pairs(rng, src, dst):
    """variable_tiles with a duplicated (var_id, tile) row; vertices likewise."""
    _copy(src, dst)
    with fz._h5(dst) as f:
        t = rng.choice(["variable_tiles", "vertices"])
        g = f["tables"][t]
        n = g[next(iter(g))].shape[0]
        i = rng.randrange(1, n)
        for c in list(g):
            if c.endswith(".categories"):
                continue
            v = g[c][()]
            v[i] = v[i - 1]
            _replace(f, f"tables/{t}/{c}", data=v)
        return f"{t} row {i} duplicates row {i - 1}"


def h_long_string(rng, src, dst):
    """A huge op / program / variable name (1 MiB), or control characters and HTML in names."""
    _copy(src, dst)
    with fz._h5(dst) as f:
        name = _pick(rng, f, lambda n, d: n.endswith("name.categories") or n.endswith("plan.categories"))
        d = f[name]
        kind = rng.choice(["1MiB", "64KiB", "html", "formula"])
        s = {"1MiB": b"x" * (1 << 20), "64KiB": b"<b>" * (64 << 10),
             "html": b"<script>alert(1)</script>\x00\x1b[31m", "formula": b"=HYPERLINK(\"http://x\")"}[kind]
        set_category(f, name, rng.randrange(len(d)), s)
        return f"{name}: {kind} string"


def set_category(f, name: str, i: int, value: bytes) -> None:
    """Category ``i`` of the fixed-width string dataset ``name`` of the open file ``f`` becomes ``value``, the
    dataset widened to hold it."""
    cats = list(f[name][()])
    cats[i] = value
    _replace(f, name, data=np.array(cats, dtype=f"S{max(map(len, cats))}"))


def h_vlen_claim(rng, src, dst):
    """Variable-length strings claiming far more than the file holds: every column of a table as vlen
    strings claiming 10^6..10^9 rows (unallocated), a categories dataset claiming 10^6..10^8, or real vlen
    categories whose references claim 2^20..2^31 bytes each (their length fields rewritten)."""
    import h5py

    _copy(src, dst)
    kind = rng.choice(["columns", "categories", "heap"])
    vlen = h5py.string_dtype()
    with fz._h5(dst) as f:
        if kind == "columns":
            t = rng.choice(["variables", *sorted(f["tables"])])
            n = rng.choice([10 ** 6, 10 ** 8, 10 ** 9])
            for c in [c for c in f["tables"][t] if not c.endswith(".categories")]:
                chunked = rng.random() < 0.5
                _replace(f, f"tables/{t}/{c}", shape=(n,), dtype=vlen, chunks=(1 << 16,) if chunked else None)
            return f"table {t}: every column vlen strings claiming {n} rows"
        name = _pick(rng, f, lambda n, d: n.endswith(".categories"))
        if kind == "categories":
            n = rng.choice([10 ** 6, 10 ** 8])
            _replace(f, name, shape=(n,), dtype=vlen, chunks=(1 << 16,) if rng.random() < 0.5 else None)
            return f"{name}: vlen strings claiming {n} rows"
        cats = [c.decode("utf-8", "replace") for c in f[name][()]]
        d = _replace(f, name, data=np.array(cats, dtype=object), dtype=vlen)
        offset, n = d.id.get_offset(), d.size
    claim = rng.choice([1 << 20, 1 << 26, (1 << 31) - 1])
    with open(dst, "r+b") as fh:
        for i in range(n):  # each 16-byte reference starts with its string's length (uint32)
            fh.seek(offset + 16 * i)
            fh.write(struct.pack("<I", claim))
    return f"{name}: {n} vlen references claiming {claim} bytes each"


def h_null_space(rng, src, dst):
    """A dataset with a null or scalar dataspace where an array is expected."""
    _copy(src, dst)
    import h5py

    with fz._h5(dst) as f:
        name = rng.choice([n for n in _datasets(f) if n.endswith("tile_edges")] +
                          [_pick(rng, f, lambda n, d: n.startswith("tables/"))])
        d = f[name]
        attrs = dict(d.attrs)
        del f[name]
        if rng.random() < 0.5:
            f.create_dataset(name, data=h5py.Empty(d.dtype))
        else:
            f.create_dataset(name, data=np.array(3, dtype=d.dtype))
        for k, v in attrs.items():
            f[name].attrs[k] = v
        return f"{name} null/scalar dataspace"


def h_values(rng, src, dst):
    """Physically impossible values: step cycles past 2^53, memory above SRAM x 10^6, lstep ranges reversed."""
    _copy(src, dst)
    with fz._h5(dst) as f:
        t, c, val = rng.choice([("steps", "end_cycle", 2 ** 62), ("ops", "flops", 2 ** 62),
                                ("variables", "bytes", 2 ** 62), ("variable_tiles", "bytes", 2 ** 50),
                                ("programs", "repeat", 2 ** 62), ("variables", "first_lstep", 10 ** 6),
                                ("programs", "last_step", 10 ** 7), ("steps", "start_cycle", 2 ** 61)])

        def fn(v):
            i = rng.randrange(len(v))
            v[i] = val
            return i
        return f"{t}.{c}[{_set(f, t, c, fn)}] = {val}"


HOSTILE = {
    "external_storage": (h_external_storage, 3),
    "external_link": (h_external_link, 2),
    "soft_link": (h_soft_link, 1),
    "virtual": (h_virtual, 1),
    "filter": (h_filter, 2),
    "blosc_header": (h_blosc_header, 4),
    "claim_rows": (h_claim_rows, 2),
    "claim_target": (h_claim_tiles, 2),
    "ids": (h_ids, 3),
    "refs": (h_refs, 4),
    "dup_pairs": (h_duplicate_pairs, 1),
    "long_string": (h_long_string, 2),
    "null_space": (h_null_space, 1),
    "vlen_claim": (h_vlen_claim, 2),
    "values": (h_values, 2),
}


def make_cases(base: Path, folder: Path, n: int, seed: int) -> list[dict]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    secret_file(folder)
    kinds = list(HOSTILE)
    weights = [HOSTILE[k][1] for k in kinds]
    cases = []
    for i in range(n):
        rng = random.Random(f"hostile:{seed}:{i}")
        kind = kinds[i] if i < len(kinds) else rng.choices(kinds, weights)[0]
        dst = folder / f"h{i:05d}_{kind}.pvl"
        try:
            what = HOSTILE[kind][0](rng, base, dst)
        except Exception as e:  # a variation that does not apply: record and skip
            if dst.exists():
                dst.unlink()
            cases.append(dict(id=i, kind=kind, what=f"mutation failed: {type(e).__name__}: {e}", path=None))
            continue
        cases.append(dict(id=i, kind=kind, what=what, path=str(dst), views=i % VIEWS_EVERY == 0))
    return cases


# --- special files -------------------------------------------------------------------------------
def special_cases(folder: Path, start_id: int) -> list[dict]:
    """A FIFO, character devices and a symlink to a FIFO given as the profile to open."""
    folder = Path(folder)
    out = []
    fifo = folder / "fifo.pvl"
    if hasattr(os, "mkfifo") and not fifo.exists():
        os.mkfifo(fifo)
    link = folder / "link-to-fifo.pvl"
    if fifo.exists() and not link.exists():
        link.symlink_to(fifo)
    for p in (fifo, link, Path("/dev/zero"), Path("/dev/null"), Path("/dev/urandom"), Path("/proc/self/environ")):
        if p.exists() or p.is_symlink():
            out.append(dict(id=start_id + len(out), kind="special_file", what=str(p), path=str(p)))
    return out


SURFACE_KINDS = ("text_payload", "issue27", "torch_trace", "onnx", "csv")


def classify(case: dict) -> tuple[str, str]:
    """(outcome, detail) of one case in this (memory-capped) process."""
    if case.get("argv"):
        return classify_cli(case)
    if case["kind"] in SURFACE_KINDS:
        from bench import fuzz_surfaces

        return fuzz_surfaces.classify(case)
    outcome, detail = _classify_file(case)
    if outcome == "ok" and case.get("views"):  # a hostile file that opens: every view, selection, export
        from bench import fuzz_surfaces

        try:
            v_outcome, v_detail = fuzz_surfaces.views(case["path"])
        except MemoryError as e:
            return "memory", f"views: MemoryError under the cap: {e}"
        except Exception as e:  # noqa: BLE001
            from popvision_lite.errors import PopvisionError

            if isinstance(e, PopvisionError):
                return "views_refused", str(e)[:300]
            return "other_exception", f"views: {type(e).__name__}: {e}"[:300]
        return v_outcome, v_detail
    return outcome, detail


def _classify_file(case: dict) -> tuple[str, str]:
    try:
        outcome, detail = fz.classify(case["path"])
    except MemoryError as e:  # the cap was hit: the file made the reader allocate too much
        return "memory", f"MemoryError under the cap: {e}"
    if outcome == "other_exception" and detail.startswith("MemoryError"):
        return "memory", detail
    if outcome == "ok" and case["kind"] == "blosc_header":  # read every chunk, not just one window
        outcome, detail = _read_all_chunks(case["path"])
    if outcome == "ok" and case["kind"] in ("external_storage", "external_link", "virtual", "special_file"):
        return "leak", "opened a file whose data lives outside it"
    if outcome == "ok" and (case["kind"] in MUST_REFUSE or "MiB string" in case["what"]
                            or "KiB string" in case["what"]):
        return "accepted", "an inconsistent profile was read without a ProfileError"
    if SECRET.decode().split("=")[0] in detail:
        return "leak", detail
    return outcome, detail


def _read_all_chunks(path) -> tuple[str, str]:
    from popvision_lite.errors import ProfileError
    from popvision_lite.profile.reader import open_profile

    try:
        with open_profile(path) as p:
            p.step_tiles.window(0, p.num_steps)
            p.liveness.tile_bytes()
            p.memory.array()
            for sb, tb in p.step_tiles.levels:
                p.step_tiles.summary(sb, tb)
        return "ok", "damaged chunk decoded to valid data"
    except ProfileError as e:
        return "profile_error", str(e)[:300]
    except MemoryError as e:
        return "memory", str(e)[:300]
    except Exception as e:
        return "other_exception", f"{type(e).__name__}: {e}"[:300]


def classify_cli(case: dict) -> tuple[str, str]:
    import contextlib
    import io

    from popvision_lite.cli import main

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(list(case["argv"]))
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 2
    except MemoryError as e:
        return "memory", str(e)[:200]
    except Exception as e:  # a traceback instead of a message
        return "other_exception", f"{type(e).__name__}: {e}"[:300]
    msg = err.getvalue().strip()
    want = case.get("want_rc", 2)
    if rc != want and rc not in case.get("also_rc", ()):
        return "cli_bad", f"exit {rc}, expected {want}: {msg[-300:]}"
    if want == 2 and ("Traceback" in msg or not msg):
        return "cli_bad", f"exit 2 without a one-line message: {msg[-300:]}"
    field = case.get("field")
    if field and field.lower() not in msg.lower():
        return "cli_bad", f"message does not name {field!r}: {msg[-300:]}"
    return "refused" if rc == 2 else "ok", msg[-200:]


def _worker(mem_mb: int) -> int:
    return fz.serve(classify, mem_mb)


def run(cases, workers=2, timeout=30.0, mem_mb=MEM_MB, progress=None):
    return fz.run_cases(cases, workers=workers, timeout=timeout, progress=progress,
                        module="bench.fuzz_hostile", args=("--mem-mb", str(mem_mb)))


def all_cases(folder: Path, n: int, seed: int, cli: bool = True, surfaces: int = 0) -> list[dict]:
    base = fz.make_base(folder)
    cases = make_cases(base, folder / "cases", n, seed)
    cases += special_cases(folder / "cases", len(cases))
    if cli:
        cases += cli_cases(folder / "cli", len(cases), seed)
    if surfaces:
        from bench import fuzz_surfaces

        cases += fuzz_surfaces.make_cases(folder / "surfaces", base, surfaces, seed, len(cases))
    # cases that load Qt last: a worker that has hosted the views keeps Qt's threads and mappings, which
    # leave little of the address-space cap to the ONNX and trace readers of later cases
    cases.sort(key=lambda c: bool(c.get("views") or c["kind"] in ("text_payload", "issue27", "csv")))
    return cases


BAD_NUMBERS = ["nan", "inf", "-inf", "-1", "1e300", "99999999999999999999", "abc", "2.5", "", "0x10"]
EMULATE_INT_OPTS = ["--batch", "--seq", "--layers", "--hidden", "--heads", "--ipus", "--image", "--nodes",
                    "--edges", "--seed"]
TOML_FIELDS = ["batch", "seq", "layers", "hidden", "heads", "ffn", "vocab", "image", "nodes", "edges", "ipus",
               "seed", "lr"]
TOML_BAD = ["-5", "inf", "nan", "-inf", "99999999999999999999", "1e300", "true", '"many"', "[1, 2]", "{ a = 1 }",
            "1_000_000_000_000", "-0.0"]
MODEL_FOR = {"seq": "bert", "heads": "bert", "ffn": "bert", "vocab": "bert", "image": "conv", "nodes": "gnn",
             "edges": "gnn"}


def cli_cases(folder: Path, start_id: int, seed: int) -> list[dict]:
    """Command lines that must exit 2 naming the option, field or file (absolute paths: the worker runs
    in the repository)."""
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    base = fz.make_base(folder)
    out = str(folder / "out.pvl")
    cases: list[dict] = []

    def add(argv, field, what):
        cases.append(dict(id=start_id + len(cases), kind="cli", what=what, argv=[str(a) for a in argv],
                          field=field, want_rc=2, path=None))

    for opt in EMULATE_INT_OPTS:
        model = MODEL_FOR.get(opt[2:], "mlp")
        for v in BAD_NUMBERS + ["0", "1000000000"]:
            if opt == "--seed" and v in ("0", "1000000000"):
                continue  # valid seeds
            add(["emulate", model, opt, v, "-o", out], opt, f"emulate {model} {opt} {v!r}")
    for opt in ("--dpi", "--width", "--height"):
        for v in BAD_NUMBERS + ["0", "1e9", "100000"]:
            if opt == "--dpi" and v == "2.5":
                continue  # a valid resolution
            add(["export", base, "--view", "memory", opt, v, "-o", folder / "x.png"], opt, f"export {opt} {v!r}")
    for v in ("0-99999999", "5-1", "a-b", "0-1000000", "1,2,99999999999999", "-3", ",", "0-31,40"):
        add(["export", base, "--chrome-trace", "--tiles", v, "-o", folder / "t.json"], "--tiles",
            f"export --tiles {v!r}")
    i = 0
    for fld in TOML_FIELDS:
        for v in TOML_BAD:
            model = MODEL_FOR.get(fld, "mlp")
            cfg = folder / f"c{i}.toml"
            i += 1
            nested = i % 2 == 0
            cfg.write_text(f'model = "{model}"\n' + (f"[model_args]\n{fld} = {v}\n" if nested else f"{fld} = {v}\n"))
            add(["emulate", "--config", cfg, "-o", out], str(cfg), f"TOML {fld} = {v}")
    for depth in (9, 100, 5000, 200_000):
        cfg = folder / f"deep{depth}.toml"
        cfg.write_text('model = "mlp"\nx = ' + "[" * depth + "]" * depth + "\n")
        add(["emulate", "--config", cfg, "-o", out], str(cfg), f"TOML nested {depth} deep")
        cfg2 = folder / f"deept{depth}.toml"
        if depth <= 5000:
            cfg2.write_text('model = "mlp"\n[' + ".".join("a" * 1 for _ in range(depth)) + "]\nx = 1\n")
            add(["emulate", "--config", cfg2, "-o", out], str(cfg2), f"TOML tables {depth} deep")
    big = folder / "big.toml"
    big.write_text('model = "mlp"\n' + "# padding\n" * 200_000)
    add(["emulate", "--config", big, "-o", out], str(big), "2 MiB config")
    fifo = folder / "cfg.fifo"
    if hasattr(os, "mkfifo") and not fifo.exists():
        os.mkfifo(fifo)
    for special in (fifo, Path("/dev/zero"), Path("/dev/urandom"), Path("/dev/null"), folder):
        if special.exists():
            add(["emulate", "mlp", "--config", special, "-o", out], str(special), f"--config {special}")
            add(["export", special, "--view", "ops", "-o", folder / "o.csv"], str(special), f"export {special}")
    for dest in ("/dev/null", "/dev/full", str(fifo), str(folder / "newdir") + "/", str(folder) + "/",
                 "/nonexistent-folder/x.pvl"):
        add(["emulate", "mlp", "-o", dest], dest.rstrip("/") if dest.endswith("/") else dest, f"emulate -o {dest}")
    for dest, suffix in (("/dev/null", ".csv"), (str(fifo), ".csv")):
        link = folder / f"link{len(cases)}{suffix}"
        if not link.exists():
            link.symlink_to(dest)
        add(["export", base, "--view", "ops", "-o", link], str(link), f"export -o symlink to {dest}")
    for huge in (["mlp", "--batch", "65536", "--hidden", "65536"], ["bert", "--hidden", "60000", "--heads", "4"],
                 ["gnn", "--nodes", "16000000", "--hidden", "4096"], ["conv", "--image", "8192", "--hidden", "4096"]):
        add(["emulate", *huge, "-o", out], "--", f"huge numeric run {' '.join(huge)}")
    return cases


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench.fuzz_hostile", description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=2400, help="hostile profile files (plus special files, CLI)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--mem-mb", type=int, default=MEM_MB, help="address-space cap of a worker (MiB)")
    ap.add_argument("--surface-cases", type=int, default=2300,
                    help="round-3 cases: text payloads, traces, ONNX, sweep CSVs (bench.fuzz_surfaces)")
    ap.add_argument("--keep", help="keep the case files in this folder")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args.mem_mb)
    tmp = None
    folder = Path(args.keep) if args.keep else Path(tmp := tempfile.mkdtemp(prefix="pvl-hostile-"))
    folder.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    try:
        os.chdir(folder)  # relative external paths resolve here, never in the repository
        t0 = time.perf_counter()
        cases = all_cases(folder, args.cases, args.seed, surfaces=args.surface_cases)
        t1 = time.perf_counter()
        results = run(cases, workers=args.workers, timeout=args.timeout, mem_mb=args.mem_mb)
        t2 = time.perf_counter()
    finally:
        os.chdir(cwd)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    by, fails = fz.print_outcomes(
        results, FAILS, f"hostile inputs: {len(results)} cases (seed {args.seed}) made in {t1 - t0:.1f} s, run in "
        f"{t2 - t1:.1f} s by {args.workers} workers (cap {args.mem_mb} MiB, timeout {args.timeout:.0f} s)")
    print(f"failures: {len(fails)}")
    print("BENCH-RESULT " + json.dumps({"bench": "fuzz_hostile", "cases": len(results), "seed": args.seed,
                                        "outcomes": dict(by), "failures": len(fails),
                                        "seconds": round(t2 - t1, 1)}))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
