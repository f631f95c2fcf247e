"""The one table from vertex type to the poplibs library it belongs to and the estimator that costs it.

A vertex type is a codelet's ``name``, as the vertices table of a profile stores it.  The codelet classes live in
``emulator/codelets/``, one module per library as the estimator modules are grouped: ``popops.py`` and
``popops_rows.py`` (popops; the ONNX importer's elementwise codelets are in ``popops.py``, although the exact
GELU pair is filed under popnn below, whose cost model it borrows), ``poplin.py`` and ``poplin_conv.py`` (poplin),
``popnn.py`` (popnn), ``microbench.py``, on the base classes of ``base.py``.  This table gives each
its library (popops / poplin / popnn, or the microbenchmark reader) and names
the function of ``emulator/estimators`` that gives each one's cycles (for an elementwise codelet, the one its
``model`` selects through ``estimators/elementwise.py``).  tests/emulator/estimators/test_vertex_types.py
checks that every codelet the emulator defines has an entry and every entry a codelet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from popvision_lite.emulator.estimators import microbench, poplin, poplin_conv, popnn, popops


@dataclass(frozen=True)
class VertexEstimator:
    library: str                            # popops / poplin / popnn / microbench
    estimators: tuple[Callable, ...]        # the estimator functions its cycles come from


def _entries(library: str, names, *estimators: Callable) -> dict[str, VertexEstimator]:
    return {n: VertexEstimator(library, estimators) for n in names}


# the ONNX importer's extra elementwise codelets (codelets/popops.py), named "Onnx" + the kind in title case;
# costed by popops' per-vector table for the storage dtype, except the two that borrow the library's GELU
ONNX_UNARY = ("abs", "add_scalar", "celu_scalar", "elu_scalar", "erf", "exp", "hard_sigmoid", "hard_swish",
              "isinf", "isnan", "log", "lt_scalar", "gt_scalar", "max_scalar", "min_scalar", "mish", "neg",
              "pow_scalar", "reciprocal", "round", "rsqrt", "sigmoid", "softplus", "softsign", "sqrt", "square",
              "tanh", "thresholded_relu_scalar")
ONNX_BINARY = ("div", "hard_sigmoid_bwd", "hard_swish_bwd", "max", "min", "mish_bwd", "pow", "softplus_bwd",
               "softsign_bwd", "sub")
ONNX_LIBRARY_GELU = ("gelu_erf", "gelu_erf_bwd")


def onnx_vertex_type(kind: str) -> str:
    """The vertex type of the ONNX importer's elementwise codelet of ``kind``."""
    return f"Onnx{kind.title().replace('_', '')}"


VERTEX_ESTIMATORS: dict[str, VertexEstimator] = {
    # ---- popops: elementwise (BinaryOp1D / UnaryOp1D / Cast / Fill / ScaledAdd), reductions, row passes
    **_entries("popops", ("Add", "Sub", "Mul", "Max", "Scale"), popops.binary_op_worker_cycles),
    **_entries("popops", ("AddInPlace",), popops.binary_op_inplace_worker_cycles),
    **_entries("popops", ("Relu", "Neg", "Exp"), popops.unary_op_worker_cycles),
    **_entries("popops", ("Copy", "Cast"), popops.cast_worker_cycles),
    **_entries("popops", ("Fill",), popops.fill_worker_cycles),
    **_entries("popops", ("SgdUpdate",), popops.scaled_add_worker_cycles),
    **_entries("popops", ("ScaledSub",), popops.binary_op_worker_cycles),
    **_entries("popops", ("ReduceAdd",), popops.strided_reduce_cycles, poplin.reduce_add_tile_vertex_cycles),
    **_entries("popops", ("ReducePartials",), popops.strided_reduce_cycles),
    **_entries("popops", ("SoftmaxRows", "SoftmaxGradRows", "LayerNormRows", "LayerNormGradRows", "ColumnSumRows",
                          "ChannelAffineRows", "BatchNormGradApplyRows"), popops.row_vertex_cycles),
    **_entries("popops", ("BatchNormStatsRows",), popops.tile_strided_reduce_share),
    **_entries("popops", ("BatchNormGradStatsRows",), popops.row_vertex_cycles, popops.tile_strided_reduce_share),
    **_entries("popops", [onnx_vertex_type(k) for k in (*ONNX_UNARY, *ONNX_BINARY)], popops.vector_cycles,
               popops.fallback_worker_cycles),
    **_entries("popops", ("OnnxSelect",), popops.vector_cycles, popops.fallback_worker_cycles),
    # ---- poplin: the AMP matmul and convolution partials
    **_entries("poplin", ("BlockMatMul", "BlockMatMulAcc"), poplin.amp_worker_cycles),
    **_entries("poplin", [f"TileMatMul{a}{b}{acc}" for a in "NT" for b in "NT" for acc in ("", "Acc")],
               poplin.amp_supervisor_cycles),
    **_entries("poplin", ("ConvPartialnx1",), poplin_conv.nx1_tile_cycles, poplin.reduce_add_cycles),
    **_entries("poplin", ("ConvPartialWeightUpdate",), poplin.amp_matmul_tile_cycles, poplin.reduce_add_cycles),
    # ---- popnn: non-linearities, pooling, batch-norm coefficients
    **_entries("popnn", ("Gelu", "GeluGrad", "ReluGrad"), popnn.nonlinearity_worker_cycles),
    **_entries("popnn", [onnx_vertex_type(k) for k in ONNX_LIBRARY_GELU], popnn.nonlinearity_worker_cycles),
    **_entries("popnn", ("MaxPoolWindows", "SumPoolWindows", "MaxPoolingGradRows"), popnn.pooling_cycles),
    **_entries("popnn", ("BatchNormCoeffs", "BatchNormGradCoeffs"), popnn.bn_coeff_cycles),
    # ---- the SRAM-reader microbenchmark (Jia et al. 2019; not a poplibs vertex)
    **_entries("microbench", ("ReadSum", "ReadSumAsm"), microbench.sram_reader_cycles),
}


def estimator_of(vertex_type: str) -> VertexEstimator:
    """The library and estimators of ``vertex_type``; KeyError for a type the emulator does not define."""
    return VERTEX_ESTIMATORS[vertex_type]
