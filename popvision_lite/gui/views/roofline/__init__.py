"""The Roofline view (IPU ops against the IPU's and the chosen GPUs' ceilings); see :mod:`.view`."""

from popvision_lite.gui.items.power_of_ten_axis import power_of_ten_label
from popvision_lite.gui.views.roofline.view import RooflineView

__all__ = ["RooflineView", "power_of_ten_label"]
