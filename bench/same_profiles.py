"""Do two profiles hold the same data?  ``python -m bench.same_profiles A.pvl B.pvl`` exits 0 when they do.

A speed change to the emulator must leave every cycle and byte as it was.  This walks both HDF5 files and
compares every group, dataset (shape, dtype and every value, exactly) and attribute; the run record's
``created`` time stamp is the one field allowed to differ.  It prints each difference (at most ``--limit``)
and exits 1 on any.

Two files of the same major format version (the main use: main vs a branch, both writing format 4) are compared
dataset for dataset, as above.  Files of different major versions store the step x tile arrays differently
(format 3: a row per step over every tile and the ``step_tile_stored`` marks; format 4: rows of one IPU's tiles
named by ``<array>.rows``, decision 0400): then those datasets and the ``format_version`` / ``format_minor``
attributes are left out of the walk, and the three arrays are compared as the reader expands them
(``Profile.step_tiles.window`` over every step, exactly); every other dataset and attribute as above.
"""

from __future__ import annotations

import argparse
import json
import sys

import h5py
import hdf5plugin  # noqa: F401  (registers the Blosc filter profiles are written with)
import numpy as np

IGNORED_RUN_KEYS = ("created",)
STEP_TILE_ARRAYS = ("step_tile_cycles", "step_tile_bytes_in", "step_tile_bytes_out")
# what differs in layout, not meaning, between major format versions (compared through the reader instead)
LAYOUT_DATASETS = {f"arrays/{n}" for n in STEP_TILE_ARRAYS} | {f"arrays/{n}.rows" for n in STEP_TILE_ARRAYS} | {
    "arrays/step_tile_stored"}
VERSION_ATTRS = ("format_version", "format_minor")
READ_BATCH = 1024  # steps per window read when comparing through the reader


def _attr(name: str, value):
    if name == "run":
        run = json.loads(value if isinstance(value, (str, bytes)) else bytes(value))
        return {k: v for k, v in run.items() if k not in IGNORED_RUN_KEYS}
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _items(f: h5py.File) -> dict[str, h5py.Group | h5py.Dataset]:
    out = {"/": f}
    f.visititems(lambda name, obj: out.__setitem__(name, obj))
    return out


def _expanded_differences(path_a, path_b) -> list[str]:
    """The step x tile arrays of two profiles as the reader gives them (dense, every step and tile), compared."""
    import popvision_lite as pvl

    found = []
    with pvl.open(path_a) as pa, pvl.open(path_b) as pb:
        if pa.step_tiles.shape != pb.step_tiles.shape:
            return [f"step x tile arrays: shape {pa.step_tiles.shape} vs {pb.step_tiles.shape}"]
        diff = dict.fromkeys(STEP_TILE_ARRAYS, 0)
        for i in range(0, pa.num_steps, READ_BATCH):
            j = min(pa.num_steps, i + READ_BATCH)
            for name, x, y in zip(STEP_TILE_ARRAYS, pa.step_tiles.window(i, j), pb.step_tiles.window(i, j),
                                  strict=True):
                diff[name] += int(np.count_nonzero(x != y))
        found += [f"arrays/{n} (as read): {k} value(s) differ" for n, k in diff.items() if k]
    return found


def differences(path_a, path_b, limit: int = 20) -> list[str]:
    """Every difference between the two files (at most ``limit``), as one line each."""
    found: list[str] = []
    with h5py.File(path_a, "r") as fa, h5py.File(path_b, "r") as fb:
        a, b = _items(fa), _items(fb)
        mixed = int(fa.attrs.get("format_version", 0)) != int(fb.attrs.get("format_version", 0))
        if mixed:  # different layouts of the step x tile arrays: compared as the reader expands them
            a = {k: v for k, v in a.items() if k not in LAYOUT_DATASETS}
            b = {k: v for k, v in b.items() if k not in LAYOUT_DATASETS}
        for name in sorted(set(a) ^ set(b)):
            found.append(f"{name}: only in {path_a if name in a else path_b}")
        for name in sorted(set(a) & set(b)):
            oa, ob = a[name], b[name]
            if type(oa) is not type(ob):
                found.append(f"{name}: a {type(oa).__name__} in one file, a {type(ob).__name__} in the other")
                continue
            if isinstance(oa, h5py.Dataset):
                if oa.shape != ob.shape or oa.dtype != ob.dtype:
                    found.append(f"{name}: shape / dtype {oa.shape} {oa.dtype} vs {ob.shape} {ob.dtype}")
                elif not np.array_equal(oa[()], ob[()]):
                    va, vb = np.asarray(oa[()]), np.asarray(ob[()])
                    n = int(np.count_nonzero(va != vb)) if va.shape else 1
                    found.append(f"{name}: {n} value(s) differ")
            for key in sorted(set(oa.attrs) | set(ob.attrs)):
                if mixed and name == "/" and key in VERSION_ATTRS:
                    continue
                if key not in oa.attrs or key not in ob.attrs:
                    found.append(f"{name}: attribute {key!r} in one file only")
                elif _attr(key, oa.attrs[key]) != _attr(key, ob.attrs[key]):
                    found.append(f"{name}: attribute {key!r} differs")
            if len(found) >= limit:
                break
    if mixed and len(found) < limit:
        found += _expanded_differences(path_a, path_b)
    return found[:limit]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.same_profiles", description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--limit", type=int, default=20, help="print at most this many differences (default 20)")
    args = p.parse_args(argv)
    found = differences(args.a, args.b, args.limit)
    for line in found:
        print(line)
    print("same" if not found else f"{len(found)}{'+' if len(found) >= args.limit else ''} difference(s)")
    return 0 if not found else 1


if __name__ == "__main__":
    sys.exit(main())
