"""Copies of a profile with its header's ``run`` object or one table column changed, as another producer (or a
hostile one) could write them: the run-record and phases tests (tests/profile/test_run_record.py) and the fuzzer
of those surfaces (bench/fuzz_records.py) build their cases with these."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401 - the Blosc filter the profile's tables are compressed with
import numpy as np


def with_run(src, dst, change: Callable[[dict], None]) -> Path:
    """A copy of ``src`` at ``dst`` whose header ``run`` object is ``change``\\ d in place (a fixed-length UTF-8
    attribute, as the writer stores it)."""
    dst = Path(dst)
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        run = json.loads(f.attrs["run"])
        change(run)
        f.attrs["run"] = np.bytes_(json.dumps(run).encode())
    return dst


def set_column(path, table: str, column: str, values) -> None:
    """Replace the stored column ``table/column`` of ``path`` by ``values`` (dtype kept when it holds them); the
    table's other columns keep their length, so a change of length is the caller's to make for each."""
    with h5py.File(path, "r+") as f:
        g = f[f"tables/{table}"]
        attrs = dict(g[column].attrs)
        dtype = g[column].dtype
        del g[column]
        arr = np.asarray(values)
        g.create_dataset(column, data=arr.astype(dtype) if np.can_cast(arr, dtype, "same_kind") else arr)
        for k, v in attrs.items():
            g[column].attrs[k] = v


def columns(path, table: str) -> dict[str, np.ndarray]:
    """The stored (numeric or code) columns of ``table`` in ``path``."""
    with h5py.File(path, "r") as f:
        g = f[f"tables/{table}"]
        return {c: g[c][()] for c in g if not c.endswith(".categories")}


def resize_table(path, table: str, n: int, fill: dict | None = None) -> None:
    """Make every column of ``table`` ``n`` rows long (values repeated; ``fill``: column -> new values)."""
    cols = columns(path, table)
    for c, v in cols.items():
        new = (fill or {}).get(c)
        set_column(path, table, c, np.resize(v, n) if new is None else new)
