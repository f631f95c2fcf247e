"""The profile's typed columnar tables (profile/columns.py): what the emulator builds and the writer writes without
pandas; their checks name the table and the column, and a ProfileData of them writes the file a ProfileData of
DataFrames writes."""

from __future__ import annotations

import h5py
import numpy as np
import pandas as pd
import pytest

from popvision_lite.profile import schema
from popvision_lite.profile.assemble import typed_table
from popvision_lite.profile.columns import Columns, TableError
from popvision_lite.profile.reader import open_profile
from popvision_lite.profile.writer import write_profile
from popvision_lite.testing.synthetic import make_synthetic


def _ints(n, dt):
    return np.arange(n, dtype=dt)


def _var_tiles(**over):
    data = {"var_id": _ints(3, np.int32), "tile": _ints(3, np.int32), "bytes": _ints(3, np.int64)}
    data.update(over)
    return data


def test_a_column_of_the_wrong_dtype_is_refused_naming_the_table_and_column():
    with pytest.raises(TableError, match=r"table 'variable_tiles' column 'tile' has dtype int64, must be int32"):
        Columns("variable_tiles", _var_tiles(tile=_ints(3, np.int64)))
    with pytest.raises(TableError, match=r"table 'compute_sets' column 'name' has dtype <U1, must be object"):
        Columns("compute_sets", {"cs_id": _ints(1, np.int32), "name": np.array(["a"]), "op_id": _ints(1, np.int32),
                                 "num_vertices": _ints(1, np.int64), "num_tiles": _ints(1, np.int32)})


def test_a_column_of_another_length_is_refused_naming_the_table_and_column():
    with pytest.raises(TableError, match=r"table 'variable_tiles' column 'bytes' has 2 rows, column 'var_id' 3"):
        Columns("variable_tiles", _var_tiles(bytes=_ints(2, np.int64)))
    t = Columns("variable_tiles", _var_tiles())
    with pytest.raises(TableError, match=r"table 'variable_tiles' column 'tile': 4 values for 3 rows"):
        t["tile"] = np.arange(4)


def test_a_missing_extra_or_not_flat_column_is_refused():
    data = _var_tiles()
    del data["bytes"]
    with pytest.raises(TableError, match=r"table 'variable_tiles' lacks column\(s\) \['bytes'\]"):
        Columns("variable_tiles", data)
    with pytest.raises(TableError, match=r"table 'variable_tiles' has column\(s\) \['x'\] not in the schema"):
        Columns("variable_tiles", _var_tiles(x=_ints(3, np.int64)))
    with pytest.raises(TableError, match=r"table 'variable_tiles' column 'var_id' must be a 1-D numpy array"):
        Columns("variable_tiles", _var_tiles(var_id=[0, 1, 2]))


def test_typed_casts_to_the_stored_dtypes_and_refuses_what_does_not_fit():
    t = Columns.typed("variable_tiles", [(0, 5, 7), (1, 6, 8)])  # row tuples in the stored column order
    assert [str(t[c].dtype) for c in t.columns] == ["int32", "int32", "int64"]
    assert t["tile"].tolist() == [5, 6]
    with pytest.raises(TableError, match=r"table 'variable_tiles' column 'tile' has values 0..4294967296 outside "
                                         r"int32"):
        Columns.typed("variable_tiles", {"var_id": [0, 1], "tile": [0, 2**32], "bytes": [1, 2]})
    with pytest.raises(TableError, match=r"table 'variable_tiles' column 'bytes' has NaN/inf but must be int64"):
        Columns.typed("variable_tiles", {"var_id": [0], "tile": [0], "bytes": [np.nan]})
    t = Columns.typed("compute_sets", [dict(cs_id=0, name=None, op_id=-1, num_vertices=2, num_tiles=1)])
    assert t["name"].tolist() == [""]  # missing text is "", as the writer stores a DataFrame's


def test_frame_is_the_typed_table_of_the_same_rows():
    rows = [dict(cs_id=1, name="b", op_id=-1, num_vertices=3, num_tiles=2),
            dict(cs_id=0, name="a", op_id=4, num_vertices=0, num_tiles=0)]
    pd.testing.assert_frame_equal(Columns.typed("compute_sets", rows).frame(), typed_table("compute_sets", rows))


def _as_columns(data: schema.ProfileData) -> schema.ProfileData:
    kw = dict(data.__dict__)
    for name in schema.TABLE_COLUMNS:
        if kw.get(name) is not None:
            kw[name] = Columns.typed(name, kw[name])
    return schema.ProfileData(**kw)


def test_profile_data_of_columns_writes_the_file_of_dataframes(tmp_path):
    frames = make_synthetic(num_ipus=2, tiles_per_ipu=16, num_steps=300, seed=4, num_layers=2)
    cols = _as_columns(frames)
    assert isinstance(cols.table("ops"), Columns)
    a = write_profile(tmp_path / "frames.pvl", frames)
    b = write_profile(tmp_path / "columns.pvl", cols)
    assert isinstance(cols.table("ops"), Columns)  # the writer built no DataFrame
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:  # every table's dataset and attribute, exactly
        assert _datasets(fa["tables"]) == _datasets(fb["tables"])
        assert _datasets(fa["arrays"]) == _datasets(fb["arrays"])


def _datasets(group) -> dict:
    out = {}

    def visit(name, obj):
        attrs = {k: np.asarray(v).tolist() for k, v in obj.attrs.items()}
        out[name] = (str(obj.dtype), obj[()].tolist(), attrs) if isinstance(obj, h5py.Dataset) else attrs

    group.visititems(visit)
    return out


def test_a_table_read_as_a_dataframe_is_built_once_and_what_is_written(tmp_path):
    data = _as_columns(make_synthetic(num_ipus=1, tiles_per_ipu=16, num_steps=40, seed=5, num_layers=1))
    ops = data.ops
    assert isinstance(ops, pd.DataFrame) and data.ops is ops and data.table("ops") is ops
    ops.loc[0, "plan"] = "changed in place"  # a caller's change to the frame it was handed is written
    with open_profile(write_profile(tmp_path / "p.pvl", data)) as p:
        assert p.stored_table("ops")["plan"].iloc[0] == "changed in place"
    assert data.num_rows("ops") == len(ops) and data.num_rows("phases") == 0
