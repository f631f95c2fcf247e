"""The profile format: schema (the contract), writer, lazy reader, exports.  Synthetic profiles for tests
and benchmarks are in ``popvision_lite.testing.synthetic``.

``from popvision_lite.profile import open_profile, write_profile`` works; the heavier modules are
imported on first use so ``import popvision_lite.profile.schema`` stays light.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "open_profile": "popvision_lite.profile.reader",
    "Profile": "popvision_lite.profile.reader",
    "StepTileWindow": "popvision_lite.profile.step_tiles",
    "write_profile": "popvision_lite.profile.writer",
    "export_chrome_trace": "popvision_lite.profile.chrome_trace",
    "export_csv": "popvision_lite.profile.csv_export",
    "ProfileData": "popvision_lite.profile.schema",
    "TargetInfo": "popvision_lite.profile.schema",
}

__all__ = sorted(_LAZY)

# Builders of Profile attributes that a higher layer defines (the profile layer imports no analysis):
# ``Profile.totals`` is analysis/run_totals.py's table, registered by the package's __init__ as "totals".
BUILDERS: dict = {}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'popvision_lite.profile' has no attribute {name!r}")
