"""The tests' device with fewer tiles (tests/support/devices, decision 0395) and the hook that makes its id
known (``devices.register_device``): the committed file is what the generator makes from today's shipped
spec, every number but the tile count and its per-chip aggregates is the shipped one, and a registered id
resolves like a bundled one in the library but not on the command line."""

from __future__ import annotations

import pytest

from popvision_lite import devices
from popvision_lite.errors import ConfigError, DeviceSpecError
from tests.support import devices as test_devices

SCALED = {"compute.peak_fp16_flops", "compute.peak_fp32_flops", "memory.sram.bandwidth_bytes_per_s",
          "memory.exchange.bandwidth_bytes_per_s"}


# the Mk2 test device, and the Bow IPU cut the same way (decision 0483)
CUTS = [pytest.param(test_devices.PATH, test_devices.ID, test_devices.SHIPPED, id="mk2"),
        pytest.param(test_devices.BOW_PATH, test_devices.BOW_ID, test_devices.BOW, id="bow")]


@pytest.mark.parametrize(("path", "_id", "shipped"), CUTS)
def test_the_committed_test_device_is_what_the_generator_makes_from_the_shipped_spec(path, _id, shipped):
    assert path.read_text(encoding="utf-8") == test_devices.spec_text(test_devices.TILES, shipped), (
        f"the shipped {shipped}.toml changed: write the test device again (python -m tests.support.devices)")


@pytest.mark.parametrize(("path", "dev_id", "shipped"), CUTS)
def test_every_number_is_the_shipped_one_but_the_tiles_and_what_follows_from_them(path, dev_id, shipped):
    small, mk2 = devices.load_device(path), devices.load_device(shipped)
    assert small.id == dev_id != mk2.id and "test device" in small.name
    assert small.tiles == test_devices.TILES < mk2.tiles
    assert set(small.quantities) == set(mk2.quantities)
    ratio = small.tiles / mk2.tiles
    follows = SCALED | {"compute.tiles", "memory.sram.capacity_bytes", "floorplan.columns"}
    for key, q in small.items():
        if key in follows:
            assert q.basis in ("derived", "assumed") and q.source, key
        else:
            assert q == mk2.quantity(key), key
    for key in SCALED:
        assert small.value(key) == pytest.approx(mk2.value(key) * ratio, rel=1e-12), key
    assert small.memory("sram").capacity_bytes == small.tiles * small.sram_bytes_per_tile
    assert small.value("floorplan.columns") * small.value("floorplan.tiles_per_column") == small.tiles
    assert small.value("floorplan.tiles_per_column") == mk2.value("floorplan.tiles_per_column")
    assert small.emulator == mk2.emulator  # every cost-model constant as shipped


def test_a_registered_id_resolves_in_the_library_and_is_no_bundled_device():
    devices.unregister_device(test_devices.ID)
    with pytest.raises(DeviceSpecError, match="unknown device"):
        devices.load_bundled_device(test_devices.ID)
    spec = test_devices.register()
    try:
        assert devices.load_device(test_devices.ID) is spec
        assert devices.load_bundled_device(test_devices.ID) is spec  # a profile naming it opens with its spec
        assert test_devices.register() == spec  # again: a no-op
        assert test_devices.ID not in devices.list_devices()
        from popvision_lite.emulator.run_config import normalise_device

        # a run config in this process takes the id it registered (decision 0477); a popvision-lite process
        # registers nothing, so its command line takes only the shipped ids
        assert normalise_device(test_devices.ID) == test_devices.ID
    finally:
        devices.unregister_device(test_devices.ID)
    with pytest.raises(DeviceSpecError, match="unknown device"):
        devices.load_device(test_devices.ID)
    with pytest.raises(ConfigError, match="unknown device"):
        normalise_device(test_devices.ID)
    test_devices.register()  # as the suite's conftest left it


def test_a_registered_spec_may_not_take_a_bundled_id(tmp_path):
    f = tmp_path / "mk2-again.toml"
    f.write_text(devices.load_device("ipu-mk2").path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(DeviceSpecError, match="bundled device's id"):
        devices.register_device(f)
    assert devices.load_bundled_device("ipu-mk2").path != f
