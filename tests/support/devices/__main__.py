"""``python -m tests.support.devices [TILES]``: write the tests' device spec (see the package doc)."""

import sys

from tests.support.devices import main

main(sys.argv[1:])
