"""The Memory view (tile map of every IPU, memory by tile, one tile's breakdown and variables); see :mod:`.view`."""

from popvision_lite.gui.views.memory.view import LSTEP, MemoryView, capacity_colormap, tile_memory

__all__ = ["LSTEP", "MemoryView", "capacity_colormap", "tile_memory"]
