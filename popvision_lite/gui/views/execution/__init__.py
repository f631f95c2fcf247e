"""The Execution view (BSP timeline of compute, exchange and sync at any scale); see :mod:`.view`."""

from popvision_lite.gui.views.execution.navigation import PAN_STEP, ZOOM_STEP
from popvision_lite.gui.views.execution.view import ExecutionView

__all__ = ["PAN_STEP", "ZOOM_STEP", "ExecutionView"]
