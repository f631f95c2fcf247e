"""Locate bundled resources (device specs, icons, colour maps) in a checkout or an installed wheel."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def resource_dir(*parts: str) -> Path:
    """Return the directory of bundled resources, e.g. ``resource_dir("devices")``."""
    try:
        base = Path(str(resources.files("popvision_lite.resources")))
    except ModuleNotFoundError:  # running from a source tree without install
        base = Path(__file__).resolve().parent.parent / "resources"
    if not base.is_dir():
        base = Path(__file__).resolve().parent.parent / "resources"
    return base.joinpath(*parts)
