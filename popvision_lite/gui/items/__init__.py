"""pyqtgraph item subclasses the views draw with, one per module as pyqtgraph keeps its own items:
:mod:`.tile_axis` (tile lanes' left axis), :mod:`.lane_view_box` (trace-viewer mouse conventions),
:mod:`.power_of_ten_axis` (log axes labelled 10ⁿ only)."""
