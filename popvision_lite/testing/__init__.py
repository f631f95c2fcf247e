"""Data makers for tests and benchmarks, not used by the product (an import-linter contract keeps it so):

* :mod:`.synthetic` - synthetic, internally consistent profiles of any size (``make_synthetic``,
  ``write_synthetic``);
* :mod:`.microbench` - the emulator microbenchmarks (SRAM readers, exchange, planned GEMM) that check the
  device specs' rates (``python -m popvision_lite.testing.microbench``).
"""
