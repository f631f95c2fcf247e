"""Constant folding: a node whose inputs are all known when the graph is built is evaluated then, by ONNX's
reference implementation (``onnx.reference``), else by ONNX Runtime on a one-node model."""

from __future__ import annotations

import numpy as np


def evaluate_node(node, feeds: dict, opset: int, prefer_onnxruntime: bool = False) -> list:
    """Outputs of one ONNX node on known inputs: ONNX's reference implementation (``onnx.reference``), else
    ONNX Runtime on a one-node model (for the ops the reference implementation gets wrong or lacks);
    ``prefer_onnxruntime``: ONNX Runtime first (where the two differ, e.g. Resize's align_corners at a
    non-integer scale, the runtime a user deploys on and the numerics check compares with)."""
    from onnx.reference import ReferenceEvaluator

    if prefer_onnxruntime:
        try:
            return _evaluate_onnxruntime(node, feeds, opset)
        except Exception:  # not installed, or an op it lacks: the reference implementation below
            pass
    try:
        return ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
    except Exception as first:
        try:
            return _evaluate_onnxruntime(node, feeds, opset)
        except Exception as second:
            raise ValueError(f"{type(first).__name__}: {first} (onnx.reference); {type(second).__name__}: "
                             f"{str(second).strip().splitlines()[0] if str(second).strip() else ''} "
                             "(onnxruntime)") from None


def _evaluate_onnxruntime(node, feeds, opset):
    import onnxruntime as ort
    from onnx import helper, shape_inference

    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v))
           for k, v in feeds.items()]
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    m = helper.make_model(helper.make_graph([node], "fold", ins, outs),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    inferred = shape_inference.infer_shapes(m)
    types = {v.name: v for v in inferred.graph.value_info}
    del m.graph.output[:]
    m.graph.output.extend(types.get(o) or helper.make_empty_tensor_value_info(o) for o in node.output if o)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)
