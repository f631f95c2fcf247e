"""popvision-lite: an open profiler and tile-level emulator for Graphcore-style IPUs.

Notebook use::

    import popvision_lite as pvl
    p = pvl.open("run.pvl")
    p.memory.by_tile()      # pandas DataFrame, one row per tile
    p.steps, p.ops, p.tiles
"""

from __future__ import annotations

__version__ = "0.1.0"

from popvision_lite.errors import (  # noqa: E402
    ConfigError,
    DeviceSpecError,
    EmulatorError,
    OutOfMemoryError,
    PopvisionError,
    ProfileError,
)


def open(path):  # noqa: A001 - mirrors builtins.open on purpose: pvl.open("run.pvl")
    """Open a profile lazily; see :class:`popvision_lite.profile.reader.Profile`."""
    from popvision_lite.profile.reader import open_profile

    return open_profile(path)


def verdict(profile, gpu: str = "a100-80gb", gpus: int | None = None, samples: int = 1_000_000,
            gpu_micro_batch: float | None = None):
    """IPU or GPU: the emulated run of ``profile`` (a path or an open profile) next to ``gpus`` x ``gpu``
    estimated; see :func:`popvision_lite.analysis.verdict.verdict`.  ``print(pvl.verdict("run.pvl").text())``"""
    from popvision_lite.analysis.verdict import verdict as _verdict

    kw = dict(gpu=gpu, gpus=gpus, samples=samples, gpu_micro_batch=gpu_micro_batch)
    if isinstance(profile, str | bytes) or hasattr(profile, "__fspath__"):
        with open(profile) as p:
            return _verdict(p, **kw)
    return _verdict(profile, **kw)


def emulate_onnx(path, output=None, **options):
    """Import an ONNX model, emulate one inference step and return ``(run, profile)``.

    ``run`` is a :class:`popvision_lite.emulator.onnx_import.OnnxRun` (cycles, fits, numeric checks
    against ONNX Runtime, outputs); ``profile`` is the written profile opened with :func:`open` when
    ``output`` is given, else the in-memory ``ProfileData``.  Options: ``batch``, ``seq``, ``dims``
    ({name: value}), ``device``, ``precision``, ``timing_only``, ``ipus``, ``seed``, ``inputs`` (.npz
    path or dict), ``progress`` (callable(stage, fraction)); see ``emulate_onnx`` in
    ``emulator/onnx_import/run.py``."""
    from popvision_lite.emulator.onnx_import import emulate_onnx as _emulate

    run = _emulate(path, output, **options)
    return run, (open(output) if output else run.profile_data)
def open_sweep(path):
    """The results table of a ``popvision-lite sweep`` (its sweep.csv or folder) as a DataFrame;
    see :func:`popvision_lite.sweep.results.open_sweep`."""
    from popvision_lite.sweep.results import open_sweep as _open_sweep

    return _open_sweep(path)


__all__ = [
    "verdict",
    "__version__",
    "open",
    "emulate_onnx",
    "open_sweep",
    "PopvisionError",
    "ProfileError",
    "DeviceSpecError",
    "EmulatorError",
    "OutOfMemoryError",
    "ConfigError",
]
