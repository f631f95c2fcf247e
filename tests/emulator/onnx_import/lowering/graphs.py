"""Small hand-made ONNX graphs for the lowering modules' tests: one graph of a few nodes, lowered onto the numpy
reference backend (``onnx_import.run.reference_numpy``: the same lowering the emulator runs, without the emulator)
and compared with ONNX Runtime on the same inputs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from popvision_lite.emulator.onnx_import.lowering.table import LOWERINGS
from popvision_lite.emulator.onnx_import.run import reference_numpy

ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
        np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.int32): TensorProto.INT32,
        np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}


def model(nodes, inputs: dict[str, np.ndarray], outputs: list[str], initializers: dict[str, np.ndarray] | None = None,
          opset: int = 17) -> onnx.ModelProto:
    """A model of ``nodes`` whose graph inputs have the shapes and dtypes of ``inputs``; outputs of unknown shape."""
    ins = [helper.make_tensor_value_info(k, ELEM[v.dtype], list(v.shape)) for k, v in inputs.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]

    def make(outs):
        m = helper.make_model(helper.make_graph(nodes, "g", ins, outs, initializer=inits),
                              opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m

    # the outputs' types as ONNX's shape inference gives them (float of unknown shape where it gives none)
    inferred = onnx.shape_inference.infer_shapes(make([helper.make_empty_tensor_value_info(k) for k in outputs]))
    types = {v.name: v for v in inferred.graph.value_info}
    return make([types.get(k) or helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in outputs])


def lower_and_compare(tmp_path, nodes, inputs: dict[str, np.ndarray], outputs: list[str],
                      initializers: dict[str, np.ndarray] | None = None, *, opset: int = 17, atol: float = 1e-5,
                      training: bool = False, check_dtype: bool = True) -> dict[str, np.ndarray]:
    """Lower the graph in fp32 on the numpy reference backend and check every output against ONNX Runtime:
    the same shape, a float or integer dtype as ONNX Runtime's (unless ``check_dtype`` is false), values within
    ``atol`` of its max |value|.
    Returns our outputs."""
    m = model(nodes, inputs, outputs, initializers, opset)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    ours = reference_numpy(path, precision="fp32", inputs=inputs, training=training)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip(outputs, sess.run(outputs, inputs), strict=True))
    for k in outputs:
        got = np.asarray(ours[k])
        assert got.shape == want[k].shape, (k, got.shape, want[k].shape)
        assert not check_dtype or got.dtype.kind == want[k].dtype.kind or {got.dtype.kind, want[k].dtype.kind} <= {"i", "u"}, \
            (k, got.dtype, want[k].dtype)
        scale = max(float(np.max(np.abs(want[k]))), 1.0) if want[k].size else 1.0
        np.testing.assert_allclose(got.astype(np.float64), want[k].astype(np.float64), rtol=0, atol=atol * scale,
                                   err_msg=k)
    return ours


def lowered_by(op_type: str, module) -> bool:
    """Whether the lowering table sends ``op_type`` to a function of ``module``."""
    fn = LOWERINGS[op_type].fn
    return (getattr(fn, "__module__", None) or type(fn).__module__) == module.__name__


def rand(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
