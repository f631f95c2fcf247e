"""The profile assembler: typed tables, parts joined by the schema's key map, program step spans."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from popvision_lite.profile import consistency, schema
from popvision_lite.profile.assemble import Part, concat_parts, key_columns, program_step_spans, typed_table
from popvision_lite.testing.synthetic import make_synthetic

PART_TABLES = ("ops", "programs", "compute_sets", "vertices", "variables", "variable_tiles", "liveness_steps")


class _Bad(Exception):
    pass


def _parts():
    a = make_synthetic(num_ipus=1, tiles_per_ipu=16, num_steps=60, seed=1, num_layers=1)
    b = make_synthetic(num_ipus=1, tiles_per_ipu=16, num_steps=90, seed=2, num_layers=2)
    return a, b, [Part({n: getattr(a, n) for n in PART_TABLES}, first_tile=0),
                  Part({n: getattr(b, n) for n in PART_TABLES}, first_tile=16)]


def test_joined_parts_pass_every_key_check_of_a_profile_file():
    _a, _b, parts = _parts()
    tables, _ = concat_parts(parts)
    # the steps are composed by the producer: references to them are left for it to fill
    assert (tables["programs"][["first_step", "last_step"]] == -1).all().all()
    counts = {n: len(df) for n, df in tables.items()} | {"steps": 0, "phases": 0}

    def err(msg):
        return _Bad(msg)

    for name, df in tables.items():
        consistency.check_table(name, typed_table(name, df), counts, err, num_tiles=32)


def test_ids_references_and_tiles_of_a_later_part_are_shifted_past_the_earlier_parts():
    a, b, parts = _parts()
    tables, offsets = concat_parts(parts)
    n_ops, n_prog, n_cs, n_var, n_l = (len(a.ops), len(a.programs), len(a.compute_sets), len(a.variables),
                                       len(a.liveness_steps))
    assert offsets[1] == {"ops": n_ops, "programs": n_prog, "compute_sets": n_cs, "vertices": len(a.vertices),
                          "variables": n_var, "variable_tiles": len(a.variable_tiles), "liveness_steps": n_l,
                          "tile": 16}
    pr = tables["programs"].iloc[n_prog:].reset_index(drop=True)
    want = b.programs
    np.testing.assert_array_equal(pr.prog_id, want.prog_id + n_prog)
    np.testing.assert_array_equal(pr.parent_id, np.where(want.parent_id >= 0, want.parent_id + n_prog, -1))
    np.testing.assert_array_equal(pr.op_id, np.where(want.op_id >= 0, want.op_id + n_ops, -1))
    np.testing.assert_array_equal(pr.cs_id, np.where(want.cs_id >= 0, want.cs_id + n_cs, -1))
    np.testing.assert_array_equal(pr.lstep, np.where(want.lstep >= 0, want.lstep + n_l, -1))
    vr = tables["variables"].iloc[n_var:].reset_index(drop=True)
    np.testing.assert_array_equal(vr.first_lstep, np.where(b.variables.first_lstep >= 0,
                                                           b.variables.first_lstep + n_l, -1))
    vt = tables["variable_tiles"].iloc[len(a.variable_tiles):]
    np.testing.assert_array_equal(vt.tile, b.variable_tiles.tile + 16)
    np.testing.assert_array_equal(vt.var_id, b.variable_tiles.var_id + n_var)
    ls = tables["liveness_steps"].iloc[n_l:]
    np.testing.assert_array_equal(ls.max_tile, b.liveness_steps.max_tile + 16)
    # the first part keeps its ids; values that are not keys are untouched
    pd.testing.assert_frame_equal(tables["ops"].iloc[:n_ops], a.ops, check_dtype=False)
    np.testing.assert_array_equal(tables["ops"].cycles.iloc[n_ops:], b.ops.cycles)


def test_key_map_names_every_id_and_reference_column():
    for (table, col), (ref, _) in schema.REFERENCES.items():
        assert key_columns(table)[col] == ref
    for table, col in schema.ID_COLUMNS.items():
        assert key_columns(table)[col] == table
    assert key_columns("programs")["parent_id"] == "programs"
    assert key_columns("vertices")["tile"] == "tile" and key_columns("liveness_steps")["max_tile"] == "tile"


def test_typed_table_orders_and_casts_columns_as_stored():
    rows = [dict(cs_id=1, name="b", op_id=-1, num_vertices=3, num_tiles=2, extra="dropped"),
            dict(cs_id=0, name="a", op_id=4, num_vertices=0, num_tiles=0, extra="dropped")]
    df = typed_table("compute_sets", pd.DataFrame(rows).iloc[:, ::-1])
    assert list(df.columns) == list(schema.TABLE_COLUMNS["compute_sets"])
    assert [str(df[c].dtype) for c in ("cs_id", "op_id", "num_vertices", "num_tiles")] == [
        "int32", "int32", "int64", "int32"]
    assert df.name.tolist() == ["b", "a"]
    empty = typed_table("ops", [])
    assert len(empty) == 0 and str(empty.flops.dtype) == "int64"


@pytest.mark.parametrize("steps, first, last", [
    # programs: 0 root, 1 Repeat under it, 2 and 3 leaves under 1, 4 a leaf of the root that never ran
    ([2, 3, 2, 3, 2], [0, 0, 0, 1, -1], [4, 4, 4, 3, -1]),
    ([3, -1, 3], [0, 0, -1, 0, -1], [2, 2, -1, 2, -1]),
    ([], [-1] * 5, [-1] * 5),
])
def test_program_step_spans_from_leaves_up_the_tree(steps, first, last):
    parent = np.array([-1, 0, 1, 1, 0])
    f, la = program_step_spans(parent, np.array(steps, np.int64))
    assert f.tolist() == first and la.tolist() == last
