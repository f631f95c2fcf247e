"""Compilation of a graph and program, one job per module: :mod:`.check` (graph checks),
:mod:`.steps` (BSP step templates and the executed step sequence), :mod:`.memory` (memory per tile
and category outside the steps), :mod:`.liveness` (live tensors per step); :mod:`.compiled` holds
what they produce.  ``emulator/compiler.py`` runs them in order (``compile_graph``)."""
