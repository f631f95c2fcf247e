"""Memory per tile (pure numpy/pandas over a Profile, no Qt).

``TileMemory(profile)`` reads the (tiles, categories, 2) memory array once and answers:

* ``values(measure)`` -> (num_tiles,) float: bytes of one measure per tile, where measure is
  ``"total"``, ``"always_live"``, ``"not_always_live"``, any Poplar category name, or
  ``"percent_capacity"`` (total bytes as % of the tile's SRAM);
* ``breakdown(tile)`` -> DataFrame category x [always_live, not_always_live, total];
* ``variables_on(tile)`` -> DataFrame of the variables with bytes on that tile;
* ``contents(tile)`` -> everything on that tile at its peak (variables and code), adding up to its total;
* ``over_capacity`` -> bool mask of tiles above capacity.

The per-tile figures (the constructor, ``values``) import no pandas: fit_constraint's headline, ``emulate``'s advice
for a run that does not fit, reads them without it (decision 0478).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from popvision_lite.profile import schema

if TYPE_CHECKING:
    import pandas as pd

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


class TileMemory:
    def __init__(self, profile):
        self.profile = profile
        t = profile.target
        self.num_tiles = int(t.num_tiles)
        self.tiles_per_ipu = int(t.tiles_per_ipu)
        self.capacity = float(t.sram_bytes_per_tile)
        mem = profile.memory  # an open Profile's reader, or a ProfileData's array (a run still in memory)
        arr = np.asarray(mem.array() if hasattr(mem, "array") else mem)
        if arr.shape != (self.num_tiles, len(schema.MEMORY_CATEGORIES), 2):
            from popvision_lite.errors import ProfileError

            raise ProfileError(getattr(profile, "path", "profile"), f"array 'memory' has shape {arr.shape}, expected "
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
        import pandas as pd  # (here: the memory figures alone import no pandas - fit_constraint's headline)

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

    def peak_lstep(self, tile: int) -> int:
        """The liveness step at which ``tile`` holds the most not-always-live bytes (-1 when it has none)."""
        curve = np.asarray(self.profile.liveness.tile_bytes(tiles=[int(tile)]), np.int64).reshape(-1)
        return int(np.argmax(curve)) if curve.size and curve.max() > 0 else -1

    def contents(self, tile: int) -> pd.DataFrame:
        """Everything on ``tile`` at its peak, largest first: its always-live variables, the not-always-live
        variables live at its peak liveness step (:meth:`peak_lstep`; the pipeline's stash and stream buffers
        among them) and one row per memory category that is not a variable (code, exchange code, stack ...).
        The rows add up to the tile's total bytes (the tile map's value); ``live`` says why each row counts.
        Columns: name, kind, live, bytes_on_tile, dtype, shape, first_lstep, last_lstep, var_id (-1: a category)."""
        import pandas as pd

        from popvision_lite.analysis.liveness import live_variables

        tile = int(tile)
        cols = ["name", "kind", "live", "bytes_on_tile", "dtype", "shape", "first_lstep", "last_lstep", "var_id"]
        frames = []
        on = self.variables_on(tile)
        al = on[on["always_live"].astype(bool)].copy()
        al["live"] = "always"
        frames.append(al)
        lstep = self.peak_lstep(tile)
        if lstep >= 0:
            lv = live_variables(self.profile, lstep, tile=tile)
            lv["live"] = f"at the tile's peak (liveness step {lstep:,})"
            frames.append(lv)
        a = self.array[tile]
        var_cats = {schema.CATEGORY_CODE["variable"], schema.CATEGORY_CODE["constant"]}
        cat = [{"name": c, "kind": "memory category", "live": "always" if a[i, 1] == 0 else "peak",
                "bytes_on_tile": int(a[i].sum()), "dtype": "", "shape": "", "first_lstep": -1, "last_lstep": -1,
                "var_id": -1}
               for i, c in enumerate(schema.MEMORY_CATEGORIES) if i not in var_cats and a[i].sum() > 0]
        frames.append(pd.DataFrame(cat, columns=cols))
        rest = int(self.total[tile]) - sum(int(f["bytes_on_tile"].sum()) for f in frames if len(f))
        if rest > 0:  # a file written before every byte had a variable (format < 3.2: the pipeline stash)
            v = self.profile
            frames.append(pd.DataFrame([{
                "name": f"in no variable (profile format {getattr(v, 'format_version', '?')}."
                        f"{getattr(v, 'format_minor', '?')}: before 3.2 the pipeline stash and stream buffers "
                        "had none)", "kind": "unlisted", "live": "peak", "bytes_on_tile": rest, "dtype": "",
                "shape": "", "first_lstep": -1, "last_lstep": -1, "var_id": -1}], columns=cols))
        out = pd.concat([f[cols] for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) \
            else pd.DataFrame(columns=cols)
        out["bytes_on_tile"] = out["bytes_on_tile"].astype(np.int64)
        return out.sort_values(["bytes_on_tile", "var_id"], ascending=[False, True]).reset_index(drop=True)
