"""poplin's partialsType for the op library's matmul: half partials store the K partials (and the serial-pass
accumulator) in fp16, which halves their memory and the partials' exchange, and still computes the product."""

import numpy as np
import pytest

from popvision_lite import mlperf_validation as V
from popvision_lite.emulator import Engine, Target
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.errors import ConfigError

rng = np.random.default_rng(5)


def _k_split_matmul(partials_type):
    # K much larger than M x N: the planner splits K over the tiles, so the product has partials
    a = (rng.standard_normal((16, 8192)) * 0.1).astype(np.float32)
    b = (rng.standard_normal((8192, 16)) * 0.1).astype(np.float32)
    em = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16", partials_type=partials_type)
    out = em.matmul(em.input("a", a), em.input("b", b), "mm")
    return em, out, a, b


def _partials(em):
    return {t.name: t for t in em.graph.tensors if "partials" in t.name}


@pytest.mark.parametrize("partials_type", ["float", "half"])
def test_k_partials_take_the_partials_type_and_the_product_is_right(partials_type):
    em, out, a, b = _k_split_matmul(partials_type)
    parts = _partials(em)
    assert parts, "the plan has no K split; the test needs one"
    want_dtype = "float16" if partials_type == "half" else "float32"
    assert {t.dtype for t in parts.values()} == {want_dtype}
    r = Engine(em.graph, em.program(), mode="full").run(inputs=em.inputs)
    want = a.astype(np.float16).astype(np.float64) @ b.astype(np.float16).astype(np.float64)
    got = r.outputs[out.name].astype(np.float64)
    # fp16 partials round each tile's partial sum once more: the error stays at fp16's scale of the output
    tol = 2e-3 if partials_type == "float" else 8e-3
    assert np.max(np.abs(got - want)) <= tol * np.max(np.abs(want))


def test_half_partials_halve_the_partials_bytes_of_the_same_plan():
    em_f, *_ = _k_split_matmul("float")
    em_h, *_ = _k_split_matmul("half")
    split = [em.ctx.records[-1]["plan"].split(";")[0] for em in (em_f, em_h)]  # "M=.. N=.. K=.. split (..)"
    assert split[0] == split[1]
    pf, ph = _partials(em_f), _partials(em_h)
    assert pf.keys() == ph.keys()
    for name in pf:
        assert ph[name].itemsize * 2 == pf[name].itemsize
        assert int(np.prod(ph[name].shape)) == int(np.prod(pf[name].shape))


def test_partials_type_comes_from_the_submission_precision_and_needs_fp16():
    assert V.partials_type("FP16.16 + half partials, 8-bit input") == "half"
    assert V.partials_type("FP16 + SR; LAMB m in FP16") == "float"
    rows = V.measured_rows()
    assert len(rows) == 19
    for case in V.build_cases(rows):
        assert case.config["partials_type"] == V.partials_type(
            next(r for r in rows if r["id"] == case.id)["precision"])
    make_config("resnet50", batch=2, partials_type="half")
    with pytest.raises(ConfigError, match="partials_type"):
        make_config("resnet50", batch=2, precision="fp32", partials_type="half")
