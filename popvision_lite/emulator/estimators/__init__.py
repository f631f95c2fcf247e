"""Codelet cycle estimators, laid out as poplibs lays out its own: one module per library.

* :mod:`.popops` - elementwise unary / binary ops, cast, fill, scaled add, reductions
  (``lib/popops/popopsCycleEstimators.{hpp,cpp}``, ``lib/popops/PerformanceEstimation.cpp``,
  ``lib/popops/reduction/CycleEstimationFunctions.cpp``);
* :mod:`.poplin` - the AMP matmul partials (``lib/poplin/PerformanceEstimation.hpp``,
  ``poplinCycleEstimators.cpp``);
* :mod:`.poplin_conv` - the convolution partials of ``ConvPartialnx1`` (same sources);
* :mod:`.popnn` - non-linearities, pooling, batch-norm coefficients (``lib/popnn/PerformanceEstimation.hpp``,
  ``popnnCycleEstimators.cpp``);
* :mod:`.microbench` - the SRAM-reader microbenchmark codelet (Jia et al. 2019, not a poplibs vertex);
* :mod:`.elementwise` - which of those estimators costs an elementwise codelet piece (the codelets'
  ``model`` tuples), and the 2D (many regions per worker) form of each.
* :mod:`.vertex_types` - the one table from vertex type (a codelet's name) to its library and estimators.

Every cycle figure of the emulator's codelets is defined here once, citing the poplibs function it
comes from (graphcore/poplibs commit 7eac0f26 "mk2-main"; facts and formulas carried over, code our
own) or marked as an assumption.  The codelet classes (``emulator/codelets/``, one module per library
as here) keep only the vertex
behaviour and call these functions; the planners call the same functions, so a plan is charged what
the engine charges.  Nothing here imports the rest of the emulator (import-linter contract
``estimators-pure``): the estimators are functions of sizes and element widths only.

Units: **worker cycles** (what a codelet's ``cycles`` returns; one worker context's issued
instructions) unless a name says ``tile_cycles`` (poplibs' supervisor / MultiVertex estimate:
``numWorkers x workerCycles + supervisorOverhead``).
"""
