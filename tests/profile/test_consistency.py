"""The consistency validator (popvision_lite/profile/consistency.py): every case the hostile-input campaign
found making analysis raise KeyError/IndexError/..., freeze or allocate gigabytes is a ProfileError naming
table, column and first bad row before any view sees the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import fuzz_hostile as fh  # noqa: E402
from bench import fuzz_profiles as fz  # noqa: E402
from popvision_lite.errors import ProfileError  # noqa: E402
from popvision_lite.profile import consistency  # noqa: E402
from popvision_lite.profile.reader import open_profile  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return fz.make_base(tmp_path_factory.mktemp("validate"))


@pytest.fixture
def edit(base, tmp_path):
    def make(table, col, fn):
        f = tmp_path / f"{table}_{col}.pvl"
        f.write_bytes(base.read_bytes())
        with fz._h5(f) as h:
            v = h[f"tables/{table}/{col}"][()].astype(np.int64)
            fn(v)
            fh._replace(h, f"tables/{table}/{col}", data=v)
        return f
    return make


def _table_error(path, table, *words):
    with open_profile(path) as p:
        with pytest.raises(ProfileError) as ei:
            p.table(table)
    msg = str(ei.value)
    assert msg.startswith(f"{path}: table '{table}'"), msg
    for w in words:
        assert w in msg, (w, msg)
    return msg


def test_duplicate_program_id(edit):
    f = edit("programs", "prog_id", lambda v: v.__setitem__(3, 2))
    _table_error(f, "programs", "column 'prog_id' row 3", "id 2, expected 3")


def test_huge_program_id(edit):
    """prog_id 2^31-1 made the program tree allocate 16 GiB."""
    f = edit("programs", "prog_id", lambda v: v.__setitem__(len(v) - 1, 2 ** 31 - 1))
    _table_error(f, "programs", "column 'prog_id'", str(2 ** 31 - 1))


def test_parent_cycle(edit):
    """A parent cycle made ProgramTree.path_to loop for ever."""
    def cyc(v):
        v[2], v[3] = 3, 2
    f = edit("programs", "parent_id", cyc)
    _table_error(f, "programs", "column 'parent_id' row 2", "not an earlier row")


def test_parent_out_of_range(edit):
    f = edit("programs", "parent_id", lambda v: v.__setitem__(1, 10 ** 6))
    _table_error(f, "programs", "column 'parent_id' row 1")


@pytest.mark.parametrize("table,col,ref", [("steps", "op_id", "ops"), ("steps", "prog_id", "programs"),
                                           ("vertices", "cs_id", "compute_sets"),
                                           ("variable_tiles", "var_id", "variables"),
                                           ("liveness_steps", "prog_id", "programs")])
def test_reference_past_its_table(edit, table, col, ref):
    f = edit(table, col, lambda v: v.__setitem__(0, 5000))
    _table_error(f, table, f"column '{col}' row 0", f"table '{ref}'")


def _row_5_as_row_4(base, tmp_path, table: str, cols, fix=None):
    """A copy of the base profile whose row 5 of ``table`` repeats row 4 in ``cols`` (``fix(h, col, values)`` may
    change a column's values before they are written)."""
    f = tmp_path / f"dup_{table}.pvl"
    f.write_bytes(base.read_bytes())
    with fz._h5(f) as h:
        for c in cols:
            v = h[f"tables/{table}/{c}"][()]
            v[5] = v[4]
            if fix is not None:
                fix(h, c, v)
            fh._replace(h, f"tables/{table}/{c}", data=v)
    return f


def test_duplicate_variable_on_a_tile(base, tmp_path):
    f = _row_5_as_row_4(base, tmp_path, "variable_tiles", ("var_id", "tile", "bytes"))
    _table_error(f, "variable_tiles", "row 5", "listed twice")


@pytest.mark.parametrize("same_code", [True, False], ids=["same code", "a repeated category"])
def test_duplicate_vertex_row(base, tmp_path, same_code):
    """A (cs_id, codelet, tile) listed twice is refused, whether the two rows share the codelet's dictionary code or
    name the same text through two categories (the key then comes from the texts, not the codes: decision 0455)."""
    def repeat_category(h, c, v):  # row 5 names row 4's text through a new, repeated category
        if c == "codelet" and not same_code:
            cats = list(h["tables/vertices/codelet.categories"][()])
            cats.append(cats[v[4]])
            v[5] = len(cats) - 1
            fh._replace(h, "tables/vertices/codelet.categories", data=np.array(cats))

    f = _row_5_as_row_4(base, tmp_path, "vertices", ("cs_id", "codelet", "tile"), repeat_category)
    _table_error(f, "vertices", "row 5", "listed twice")


def test_a_one_mib_name_is_refused(base, tmp_path):
    """A 1 MiB op name froze Insights for ~110 s."""
    f = tmp_path / "long.pvl"
    f.write_bytes(base.read_bytes())
    with fz._h5(f) as h:
        fh.set_category(h, "tables/ops/name.categories", 0, b"x" * (1 << 20))
    _table_error(f, "ops", "column 'name'", "1048576 characters")


@pytest.mark.parametrize("key,value,word", [("clock_hz", 1e300, "clock_hz"), ("tiles_per_ipu", 2 ** 20, "tiles_per_ipu"),
                                            ("num_ipus", 5000, "num_ipus"),
                                            ("sram_bytes_per_tile", 10 ** 12, "sram_bytes_per_tile")])
def test_impossible_target(base, tmp_path, key, value, word):
    f = tmp_path / "target.pvl"
    f.write_bytes(base.read_bytes())
    with fz._h5(f) as h:
        t = json.loads(h.attrs["target"])
        t[key] = value
        h.attrs["target"] = np.bytes_(json.dumps(t).encode())
    with pytest.raises(ProfileError, match=f"target.{word}"):
        open_profile(f)


def test_null_dataspace_tile_edges(base, tmp_path):
    f = tmp_path / "null.pvl"
    f.write_bytes(base.read_bytes())
    with fz._h5(f) as h:
        del h["summaries/s16_t16/tile_edges"]
        h.create_dataset("summaries/s16_t16/tile_edges", data=h5py.Empty("i8"))
    with open_profile(f) as p:
        with pytest.raises(ProfileError, match="tile_edges"):
            p.step_tiles.summary(16, 16)


def test_clip():
    assert consistency.clip("abc") == "abc"
    s = consistency.clip("x" * 10_000)
    assert len(s) == consistency.DISPLAY_CHARS and s.endswith("\u2026")


# Every bundled sample passing these checks (each table read and converted to its notebook form) is
# test_hostile_files.py::test_sample_profiles_pass_the_safe_opener, which reads all of every sample the way the app does.
