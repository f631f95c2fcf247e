"""The operations table and its name filter."""

import re

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis.operations import COLUMNS, filter_ops, name_mask, ops_table
from tests.support.insights_profile import write_small


@pytest.fixture(scope="module")
def prof(tmp_path_factory):
    path = write_small(tmp_path_factory.mktemp("ops") / "small.pvl")
    with pvl.open(path) as p:
        yield p


def test_table_columns_and_share(prof):
    df = ops_table(prof)
    assert list(df.columns) == [c for c, _ in COLUMNS]
    assert df.index.tolist() == sorted(prof.stored_table("ops")["op_id"].tolist())
    st = prof.stored_table("steps")
    total = st["end_cycle"].max() - st["start_cycle"].min()
    for op, row in df.iterrows():
        own = (st["end_cycle"] - st["start_cycle"])[st["op_id"] == op].sum()
        assert row["cycles"] == own
        assert row["pct_run"] == pytest.approx(100.0 * own / total)
    assert df["cycles"].dtype.kind == "i" and df["flops"].dtype.kind == "i"


def test_filter_substring_case_insensitive(prof):
    df = ops_table(prof)
    assert filter_ops(df, "MATMUL")["name"].tolist() == ["fwd/matmul"]
    assert filter_ops(df, "fwd/")["name"].tolist() == ["fwd/matmul", "fwd/relu"]
    assert len(filter_ops(df, "")) == len(df)
    assert len(filter_ops(df, "nothing-like-this")) == 0


def test_filter_regex(prof):
    df = ops_table(prof)
    assert filter_ops(df, r"^(FWD|bwd)/.*u", regex=True)["name"].tolist() == ["fwd/matmul", "fwd/relu"]
    # '.' is literal in substring mode
    assert not name_mask(["fwd/relu"], "fwd.relu").any()
    assert name_mask(["fwd/relu"], "fwd.relu", regex=True).all()
    with pytest.raises(re.error):
        name_mask(["a"], "(", regex=True)
    assert name_mask(np.array(["a", "B"]), "b").tolist() == [False, True]
