"""pyqtgraph item subclasses the views draw with, one per module as pyqtgraph keeps its own items:
:mod:`.tile_axis` (tile lanes' left axis), :mod:`.lane_view_box` (trace-viewer mouse conventions),
:mod:`.power_of_ten_axis` (log axes labelled 10ⁿ only), :mod:`.log_value_axis` (log axes labelled at 1, 2, 5 x 10ⁿ
in the quantity's own format), :mod:`.count_axis`, :mod:`.fitted_legend`, :mod:`.tile_map` (the tile map of
every IPU: Memory view and compare's maps)."""
