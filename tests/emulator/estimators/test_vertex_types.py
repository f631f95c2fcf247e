"""The one table from vertex type to estimator (emulator/estimators/vertex_types.py): every codelet the emulator
defines has an entry, every entry names a codelet the emulator defines, and an elementwise codelet's entry is the
estimator its ``model`` selects."""

import importlib
import pkgutil
from pathlib import Path

import pytest

import popvision_lite.emulator as emulator
from popvision_lite.emulator.codelets.base import Codelet, Elementwise
from popvision_lite.emulator.estimators import popnn, popops
from popvision_lite.emulator.estimators.vertex_types import VERTEX_ESTIMATORS, estimator_of
from popvision_lite.profile.reader import open_profile

SAMPLES = Path(__file__).resolve().parents[3] / "sample_profiles"
LIBRARY_OF_MODULE = {"popops": "popops", "poplin": "poplin", "poplin_conv": "poplin", "popnn": "popnn",
                     "microbench": "microbench"}


def _codelets() -> dict[str, Codelet]:
    """Every codelet instance an emulator module defines at its top level (directly, or in a dict of them)."""
    found: dict[str, Codelet] = {}
    for mod in pkgutil.walk_packages(emulator.__path__, emulator.__name__ + "."):
        m = importlib.import_module(mod.name)
        for value in vars(m).values():
            for c in (value.values() if isinstance(value, dict) else (value,)):
                if isinstance(c, Codelet):
                    found.setdefault(c.name, c)
    return found


@pytest.fixture(scope="module")
def codelets():
    return _codelets()


def test_every_codelet_of_the_emulator_has_an_estimator_entry(codelets):
    assert len(codelets) > 60  # the walk does find them (the modules of emulator/codelets/)
    missing = sorted(set(codelets) - set(VERTEX_ESTIMATORS))
    assert not missing, f"vertex types without an entry in VERTEX_ESTIMATORS: {missing}"


def test_every_entry_is_a_codelet_of_the_emulator(codelets):
    stale = sorted(set(VERTEX_ESTIMATORS) - set(codelets))
    assert not stale, f"entries of VERTEX_ESTIMATORS that no codelet has: {stale}"


def test_the_vertex_types_the_sample_profiles_store_have_entries():
    seen = set()
    for path in sorted(SAMPLES.glob("*.pvl")):
        with open_profile(path) as p:
            seen |= set(p.vertices["codelet"].astype(str))
    assert {"Add", "BlockMatMul"} & seen or any(t.startswith("TileMatMul") for t in seen)
    assert not sorted(t for t in seen if t not in VERTEX_ESTIMATORS)


def test_each_entry_names_estimators_of_its_own_library():
    for name, e in VERTEX_ESTIMATORS.items():
        libs = {LIBRARY_OF_MODULE[f.__module__.rsplit(".", 1)[1]] for f in e.estimators}
        # a popops reduction may finish a poplin ConvReduce (ReduceAdd), and a convolution sums its partials
        # with poplin's reduce: one library per entry otherwise
        assert e.library in libs and (len(libs) == 1 or name == "ReduceAdd"), (name, e)


MODEL_ESTIMATOR = {"binary": popops.binary_op_worker_cycles, "binary_inplace": popops.binary_op_inplace_worker_cycles,
                   "unary": popops.unary_op_worker_cycles, "cast": popops.cast_worker_cycles,
                   "fill": popops.fill_worker_cycles, "scaled_add": popops.scaled_add_worker_cycles,
                   "nonlinearity": popnn.nonlinearity_worker_cycles}


def test_an_elementwise_entry_is_the_estimator_its_model_selects(codelets):
    checked = 0
    for name, c in codelets.items():
        if not isinstance(c, Elementwise) or c.model is None:
            continue
        kind = c.model[0] if c.model[0] != "composite" else c.model[1][0][0]
        assert MODEL_ESTIMATOR[kind] in estimator_of(name).estimators, (name, c.model)
        checked += 1
    assert checked >= 15


def test_an_unknown_vertex_type_is_a_key_error():
    with pytest.raises(KeyError):
        estimator_of("NoSuchVertex")
