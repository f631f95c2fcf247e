"""The machine the emulator runs on: a device spec (resources/devices/*.toml) times a number of IPUs."""

from __future__ import annotations

import numpy as np

from popvision_lite import devices
from popvision_lite.errors import EmulatorError
from popvision_lite.profile.schema import TargetInfo


class Target:
    """``num_ipus`` IPUs of one device spec.  Global tile = ipu * tiles_per_ipu + tile_in_ipu."""

    def __init__(self, spec: devices.DeviceSpec, num_ipus: int = 1):
        if not spec.is_ipu:
            raise EmulatorError(f"device '{spec.id}' is a {spec.kind}, not an IPU; fix: pick an ipu-* device")
        if int(num_ipus) < 1 or int(num_ipus) > 1024:
            raise EmulatorError(f"target: num_ipus={num_ipus} out of range 1..1024")
        self.spec = spec
        self.num_ipus = int(num_ipus)
        self.device = spec.id
        self.name = spec.name
        self.tiles_per_ipu = spec.tiles
        self.num_tiles = self.num_ipus * self.tiles_per_ipu
        self.sram_bytes_per_tile = spec.sram_bytes_per_tile
        self.clock_hz = float(spec.clock_hz)
        self.threads_per_tile = spec.threads_per_tile
        # cost-model constants of the spec's [emulator] section (each with its source in the TOML)
        self.em: dict[str, float] = dict(spec.emulator)

    @classmethod
    def from_device(cls, device_id: str = "ipu-mk2", num_ipus: int = 1) -> Target:
        return cls(devices.load_device(device_id), num_ipus)

    def __repr__(self) -> str:
        return f"Target({self.device!r}, num_ipus={self.num_ipus}, tiles={self.num_tiles})"

    def info(self) -> TargetInfo:
        return TargetInfo(device=self.device, name=self.name, num_ipus=self.num_ipus,
                          tiles_per_ipu=self.tiles_per_ipu, sram_bytes_per_tile=self.sram_bytes_per_tile,
                          clock_hz=self.clock_hz, threads_per_tile=self.threads_per_tile)

    def ipu_of(self, tiles):
        return np.asarray(tiles) // self.tiles_per_ipu

    def tile_in_ipu(self, tiles):
        return np.asarray(tiles) % self.tiles_per_ipu

    def tiles_of_ipu(self, ipu: int) -> range:
        if not 0 <= ipu < self.num_ipus:
            raise EmulatorError(f"target: IPU {ipu} out of range 0..{self.num_ipus - 1}")
        return range(ipu * self.tiles_per_ipu, (ipu + 1) * self.tiles_per_ipu)
