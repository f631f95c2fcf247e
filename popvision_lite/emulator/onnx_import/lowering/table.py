"""The lowering table: every ONNX op type lowered onto device ops, its lowering function, the attributes it
honours (any other attribute on a node is refused by name, never ignored) and whether it has a backward pass
(``--training``; the rest are refused in training runs).  The supported / trainable op lists are derived from it.

A node whose inputs are all known when the graph is built (initializers, Constant nodes, integer inputs,
shapes and everything computed from those) is evaluated then, whatever its type (constant folding,
``fold.evaluate_node``), so the table lists only the ops that run on the device."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import conv, elementwise, matmul, resample, rows, seeded, views
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
    # matmul family
    "MatMul": _l(matmul.lower_matmul),
    "Gemm": _l(matmul.lower_gemm, ("alpha", "beta", "transA", "transB")),
    "Einsum": _l(matmul.lower_einsum, ("equation",)),
    "CumSum": _l(matmul.lower_cumsum, ("exclusive", "reverse")),
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
    "SpaceToDepth": _l(views.index_op, ("blocksize",)),
    "Tile": _l(views.index_op),
    "Trilu": _l(views.index_op, ("upper",)),
}

# Examples of ops seen folded in exported models (any op of the default domain folds when its inputs are known).
FOLD_ONLY_OPS = (
    "And", "Ceil", "Constant", "ConstantOfShape", "Equal", "Floor", "Greater", "GreaterOrEqual", "Less",
    "LessOrEqual", "Log", "Not", "Or", "Range", "ReduceMax", "ReduceMin", "ReduceProd", "Shape", "Size",
    "Mod", "Sign", "NonZero", "ScatterND", "OneHot", "Cos", "Sin",
)
DEVICE_OPS = tuple(sorted(LOWERINGS))
# random ops: drawn once from the run's seed when the graph is built (seeded.py), named in the run's notes
SEEDED_RANDOM_OPS = seeded.RANDOM_OPS
SUPPORTED_OPS = tuple(sorted(set(DEVICE_OPS) | set(FOLD_ONLY_OPS) | set(SEEDED_RANDOM_OPS)))
TRAINABLE_OPS = tuple(sorted(op for op, lw in LOWERINGS.items() if lw.trainable))
KNOWN_ATTRS = {op: set(lw.attrs) for op, lw in LOWERINGS.items() if lw.attrs}
# rearrangements of a weight that stay a weight when folded
PARAM_FOLDABLE = {"Transpose", "Reshape", "Identity", "Cast", "Squeeze", "Unsqueeze", "Flatten"}
