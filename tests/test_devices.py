"""Device specs: every bundled spec loads, carries provenance, and bad specs fail with named fields."""

from __future__ import annotations

import re
import tomllib

import pytest

from popvision_lite.devices import BASES, EMULATOR_KEYS, devices_dir, list_devices, load_device
from popvision_lite.errors import DeviceSpecError

EXPECTED = {"ipu-mk1", "ipu-mk2", "ipu-bow", "v100", "a100-80gb", "h100-sxm", "h200"}


def _numbers(tree, prefix=""):
    """Every number in a parsed TOML tree, with its dotted path (quantity tables yield their value)."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _numbers(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _numbers(v, f"{prefix}[{i}]")
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        yield prefix, tree


def test_bundled_specs_present():
    assert EXPECTED <= set(list_devices())
    assert set(list_devices("ipu")) == {"ipu-mk1", "ipu-mk2", "ipu-bow"}
    assert {"v100", "a100-80gb", "h100-sxm", "h200"} <= set(list_devices("gpu"))


@pytest.mark.parametrize("dev_id", sorted(EXPECTED))
def test_every_number_has_source_and_basis(dev_id):
    spec = load_device(dev_id)
    raw = tomllib.loads((devices_dir() / f"{dev_id}.toml").read_text())
    # every raw number in the file (except schema_version) must sit in a quantity table's 'value'
    for path, _ in _numbers(raw):
        if path == "schema_version":
            continue
        assert path.endswith(".value"), f"{dev_id}: bare number at {path} (no source)"
    n_values = sum(1 for p, _ in _numbers(raw) if p.endswith(".value"))
    assert n_values == len(spec.quantities)
    for key, q in spec.items():
        assert q.source.strip(), f"{dev_id}:{key} has no source"
        assert q.basis in BASES
        assert q.value > 0


@pytest.mark.parametrize("dev_id", ["ipu-mk1", "ipu-mk2", "ipu-bow"])
def test_ipu_specs_consistent(dev_id):
    d = load_device(dev_id)
    assert [m.level for m in d.memory_levels] == ["sram", "exchange", "ipu_link", "ddr"]
    assert set(d.emulator) == set(EMULATOR_KEYS)
    # per-cycle FLOPs agree with the chip peak within 1% (derived numbers must match their inputs)
    for prec in ("fp16", "fp32"):
        per_cycle = d.emulator[f"{prec}_flops_per_cycle_per_tile"]
        assert per_cycle * d.tiles * d.clock_hz == pytest.approx(d.peak_flops(prec), rel=0.01)
    assert d.memory("sram").capacity_bytes == d.tiles * d.sram_bytes_per_tile
    assert d.emulator["ipu_link_bytes_per_cycle"] * d.clock_hz == pytest.approx(
        d.memory("ipu_link").bandwidth_bytes_per_s, rel=0.01)
    assert d.emulator["ddr_bytes_per_cycle"] * d.clock_hz == pytest.approx(
        d.memory("ddr").bandwidth_bytes_per_s, rel=0.01)
    # exchange roof within 5% of tiles x exchange_bytes_per_cycle x clock (8 TB/s vs 7.8 TB/s on Mk2)
    assert d.memory("exchange").bandwidth_bytes_per_s == pytest.approx(
        d.tiles * d.emulator["exchange_bytes_per_cycle"] * d.clock_hz, rel=0.05)
    assert d.emulator["min_ipu_sync_delay_cycles"] <= d.emulator["max_ipu_sync_delay_cycles"]
    col, row = d.tile_position(d.tiles - 1)
    assert col == d.value("floorplan.columns") - 1 and row == d.value("floorplan.tiles_per_column") - 1


def test_known_values_and_prices():
    mk2 = load_device("ipu-mk2")
    assert mk2.tiles == 1472 and mk2.sram_bytes_per_tile == 624 * 1024 and mk2.clock_hz == 1.325e9
    assert mk2.emulator["exchange_bytes_per_cycle"] == 4
    assert mk2.basis("compute.clock_hz") == "vendor"
    assert "datasheet" in mk2.source("compute.clock_hz")
    assert load_device("ipu-bow").usd_per_hour == pytest.approx(26.71 / 16, rel=0.01)
    assert load_device("a100-80gb").usd_per_hour == 3.18
    assert mk2.usd_per_hour is None
    a100 = load_device("a100-80gb")
    assert a100.peak_fp16_flops / a100.memory("hbm").bandwidth_bytes_per_s == pytest.approx(153, rel=0.01)
    assert a100.memory("l2").bandwidth is None and a100.memory("l2").capacity_bytes == 40 * 2**20


def test_load_by_path_and_cache_identity(tmp_path):
    src = devices_dir() / "v100.toml"
    p = tmp_path / "mine.toml"
    p.write_text(src.read_text())
    d = load_device(p)
    assert d.id == "v100" and d.path.name == "mine.toml"
    assert load_device(str(p)) is d  # cached while unchanged


# ---------------------------------------------------------------- bad input
MK2 = (devices_dir() / "ipu-mk2.toml").read_text()
V100 = (devices_dir() / "v100.toml").read_text()


def _bad(tmp_path, text, name="bad.toml"):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(DeviceSpecError) as ei:
        load_device(p)
    msg = str(ei.value)
    assert str(p) in msg, msg
    return ei.value


def test_unknown_device_id():
    with pytest.raises(DeviceSpecError) as ei:
        load_device("ipu-mk9")
    assert "ipu-mk9" in str(ei.value) and "ipu-mk2" in str(ei.value)  # lists what is known
    assert ei.value.field == "id"


def test_missing_file(tmp_path):
    with pytest.raises(DeviceSpecError, match="no such"):
        load_device(tmp_path / "nope.toml")


def test_not_toml(tmp_path):
    e = _bad(tmp_path, "id = [unclosed\n")
    assert e.field == "<toml>"


def test_unknown_top_key(tmp_path):
    e = _bad(tmp_path, "frobnicate = 3\n" + MK2)
    assert e.field == "frobnicate" and "unknown key" in e.problem


def test_unknown_key_in_table(tmp_path):
    e = _bad(tmp_path, MK2.replace("[emulator]\n", '[emulator]\nwarp_drive = { value = 1, source = "x", basis = "vendor" }\n'))
    assert e.field == "emulator.warp_drive" and "unknown key" in e.problem


def test_unknown_key_in_quantity(tmp_path):
    e = _bad(tmp_path, V100.replace('peak_fp32_flops = { value = 15.7e12,', 'peak_fp32_flops = { value = 15.7e12, colour = "red",'))
    assert e.field == "compute.peak_fp32_flops.colour"


def test_missing_field(tmp_path):
    text = re.sub(r"^global_sync_cycles = .*\n", "", MK2, flags=re.M)
    e = _bad(tmp_path, text)
    assert e.field == "emulator.global_sync_cycles" and "missing" in e.problem


def test_missing_source(tmp_path):
    text = re.sub(r'(^tiles = \{ value = 1472, unit = "tiles", basis = "vendor"), source = "[^"]*"', r"\1", MK2, flags=re.M)
    e = _bad(tmp_path, text)
    assert e.field == "compute.tiles.source"


def test_missing_memory_level(tmp_path):
    text = MK2.replace('level = "ipu_link"', 'level = "ipu_linkx"')
    e = _bad(tmp_path, text)
    assert e.field.startswith("memory[") and "ipu_linkx" in e.problem


def test_wrong_type(tmp_path):
    e = _bad(tmp_path, MK2.replace("tiles = { value = 1472,", 'tiles = { value = "1472",'))
    assert e.field == "compute.tiles.value" and "number" in e.problem
    e = _bad(tmp_path, MK2.replace("tiles = { value = 1472,", "tiles = { value = 1472.5,"))
    assert e.field == "compute.tiles.value" and "integer" in e.problem
    e = _bad(tmp_path, MK2.replace("clock_hz = { value = 1.325e9", "clock_hz = { value = true"))
    assert e.field == "compute.clock_hz.value"
    e = _bad(tmp_path, MK2.replace('kind = "ipu"', 'kind = "tpu"'))
    assert e.field == "kind"


@pytest.mark.parametrize("bad", ["-1.325e9", "0", "nan", "inf"])
def test_non_positive_number(tmp_path, bad):
    e = _bad(tmp_path, MK2.replace("clock_hz = { value = 1.325e9", f"clock_hz = {{ value = {bad}"))
    assert e.field == "compute.clock_hz.value" and "positive" in e.problem


def test_bad_basis(tmp_path):
    e = _bad(tmp_path, V100.replace('basis = "measured"', 'basis = "rumour"'))
    assert e.field == "memory.l2.bandwidth_bytes_per_s.basis"


def test_id_mismatch_when_loaded_by_id(tmp_path, monkeypatch):
    import popvision_lite.devices as dv

    (tmp_path / "ipu-mk2.toml").write_text(MK2.replace('id = "ipu-mk2"', 'id = "other"'))
    monkeypatch.setattr(dv, "devices_dir", lambda: tmp_path)
    with pytest.raises(DeviceSpecError) as ei:
        dv.load_device("ipu-mk2")
    assert ei.value.field == "id"


def test_floorplan_must_cover_tiles(tmp_path):
    e = _bad(tmp_path, MK2.replace("tiles_per_column = { value = 46,", "tiles_per_column = { value = 40,"))
    assert e.field == "floorplan"


def test_gpu_cannot_have_emulator(tmp_path):
    e = _bad(tmp_path, V100 + '\n[emulator]\nexchange_bytes_per_cycle = { value = 4, source = "x", basis = "vendor" }\n')
    assert e.field == "emulator"
