"""The fit advisor's search on a small model, run once per test session (tests/sweep/test_fit.py and the GUI's
tests read its advice): a one-layer GPT (hidden 512, GPT-2's 50,257-token vocabulary, Adam) whose LM head and
Adam state are too many bytes for one IPU, searched up to 2 IPUs with real emulation on a local Dask cluster of
one worker: the same 9 emulations and answer as two workers, without a second worker process's start (measured
side by side: 24.5, 25.3 s CPU with one worker against 27.3, 29.6 s with two)."""

from __future__ import annotations

SMALL = {"model": "gpt2-small", "layers": 1, "hidden": 512, "heads": 4, "seq": 64, "batch": 1, "optimizer": "adam"}
MAX_IPUS = 2


def small_fit(folder):
    from popvision_lite.sweep.fit import fit_advice

    return fit_advice(dict(SMALL), max_ipus=MAX_IPUS, out=folder, workers=1)
