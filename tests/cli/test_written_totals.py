"""``emulate``'s time split line comes from the run in memory (``cli.info.written_totals``), not from the profile
read back: every number ``run_totals`` gives from the ProfileData is the one it gives from the file written from
it, for a pipelined training run (phases the writer builds from the schedule), a tensor-parallel phased run
with Adam and RTS (neither fits the tests' device) and one graph over the IPUs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from popvision_lite.cli.info import profile_totals, time_split_line, written_totals
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model, write_run
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

CASES = {
    "pipelined training": ("bert-tiny", dict(ipus=4, replicas=2, pipeline_stages=2, grad_accum=4, seq=32)),
    "tensor parallel, phased": ("gpt3-small", dict(layers=2, batch=1, seq=32, ipus=4, replicas=2, tensor_parallel=2,
                                                   grad_accum=4, recompute=True, optimizer="adam", rts=True)),
    "one graph": ("mlp", dict(hidden=64, layers=2, batch=4)),
}


def _same(a, b, where):
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_dtype=False, obj=where)
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b, where


@pytest.mark.parametrize("case", list(CASES))
def test_the_totals_of_the_run_in_memory_are_those_of_its_file(tmp_path, case):
    model, kw = CASES[case]
    cfg = make_config(model, **kw)
    run = run_model(cfg, SMALL, timing_only=True)
    # (on the tests' 92-tile device the pipelined and tensor-parallel runs do not fit: their totals as well)
    path = tmp_path / "run.pvl"
    write_run(run, path)
    mem, disk = written_totals(run.profile_data), profile_totals(path)
    for f in dataclasses.fields(mem):
        _same(getattr(mem, f.name), getattr(disk, f.name), f"{case}: {f.name}")
    training = bool(cfg.training)
    assert time_split_line(mem, training=training) == time_split_line(disk, training=training)
