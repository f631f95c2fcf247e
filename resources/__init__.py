"""Bundled resources: device specs, icons, colour maps (installed as popvision_lite.resources)."""
