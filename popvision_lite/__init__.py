"""popvision-lite: an open profiler and tile-level emulator for Graphcore-style IPUs.

Notebook use (examples/ has runnable scripts)::

    import popvision_lite as pvl
    p = pvl.open("run.pvl")
    p.steps                 # one row per STORED BSP step (index step): kind_name, cycles, seconds, and runs /
                            # ipu_seconds: how often it runs per training step, the IPU time it stands for
    p.ops, p.tiles          # every table indexed by its id (op_id, tile ...); <NA> for none; units in the names
    p.memory.by_tile()      # one row per tile, bytes per Poplar category; also p.table("memory_by_tile")
    p.totals                # the step's IPU time per (phase, step kind): the Summary's numbers
    pvl.compare(a, b).headline, pvl.insights(p), pvl.verdict(p)
    pvl.binding_constraint(p).text(), pvl.fit_advice(p)   # why it does not fit; the cheapest config that does
    pvl.units.format_seconds(p.totals["ipu_seconds"].sum())
    pvl.torch_trace("trace.json"), pvl.plot.roofline(p, trace="trace.json")   # measured GPU kernels, matplotlib
"""

from __future__ import annotations

__version__ = "0.1.0"

import logging as _logging  # noqa: E402

# the library logs under "popvision_lite" (each module: logging.getLogger(__name__)) and leaves the output to the
# program that imports it: a notebook sees nothing until it configures logging; the CLI: cli/logs.py
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

from popvision_lite import units  # noqa: E402  (light: the formatting of every number shown)
from popvision_lite.errors import (  # noqa: E402
    ArgumentTypeError,
    ArgumentValueError,
    ConfigError,
    DeviceSpecError,
    EmulatorError,
    OutOfMemoryError,
    PopvisionError,
    ProfileError,
)


def _totals(profile):
    """``Profile.totals``: the run's totals as a table (one definition: analysis/run_totals.py)."""
    from popvision_lite.analysis.run_totals import totals_frame

    return totals_frame(profile)


from popvision_lite import profile as _profile  # noqa: E402  (light: lazy exports and this registry)

_profile.BUILDERS["totals"] = _totals


def open(path):  # noqa: A001 - mirrors builtins.open on purpose: pvl.open("run.pvl")
    """Open a profile lazily; see :class:`popvision_lite.profile.reader.Profile`."""
    from popvision_lite import api_args
    from popvision_lite.profile.reader import open_profile

    return open_profile(api_args.path(path, "path"))


def _opened(profile, name: str = "profile"):
    """(profile, opened_here): ``profile`` itself, or the profile at that path opened now; TypeError naming
    ``name`` for anything else."""
    from popvision_lite import api_args

    if api_args.profile(profile, name):
        return open(profile), True
    return profile, False


def compare(a, b, label_a: str | None = None, label_b: str | None = None):
    """Compare runs ``a`` and ``b`` (paths or open profiles; paths stay open with the comparison): every delta
    is B - A, every ratio B / A.  See :class:`popvision_lite.analysis.compare.Comparison`: ``headline``
    (numeric a, b, delta, ratio plus their text), ``notes``, ``op_table()``, ``markdown()``."""
    from popvision_lite import api_args
    from popvision_lite.analysis.compare import compare as _compare

    api_args.text(label_a, "label_a", none_ok=True)
    api_args.text(label_b, "label_b", none_ok=True)
    api_args.profile(a, "a")
    api_args.profile(b, "b")
    return _compare(_opened(a, "a")[0], _opened(b, "b")[0], label_a, label_b)


def insights(profile, spec=None):
    """The findings for ``profile`` (a path or an open profile), most severe first: out-of-memory tiles and
    the variables behind them, imbalance, exchange- or sync-bound phases, what recomputation saved.  Each is a
    :class:`popvision_lite.analysis.insights.Finding` (``severity``, ``kind``, ``title``, ``text``, ``tiles``,
    ``ops``, ``variables``, ``numbers``)."""
    from popvision_lite import api_args
    from popvision_lite.analysis.insights import insights as _insights

    if spec is not None and not isinstance(spec, str) and not hasattr(spec, "value"):
        raise ArgumentTypeError(f"spec must be a device id (e.g. 'ipu-mk2'), a DeviceSpec or None, got "
                        f"{type(spec).__name__} {spec!r}"[:120])
    api_args.profile(profile)
    p, mine = _opened(profile)
    try:
        return _insights(p, spec)
    finally:
        if mine:
            p.close()


def verdict(profile, gpu: str = "a100-80gb", gpus: int | None = None, samples: int = 1_000_000,
            gpu_micro_batch: int | None = None, gpu_precision: str | None = None, precision: str | None = None,
            gpu_tp: int | None = None, gpu_pp: int | None = None, gpu_vp: int | None = None):
    """IPU or GPU: the emulated run of ``profile`` (a path or an open profile) next to ``gpus`` x ``gpu``
    estimated, each side with its error band; ``precision`` the GPUs train in (fp32 | fp16 | bf16 | fp8; default
    the run's), ``gpu_tp`` / ``gpu_pp`` / ``gpu_vp`` / ``gpu_micro_batch`` state the GPU placement (default
    searched); see :func:`popvision_lite.analysis.verdict.verdict`.  ``print(pvl.verdict("run.pvl").text())``"""
    from popvision_lite import api_args
    from popvision_lite.analysis.verdict import verdict as _verdict

    kw = dict(gpu=api_args.text(gpu, "gpu"), gpus=api_args.whole(gpus, "gpus", lo=1, none_ok=True),
              samples=api_args.whole(samples, "samples", lo=1),
              gpu_micro_batch=api_args.whole(gpu_micro_batch, "gpu_micro_batch", lo=1, none_ok=True),
              gpu_precision=api_args.text(gpu_precision, "gpu_precision", none_ok=True),
              precision=api_args.text(precision, "precision", none_ok=True),
              gpu_tp=api_args.whole(gpu_tp, "gpu_tp", lo=1, none_ok=True),
              gpu_pp=api_args.whole(gpu_pp, "gpu_pp", lo=1, none_ok=True),
              gpu_vp=api_args.whole(gpu_vp, "gpu_vp", lo=1, none_ok=True))
    if api_args.profile(profile):
        with open(profile) as p:
            return _verdict(p, **kw)
    return _verdict(profile, **kw)


def emulate_onnx(path, output=None, **options):
    """Import an ONNX model, emulate one inference step and return ``(run, profile)``.

    ``run`` is a :class:`popvision_lite.emulator.run_result.RunResult` (cycles, fits, numeric checks
    against ONNX Runtime, outputs); ``profile`` is the written profile opened with :func:`open` when
    ``output`` is given, else the in-memory ``ProfileData``.  Options: ``batch``, ``seq``, ``dims``
    ({name: value}), ``device``, ``precision``, ``timing_only``, ``ipus``, ``seed``, ``inputs`` (.npz
    path or dict), ``progress`` (callable(stage, fraction)); see ``emulate_onnx`` in
    ``emulator/onnx_import/run.py``."""
    from popvision_lite import api_args
    from popvision_lite.emulator.onnx_import import emulate_onnx as _emulate

    api_args.path(path, "path")
    if output is not None:
        api_args.path(output, "output")
    run = _emulate(path, output, **options)
    return run, (open(output) if output else run.profile_data)
def open_sweep(path):
    """The results table of a ``popvision-lite sweep`` (its sweep.csv or folder) as a DataFrame;
    see :func:`popvision_lite.sweep.results.open_sweep`."""
    from popvision_lite import api_args
    from popvision_lite.sweep.results import open_sweep as _open_sweep

    return _open_sweep(api_args.path(path, "path"))


def fit_advice(base, **options):
    """When a run does not fit in tile memory: the cheapest configuration that does, emulated and checked, or why
    none does up to a pod.  ``base``: a bundled model's name (its fields as keyword arguments, as ``emulate`` takes
    them: ``pvl.fit_advice("gpt3-13b", optimizer="adam", grad_accum=128)``), a run-config dict or TOML file, or a
    profile (path or open) of a run that does not fit.  Search options: ``max_ipus`` (256), ``global_batch``,
    ``budget`` (emulations), ``options``, ``out`` (the search folder), ``workers`` / ``scheduler`` / ``client``
    (Dask), ``progress``, ``should_cancel``.  Returns a :class:`popvision_lite.sweep.fit_result.FitAdvice` (``.best``,
    ``.options``, ``.text()``, ``.to_frame()``); see docs/fit-advisor.md."""
    from pathlib import Path

    from popvision_lite.emulator.models.config import MODEL_NAMES
    from popvision_lite.emulator.run_config import TOP_KEYS, load_run_config
    from popvision_lite.sweep.fit import fit_advice as _fit

    search = {k: options.pop(k) for k in ("max_ipus", "global_batch", "budget", "options", "out", "workers",
                                          "scheduler", "client", "isolate", "progress", "should_cancel")
              if k in options}
    if isinstance(base, str) and base in MODEL_NAMES:
        top = {k: options.pop(k) for k in TOP_KEYS if k in options}
        base = {"model": base, **top, "model_args": options}
    elif options:
        raise TypeError(f"fit_advice: model fields ({', '.join(options)}) go with a model name, not with {base!r}")
    elif isinstance(base, str | bytes) or hasattr(base, "__fspath__"):
        if Path(base).suffix.lower() == ".toml":
            base = load_run_config(base)
    return _fit(base, **search)


def binding_constraint(profile):
    """Why ``profile`` (a path or an open profile) does not fit, per IPU: the tiles over capacity, the cause (total
    bytes or an uneven layout), the Poplar category and the tensors holding the excess; see
    :func:`popvision_lite.analysis.fit_constraint.binding_constraint`.  ``print(pvl.binding_constraint(p).text())``"""
    from popvision_lite.analysis.fit_constraint import binding_constraint as _bc

    p, mine = _opened(profile)
    try:
        return _bc(p)
    finally:
        if mine:
            p.close()


def torch_trace(path):
    """The GPU kernels of a PyTorch profiler trace (Chrome-trace JSON, or .json.gz) as a DataFrame: name, time,
    FLOPs and bytes (recorded or derived from the ops' shapes), achieved FLOP/s, intensity, the launching op and,
    for a kernel that cannot be plotted, ``drop_reason``; ``df.attrs["report"]`` counts read / plotted / dropped.
    See :func:`popvision_lite.analysis.torch_trace.load_torch_trace`."""
    from popvision_lite import api_args
    from popvision_lite.analysis.torch_trace import load_torch_trace

    return load_torch_trace(api_args.path(path, "path"))


def __getattr__(name):
    if name == "plot":  # matplotlib plots, imported on first use (matplotlib is optional)
        import importlib

        return importlib.import_module("popvision_lite.plot")
    raise AttributeError(f"module 'popvision_lite' has no attribute {name!r}")


__all__ = [
    "torch_trace",
    "fit_advice",
    "binding_constraint",
    "plot",
    "compare",
    "insights",
    "units",
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
    "ArgumentTypeError",
    "ArgumentValueError",
]
