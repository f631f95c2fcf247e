"""Codelets (vertex types) grouped by the poplibs library that defines them, one module per library as
``emulator/estimators`` is grouped: base.py (Codelet, Elementwise), popops.py, popops_rows.py, poplin.py,
poplin_conv.py, popnn.py, microbench.py.  estimators/vertex_types.py is the table from vertex type to library and
estimator."""
