"""Memory per tile (pure numpy/pandas over a Profile, no Qt).

``TileMemory(profile)`` reads the (tiles, categories, 2) memory array once and answers:

* ``values(measure)`` -> (num_tiles,) float: bytes of one measure per tile, where measure is
  ``"total"``, ``"always_live"``, ``"not_always_live"``, any Poplar category name, or
  ``"percent_capacity"`` (total bytes as % of the tile's SRAM);
* ``breakdown(tile)`` -> DataFrame category x [always_live, not_always_live, total];
* ``variables_on(tile)`` -> DataFrame of the variables with bytes on that tile;
* ``over_capacity`` -> bool mask of tiles above capacity.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from popvision_lite.profile import schema

BASE_MEASURES = ("total", "always_live", "not_always_live")
PERCENT = "percent_capacity"
MEASURES: tuple[str, ...] = BASE_MEASURES + (PERCENT,) + schema.MEMORY_CATEGORIES

MEASURE_LABELS = {
    "total": "Total bytes",
    "always_live": "Always-live bytes",
    "not_always_live": "Not-always-live bytes (peak)",
    PERCENT: "% of tile capacity",
}


def measure_label(measure: str) -> str:
    return MEASURE_LABELS.get(measure, f"{measure} bytes")


def measure_unit(measure: str) -> str:
    return "%" if measure == PERCENT else "B"


class TileMemory:
    def __init__(self, profile):
        self.profile = profile
        t = profile.target
        self.num_tiles = int(t.num_tiles)
        self.tiles_per_ipu = int(t.tiles_per_ipu)
        self.capacity = float(t.sram_bytes_per_tile)
        arr = np.asarray(profile.memory.array())
        if arr.shape != (self.num_tiles, len(schema.MEMORY_CATEGORIES), 2):
            from popvision_lite.errors import ProfileError

            raise ProfileError(profile.path, f"array 'memory' has shape {arr.shape}, expected "
                               f"({self.num_tiles}, {len(schema.MEMORY_CATEGORIES)}, 2)")
        self.array = arr
        self._per_cat = arr.sum(axis=2)                       # (tiles, categories)
        self._always = arr[:, :, 0].sum(axis=1)
        self._nal = arr[:, :, 1].sum(axis=1)
        self.total = self._per_cat.sum(axis=1)
        self.over_capacity = self.total > self.capacity
        self._cache: dict[str, np.ndarray] = {}
        self._vt_order = None

    def values(self, measure: str) -> np.ndarray:
        """(num_tiles,) float64 values of ``measure`` (see module doc)."""
        v = self._cache.get(measure)
        if v is not None:
            return v
        if measure == "total":
            v = self.total
        elif measure == "always_live":
            v = self._always
        elif measure == "not_always_live":
            v = self._nal
        elif measure == PERCENT:
            v = self.total * (100.0 / self.capacity)
        elif measure in schema.CATEGORY_CODE:
            v = self._per_cat[:, schema.CATEGORY_CODE[measure]]
        else:
            raise ValueError(f"unknown memory measure {measure!r}; choose one of {', '.join(MEASURES)}")
        v = np.asarray(v, dtype=np.float64)
        self._cache[measure] = v
        return v

    def tile_location(self, tile: int) -> tuple[int, int]:
        """(ipu, tile_in_ipu) of a global tile id."""
        return divmod(int(tile), self.tiles_per_ipu)

    def breakdown(self, tile: int) -> pd.DataFrame:
        """Bytes on ``tile`` by category: columns always_live, not_always_live, total (index category)."""
        a = self.array[int(tile)]
        df = pd.DataFrame({"always_live": a[:, 0], "not_always_live": a[:, 1]},
                          index=pd.Index(schema.MEMORY_CATEGORIES, name="category"))
        df["total"] = df["always_live"] + df["not_always_live"]
        return df

    def variables_on(self, tile: int) -> pd.DataFrame:
        """Variables with bytes on ``tile``, largest first: name, kind, dtype, shape, bytes_on_tile,
        bytes (total over tiles), always_live, first_lstep, last_lstep, var_id."""
        vt = self.profile.stored_table("variable_tiles")
        if self._vt_order is None:
            tiles = vt["tile"].to_numpy()
            order = np.argsort(tiles, kind="stable")
            self._vt_order = (order, tiles[order])
        order, sorted_tiles = self._vt_order
        lo, hi = np.searchsorted(sorted_tiles, [tile, tile + 1])
        rows = vt.iloc[order[lo:hi]]
        var = self.profile.stored_table("variables").set_index("var_id")
        cols = ["name", "kind", "dtype", "shape", "bytes", "always_live", "first_lstep", "last_lstep"]
        per = rows.groupby("var_id", sort=False)["bytes"].sum()
        out = var.loc[per.index, cols].copy()
        out.insert(4, "bytes_on_tile", per.to_numpy())
        out = out.reset_index().sort_values(["bytes_on_tile", "var_id"], ascending=[False, True])
        return out[["name", "kind", "dtype", "shape", "bytes_on_tile", "bytes", "always_live",
                    "first_lstep", "last_lstep", "var_id"]].reset_index(drop=True)

    def ipu_totals(self) -> pd.DataFrame:
        """Per IPU: total bytes, max tile bytes, tiles over capacity."""
        ipu = np.arange(self.num_tiles) // self.tiles_per_ipu
        df = pd.DataFrame({"ipu": ipu, "total": self.total, "over": self.over_capacity})
        return df.groupby("ipu").agg(total=("total", "sum"), max_tile=("total", "max"), over_capacity=("over", "sum"))
