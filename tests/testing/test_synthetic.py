"""Synthetic profiles stand in for real runs in tests and benchmarks, so they must respect the
device spec's bandwidths: no op moves bytes faster than its level allows."""

import pytest

from popvision_lite.devices import load_device
from popvision_lite.testing.synthetic import make_synthetic


@pytest.mark.parametrize("num_ipus", [1, 2])
def test_synthetic_transfers_respect_spec_bandwidths(num_ipus):
    data = make_synthetic(num_ipus=num_ipus, tiles_per_ipu=1472, num_steps=300)
    emu = load_device(data.target.device).emulator
    ops = data.ops
    stream = ops[ops["bytes_ddr"] > 0]
    assert len(stream) > 0
    # streaming memory is per IPU: bytes over stream cycles never beat num_ipus x the DDR rate
    rate = stream["bytes_ddr"] / stream["stream_cycles"]
    assert (rate <= num_ipus * emu["ddr_bytes_per_cycle"] * (1 + 1e-9)).all(), rate.max()
    if num_ipus > 1:
        link = ops[ops["bytes_ipu_link"] > 0]
        assert len(link) > 0
        rate = link["bytes_ipu_link"] / link["exchange_cycles"]
        assert (rate <= num_ipus * emu["ipu_link_bytes_per_cycle"] * (1 + 1e-9)).all(), rate.max()
