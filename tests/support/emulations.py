"""One emulation per (config, device, timing_only) for the whole test session, shared by the tests that ask
for the same run.  ``run_model`` keeps only the last whole graph, so two tests in different files that emulate
the same config pay for it twice; ``shared_run`` returns the first result to both.

The result is shared, so it is read-only: a test that changes what it gets (a profile's target, its run
dict), or that patches the emulator before asking (a codelet broken on purpose), calls ``run_model`` itself,
and so does every test of reuse or caching, whose claim is about the second emulation."""

from __future__ import annotations

_RUNS: dict = {}


def shared_run(cfg, device: str = "ipu-mk2", timing_only: bool = False):
    """``run_model(cfg, device, timing_only)``, emulated at most once per session (no profile file)."""
    from popvision_lite.emulator.models.emulated import run_model

    key = repr(cfg), device, bool(timing_only)  # a ModelConfig is not hashable; its repr names every field
    if key not in _RUNS:
        _RUNS[key] = run_model(cfg, device, timing_only=timing_only)
    return _RUNS[key]
