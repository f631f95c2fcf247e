"""Root of the test suite (one folder per package: cli/, emulator/, profile/, analysis/, gui/, sweep/,
plus bench/ and project/).  Fixtures every folder may use live here; each folder's conftest.py adds its own.
Helpers that are not fixtures are in tests/support/."""

import os

# GUI tests run offscreen unless a real display was asked for explicitly.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.support.compare_runs import run_pairs, tile_mismatch  # noqa: E402, F401  (fixtures: analysis and gui)
