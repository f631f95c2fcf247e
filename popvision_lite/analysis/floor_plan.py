"""Where each tile is drawn on a tile map: floor-plan order or a plain grid by tile id.

Pure numpy.  A :class:`TileLayout` places every global tile of a profile at one pixel of
one 2-D image holding *all* IPUs side by side (IPU blocks separated by a gap), so a view
draws the whole machine with a single image and recolours it with one fancy-index.

* ``floor_plan_layout``: per IPU, tiles in columns as on the chip, from the device spec's
  ``[floorplan]`` section (``columns``, ``tiles_per_column``, ``order``).  The specs mark it
  as *schematic* (real GC200 placement is not published); the layout keeps that note.
  When a spec has no ``[floorplan]``, a schematic of columns of ``ceil(sqrt(n))`` tiles,
  column-major, is used and the note says so.
* ``grid_layout``: per IPU, tile ids row-major in rows of ``width`` tiles (64 by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GAP = 2  # empty pixels between IPU blocks


@dataclass
class TileLayout:
    name: str
    note: str
    num_ipus: int
    tiles_per_ipu: int
    block_height: int          # rows of one IPU block
    block_width: int           # columns of one IPU block
    ipu_rows: int              # IPU blocks stacked vertically
    ipu_cols: int              # IPU blocks side by side
    height: int                # of the whole image
    width: int
    row: np.ndarray            # (num_tiles,) image row of each global tile
    col: np.ndarray            # (num_tiles,) image column
    pixel_tile: np.ndarray     # (height, width) int32 global tile at each pixel, -1 in gaps

    @property
    def flat_index(self) -> np.ndarray:
        """(num_tiles,) index into the flattened (row-major) image of each tile."""
        return self.row * self.width + self.col

    def image(self, values: np.ndarray, fill=np.nan) -> np.ndarray:
        """(height, width) float image of per-tile ``values``; gaps are ``fill`` (NaN: transparent)."""
        img = np.full(self.height * self.width, fill, dtype=np.float64)
        img[self.flat_index] = values
        return img.reshape(self.height, self.width)

    def tile_at(self, row: float, col: float) -> int:
        """Global tile under image coordinates (row, col) or -1 (outside or in a gap)."""
        r, c = int(math.floor(row)), int(math.floor(col))
        if 0 <= r < self.height and 0 <= c < self.width:
            return int(self.pixel_tile[r, c])
        return -1

    def ipu_origin(self, ipu: int) -> tuple[int, int]:
        """(row, col) of the top-left pixel of IPU ``ipu``'s block."""
        br, bc = divmod(ipu, self.ipu_cols)
        return br * (self.block_height + GAP), bc * (self.block_width + GAP)


def _arrange_ipus(num_ipus: int, bh: int, bw: int, aspect: float) -> tuple[int, int]:
    """IPU blocks per row/column so the whole image is about ``aspect`` wide:high."""
    best = None
    for cols in range(1, num_ipus + 1):
        rows = math.ceil(num_ipus / cols)
        w = cols * bw + (cols - 1) * GAP
        h = rows * bh + (rows - 1) * GAP
        score = abs(math.log((w / h) / aspect)) + 0.3 * (rows * cols - num_ipus)  # avoid empty slots
        if best is None or score < best[0]:
            best = (score, rows, cols)
    return best[1], best[2]


def _build(name, note, num_ipus, tiles_per_ipu, r_in, c_in, bh, bw, aspect) -> TileLayout:
    ipu_rows, ipu_cols = _arrange_ipus(num_ipus, bh, bw, aspect)
    height = ipu_rows * bh + (ipu_rows - 1) * GAP
    width = ipu_cols * bw + (ipu_cols - 1) * GAP
    ipu = np.repeat(np.arange(num_ipus), tiles_per_ipu)
    br, bc = np.divmod(ipu, ipu_cols)
    row = (br * (bh + GAP) + np.tile(r_in, num_ipus)).astype(np.int64)
    col = (bc * (bw + GAP) + np.tile(c_in, num_ipus)).astype(np.int64)
    pix = np.full((height, width), -1, dtype=np.int32)
    pix[row, col] = np.arange(num_ipus * tiles_per_ipu, dtype=np.int32)
    return TileLayout(name, note, num_ipus, tiles_per_ipu, bh, bw, ipu_rows, ipu_cols, height, width,
                      row, col, pix)


def floor_plan_layout(target, spec=None, aspect: float = 1.6) -> TileLayout:
    """Tiles in columns as on the chip (see module doc).  ``spec`` defaults to the target's device spec."""
    n = int(target.tiles_per_ipu)
    t = np.arange(n)
    if spec is None:
        try:
            from popvision_lite.devices import load_bundled_device

            spec = load_bundled_device(target.device)  # never a path: the id comes from a file
        except Exception:  # unknown device id: fall back to the schematic below
            spec = None
    if spec is not None and spec.has("floorplan.columns") and spec.has("floorplan.tiles_per_column"):
        cols = int(spec.value("floorplan.columns"))
        rows_per_col = int(spec.value("floorplan.tiles_per_column"))
        if cols * rows_per_col >= n:
            if spec.floorplan_order == "column-major":
                c_in, r_in = t // rows_per_col, t % rows_per_col
            else:
                c_in, r_in = t % cols, t // cols
            basis = spec.get("floorplan.columns")
            src = getattr(basis, "basis", "")
            note = (f"{spec.name}: {cols} columns x {rows_per_col} tiles, {spec.floorplan_order}"
                    + (" (schematic: real tile placement is not published)" if src != "published" else ""))
            return _build("floor plan", note, target.num_ipus, n, r_in, c_in, rows_per_col, cols, aspect)
    rows_per_col = math.ceil(math.sqrt(n))
    cols = math.ceil(n / rows_per_col)
    note = (f"schematic: no [floorplan] in the device spec for {target.device!r}; "
            f"{cols} columns of {rows_per_col} tiles, column-major")
    return _build("floor plan", note, target.num_ipus, n, t % rows_per_col, t // rows_per_col,
                  rows_per_col, cols, aspect)


def grid_layout(target, width: int = 64, aspect: float = 1.6) -> TileLayout:
    """Tile ids row-major, ``width`` tiles per row, one block per IPU."""
    n = int(target.tiles_per_ipu)
    width = max(1, min(width, n))
    t = np.arange(n)
    rows = math.ceil(n / width)
    return _build("grid by tile id", f"tile ids row-major, {width} per row, one block per IPU",
                  target.num_ipus, n, t // width, t % width, rows, width, aspect)
