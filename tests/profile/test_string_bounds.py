"""The size bound covers variable-length strings: a claim is refused from the file's metadata (or the raw
heap references) before anything is decoded, without allocating."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

from bench import fuzz_hostile as fh
from bench import fuzz_profiles as fz
from popvision_lite.errors import ProfileError
from popvision_lite.profile.reader import open_profile

VLEN = h5py.string_dtype()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return fz.make_base(tmp_path_factory.mktemp("vlen"))


def _copy(base, tmp_path, name="bad.pvl") -> Path:
    dst = tmp_path / name
    shutil.copyfile(base, dst)
    return dst


def _as_vlen(f, path, n=None, chunked=False, data=None):
    attrs = dict(f[path].attrs)
    del f[path]
    if data is not None:
        ds = f.create_dataset(path, data=np.array(data, dtype=object), dtype=VLEN)
    else:
        ds = f.create_dataset(path, shape=(n,), dtype=VLEN, chunks=(1 << 16,) if chunked else None)
    for k, v in attrs.items():
        ds.attrs[k] = v
    return ds


@pytest.mark.parametrize("chunked", [False, True])
def test_variables_columns_claiming_1e9_vlen_rows_are_refused_before_reading(base, tmp_path, chunked):
    f = _copy(base, tmp_path)
    with h5py.File(f, "r+") as h:
        for c in [c for c in h["tables/variables"] if not c.endswith(".categories")]:
            _as_vlen(h, f"tables/variables/{c}", 10 ** 9, chunked)
    assert f.stat().st_size < 1 << 20
    with open_profile(f) as p:  # the variables table is checked when first read
        with pytest.raises(ProfileError, match=r"tables/variables/\w+' claims 16000000000 bytes but stores") as ei:
            p.table("variables")
    assert str(ei.value).startswith(f"{f}: ")


def test_the_refusal_allocates_nothing(base, tmp_path):
    """In a process capped at 1 GiB of address space above what it has, the read of 10^9 claimed strings
    is a ProfileError (a read would need tens of GB)."""
    f = _copy(base, tmp_path)
    with h5py.File(f, "r+") as h:
        for c in [c for c in h["tables/variables"] if not c.endswith(".categories")]:
            _as_vlen(h, f"tables/variables/{c}", 10 ** 9)
    code = textwrap.dedent(f"""
        import resource, sys
        import popvision_lite as pvl
        from popvision_lite.errors import ProfileError
        import h5py, hdf5plugin, pandas
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        rss = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (rss + (1 << 30), hard))
        try:
            pvl.open({str(f)!r}).variables
        except ProfileError as e:
            print('REFUSED', e)
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr[-800:]
    assert "REFUSED" in r.stdout and "claims" in r.stdout, r.stdout


def test_categories_claiming_1e8_vlen_rows_are_refused(base, tmp_path):
    f = _copy(base, tmp_path)
    with h5py.File(f, "r+") as h:
        _as_vlen(h, "tables/ops/name.categories", 10 ** 8)
    with open_profile(f) as p, pytest.raises(ProfileError, match="name.categories' claims"):
        p.table("ops")


def _heap_claim(base, tmp_path, claim: int) -> Path:
    f = _copy(base, tmp_path)
    with h5py.File(f, "r+") as h:
        cats = [c.decode() for c in h["tables/ops/name.categories"][()]]
        d = _as_vlen(h, "tables/ops/name.categories", data=cats)
        offset, n = d.id.get_offset(), d.size
    with open(f, "r+b") as fh_:
        for i in range(n):  # the string length at the start of each 16-byte heap reference
            fh_.seek(offset + 16 * i)
            fh_.write(struct.pack("<I", claim))
    return f


def test_real_vlen_categories_still_read(base, tmp_path):
    """Files with variable-length string categories (written before fixed-length ones) stay readable."""
    f = _copy(base, tmp_path)
    with open_profile(f) as p:
        want = list(p.ops["name"])
    with h5py.File(f, "r+") as h:
        cats = [c.decode() for c in h["tables/ops/name.categories"][()]]
        _as_vlen(h, "tables/ops/name.categories", data=cats)
    with open_profile(f) as p:
        assert list(p.ops["name"]) == want


def test_heap_references_claiming_more_than_the_file_are_refused(base, tmp_path):
    f = _heap_claim(base, tmp_path, 1 << 26)
    with open_profile(f) as p, pytest.raises(ProfileError, match="references .* bytes of strings but the file"):
        p.table("ops")


def test_chunked_vlen_strings_cannot_be_bounded_and_are_refused(base, tmp_path):
    f = _copy(base, tmp_path)
    with h5py.File(f, "r+") as h:
        cats = [c.decode() for c in h["tables/ops/name.categories"][()]]
        attrs = dict(h["tables/ops/name.categories"].attrs)
        del h["tables/ops/name.categories"]
        h.create_dataset("tables/ops/name.categories", data=np.array(cats, dtype=object), dtype=VLEN, chunks=(4,))
        for k, v in attrs.items():
            h["tables/ops/name.categories"].attrs[k] = v
    with open_profile(f) as p, pytest.raises(ProfileError, match="cannot be bounded"):
        p.table("ops")


@pytest.mark.parametrize("seed", range(6))
def test_fuzzer_vlen_claims_are_refused(base, tmp_path, seed):
    f = tmp_path / "vlen.pvl"
    what = fh.h_vlen_claim(random.Random(seed), base, f)
    outcome, detail = fz.classify(f)
    assert outcome == "profile_error", (what, outcome, detail)
