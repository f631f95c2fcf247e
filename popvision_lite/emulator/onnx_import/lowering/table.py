"""The lowering table: every ONNX op type lowered onto device ops, its lowering function, the attributes it
honours (any other attribute on a node is refused by name, never ignored) and whether it has a backward pass
(``--training``; the rest are refused in training runs).  The supported / trainable op lists are derived from it.

A node whose inputs are all known when the graph is built (initializers, Constant nodes, integer inputs,
shapes and everything computed from those) is evaluated then, whatever its type (constant folding,
``fold.evaluate_node``), so the table lists only the ops that run on the device."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import conv, elementwise, matmul, quantized, recurrent, resample, rows, seeded, views
from .elementwise import binary, unary


@dataclass(frozen=True)
class Lowering:
    """How one op type is lowered: ``fn(lowerer, node index, node, input values, op name)`` sets the node's
    outputs in ``lowerer.vals``."""

    fn: Callable
    attrs: frozenset = field(default_factory=frozenset)
    trainable: bool = True


def _l(fn, attrs=(), trainable=True) -> Lowering:
    return Lowering(fn, frozenset(attrs), trainable)


_REDUCE = ("axes", "keepdims", "noop_with_empty_axes")
_WINDOW = ("kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad")

LOWERINGS: dict[str, Lowering] = {
    # elementwise (popops' unary / binary ops; a one-element constant operand becomes a scalar op)
    "Abs": _l(unary("abs"), trainable=False),
    "Erf": _l(unary("erf"), trainable=False),
    "Exp": _l(unary("exp")),
    "IsNaN": _l(unary("isnan")),
    "Neg": _l(unary("neg")),
    "Reciprocal": _l(unary("reciprocal")),
    "Relu": _l(unary("relu")),
    "Sigmoid": _l(unary("sigmoid")),
    "Sqrt": _l(unary("sqrt")),
    "Tanh": _l(unary("tanh")),
    "Log": _l(unary("log")),
    # the softplus family: one popops::map expression each (estimators/popops.py VECTOR_OPS)
    "Softplus": _l(unary("softplus")),
    "Softsign": _l(unary("softsign")),
    "Mish": _l(unary("mish")),
    "Elu": _l(elementwise.unary_with("elu_scalar", "alpha", 1.0), ("alpha",)),
    "Celu": _l(elementwise.unary_with("celu_scalar", "alpha", 1.0), ("alpha",)),
    "ThresholdedRelu": _l(elementwise.unary_with("thresholded_relu_scalar", "alpha", 1.0), ("alpha",)),
    "Selu": _l(elementwise.lower_selu, ("alpha", "gamma")),
    "PRelu": _l(elementwise.lower_prelu),
    "Gelu": _l(elementwise.lower_gelu, ("approximate",)),
    "HardSigmoid": _l(elementwise.lower_hard_sigmoid, ("alpha", "beta")),
    "HardSwish": _l(elementwise.lower_hard_swish),
    "IsInf": _l(elementwise.lower_is_inf, ("detect_negative", "detect_positive")),
    "LeakyRelu": _l(elementwise.lower_leaky_relu, ("alpha",), trainable=False),
    "Clip": _l(elementwise.lower_clip, ("min", "max")),
    "Add": _l(binary("add")),
    "Sub": _l(binary("sub")),
    "Mul": _l(binary("mul")),
    "Div": _l(binary("div")),
    "Pow": _l(binary("pow")),
    "Max": _l(elementwise.lower_max, trainable=False),
    "Min": _l(elementwise.lower_min, trainable=False),
    "Where": _l(elementwise.lower_where),
    "Greater": _l(elementwise.lower_compare),  # masks against a constant: no gradient flows through them
    "Less": _l(elementwise.lower_compare),
    # matmul family
    "MatMul": _l(matmul.lower_matmul),
    "Gemm": _l(matmul.lower_gemm, ("alpha", "beta", "transA", "transB")),
    "Einsum": _l(matmul.lower_einsum, ("equation",)),
    "CumSum": _l(matmul.lower_cumsum, ("exclusive", "reverse")),
    # recurrent cells as popnn runs them (lowering/recurrent.py): an input matmul, then a loop of matmul + gates
    "LSTM": _l(recurrent.lower_lstm, ("activations", "activation_alpha", "activation_beta", "clip", "direction",
                                      "hidden_size", "input_forget", "layout")),
    "GRU": _l(recurrent.lower_gru, ("activations", "activation_alpha", "activation_beta", "clip", "direction",
                                    "hidden_size", "layout", "linear_before_reset")),
    # row ops
    "Softmax": _l(rows.lower_softmax, ("axis",)),
    "LayerNormalization": _l(rows.lower_layer_normalization, ("axis", "epsilon", "stash_type")),
    "InstanceNormalization": _l(rows.lower_instance_normalization, ("epsilon",)),
    "GroupNormalization": _l(rows.lower_group_normalization, ("epsilon", "num_groups", "stash_type")),
    "ReduceMean": _l(rows.lower_reduce_mean, _REDUCE),
    "ReduceSum": _l(rows.lower_reduce_sum, _REDUCE),
    "ReduceSumSquare": _l(rows.lower_reduce_sum_square, _REDUCE),
    "ReduceL2": _l(rows.lower_reduce_l2, _REDUCE),
    # convolution, pooling, batch norm
    "Conv": _l(conv.lower_conv, ("kernel_shape", "strides", "pads", "dilations", "group", "auto_pad")),
    "MaxPool": _l(conv.lower_max_pool, (*_WINDOW, "storage_order")),
    "AveragePool": _l(conv.lower_average_pool, (*_WINDOW, "count_include_pad")),
    "GlobalAveragePool": _l(conv.lower_global_average_pool),
    "BatchNormalization": _l(conv.lower_batch_normalization, ("epsilon", "momentum", "training_mode", "spatial")),
    "ConvTranspose": _l(resample.lower_conv_transpose, ("kernel_shape", "strides", "pads", "dilations", "group",
                                                        "auto_pad", "output_padding", "output_shape")),
    "Resize": _l(resample.lower_resize, ("mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                                         "extrapolation_value", "nearest_mode", "antialias", "axes",
                                         "keep_aspect_ratio_policy")),
    # quantized models, run as an IPU runs them: float, weights dequantized (lowering/quantized.py)
    "QuantizeLinear": _l(quantized.lower_quantize_linear, ("axis", "saturate", "block_size", "output_dtype"),
                         trainable=False),
    "DequantizeLinear": _l(quantized.lower_dequantize_linear, ("axis", "block_size"), trainable=False),
    "DynamicQuantizeLinear": _l(quantized.lower_dynamic_quantize_linear, trainable=False),
    "MatMulInteger": _l(quantized.lower_matmul_integer, trainable=False),
    "ConvInteger": _l(quantized.lower_conv_integer, ("kernel_shape", "strides", "pads", "dilations", "group",
                                                     "auto_pad"), trainable=False),
    "QLinearMatMul": _l(quantized.lower_qlinear_matmul, trainable=False),
    "QLinearConv": _l(quantized.lower_qlinear_conv, ("kernel_shape", "strides", "pads", "dilations", "group",
                                                     "auto_pad"), trainable=False),
    "QLinearAdd": _l(quantized.lower_qlinear_add, trainable=False),  # com.microsoft
    # views and data movement
    "Identity": _l(views.lower_identity),
    "Dropout": _l(seeded.lower_dropout, ("seed", "ratio")),  # the identity unless training mode is requested
    "Cast": _l(views.lower_cast, ("to", "saturate")),
    "Reshape": _l(views.lower_reshape, ("allowzero", "shape")),
    "Flatten": _l(views.lower_flatten, ("axis",)),
    "Squeeze": _l(views.lower_squeeze, ("axes",)),
    "Unsqueeze": _l(views.lower_unsqueeze, ("axes",)),
    "Transpose": _l(views.lower_transpose, ("perm",)),
    "Expand": _l(views.lower_expand),
    "Slice": _l(views.lower_slice, ("starts", "ends", "axes")),
    "Split": _l(views.lower_split, ("axis", "split", "num_outputs")),
    "Gather": _l(views.lower_gather, ("axis",)),
    "Concat": _l(views.lower_concat, ("axis",)),
    # pure data movement whose index the op itself computes on an index array
    "DepthToSpace": _l(views.index_op, ("blocksize", "mode")),
    "GatherElements": _l(views.index_op, ("axis",)),
    "GatherND": _l(views.index_op, ("batch_dims",)),
    "Pad": _l(views.index_op, ("mode", "pads", "value")),
    "ScatterND": _l(views.lower_scatter_nd, ("reduction",)),
    "SpaceToDepth": _l(views.index_op, ("blocksize",)),
    "Tile": _l(views.index_op),
    "Trilu": _l(views.index_op, ("upper",)),
}

# Examples of ops seen folded in exported models (any op of the default domain folds when its inputs are known).
FOLD_ONLY_OPS = (
    "And", "Ceil", "Constant", "ConstantOfShape", "Equal", "Floor", "GreaterOrEqual",
    "LessOrEqual", "Not", "Or", "Range", "ReduceMax", "ReduceMin", "ReduceProd", "Shape", "Size",
    "Mod", "Sign", "NonZero", "OneHot", "Cos", "Sin",
)
DEVICE_OPS = tuple(sorted(LOWERINGS))
# random ops: drawn once from the run's seed when the graph is built (seeded.py), named in the run's notes
SEEDED_RANDOM_OPS = seeded.RANDOM_OPS
SUPPORTED_OPS = tuple(sorted(set(DEVICE_OPS) | set(FOLD_ONLY_OPS) | set(SEEDED_RANDOM_OPS)))
TRAINABLE_OPS = tuple(sorted(op for op, lw in LOWERINGS.items() if lw.trainable))
KNOWN_ATTRS = {op: set(lw.attrs) for op, lw in LOWERINGS.items() if lw.attrs}
# rearrangements of a weight that stay a weight when folded
PARAM_FOLDABLE = {"Transpose", "Reshape", "Identity", "Cast", "Squeeze", "Unsqueeze", "Flatten"}

# what to do instead, said with the error for an op type that has no lowering (the default: INSTEAD[""])
INSTEAD = {
    "QLinearMul": "quantize with ONNX Runtime's tool in QDQ format (QuantFormat.QDQ): its QuantizeLinear / "
                  "DequantizeLinear pairs around float ops are emulated",
    "QLinearSigmoid": "quantize in QDQ format (QuantFormat.QDQ)",
    "QLinearConcat": "quantize in QDQ format (QuantFormat.QDQ)",
    "QLinearGlobalAveragePool": "quantize in QDQ format (QuantFormat.QDQ)",
    "": "replace the module with supported ops before export, or cut the graph before the node "
        "(onnx.utils.extract_model) and run the rest on the host",
    "If": "control flow is not emulated: export with static shapes (the exporter then resolves the condition) or "
          "give the condition's inputs as constants",
    "Loop": "loops are not emulated: export a fixed-length loop unrolled (a Python for-loop over a constant range "
            "traces unrolled)",
    "Scan": "loops are not emulated: export a fixed-length loop unrolled",
    "RNN": "export the recurrence as LSTM or GRU, or unrolled",
    "NonMaxSuppression": "its output size depends on the data: cut the graph before it and run it on the host",
    "TopK": "its output depends on the data's order: cut the graph before it and run it on the host",
    "NonZero": "its output size depends on the data: cut the graph before it and run it on the host",
    "ScatterElements": "scatter with indices computed on the device is not emulated: compute the indices from "
                       "inputs or constants",
}
