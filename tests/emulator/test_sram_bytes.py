"""Codelet.sram_bytes counts each field's elements without an array per vertex (Blocks and Windows: vertices times
the block's elements; Regions: the sizes summed once per sizes array): every vertex group of a small ResNet graph
(on the tests' 92-tile device: the count does not depend on the tile count) gives the bytes the definition gives (each field's elems() summed, times its itemsize, inout fields twice), and the
graph holds groups with Regions, Blocks and Windows fields."""

import numpy as np

from popvision_lite.emulator.graph import Blocks, Regions, Windows
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import build_model
from tests.conftest import SMALL_DEVICE


def _by_definition(g) -> int:
    total = 0
    for name, f in g.fields.items():
        b = int(np.asarray(f.elems()).sum()) * f.tensor.itemsize
        total += 2 * b if g.codelet.fields[name] == "inout" else b
    return total


def test_sram_bytes_of_every_group_is_the_definition():
    kinds = set()
    be, _ = build_model(make_config("resnet-tiny"), SMALL_DEVICE, needs_values=False)
    for g in be.graph.groups:
        assert g.codelet.sram_bytes(g) == _by_definition(g), g
        kinds |= {type(f) for f in g.fields.values()}
    assert {Regions, Blocks, Windows} <= kinds
