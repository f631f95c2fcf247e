"""Import measured GPU kernel timings from a PyTorch profiler Chrome-trace JSON (pure, no Qt).

What is read (``torch.profiler`` / Kineto ``export_chrome_trace`` output)::

    {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10, "dur": 40,
         "args": {"External id": 7, "flops": 2147483648}},             # with_flops=True adds "flops"
        {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm...", "ts": 20, "dur": 31.5,
         "args": {"External id": 7, "correlation": 99}},
        ...]}

* Plain or gzip-compressed JSON (``.json.gz``).
* Events with ``cat`` ``kernel`` or ``gpu_op`` and ``ph`` ``X`` are GPU points; ``dur`` is in microseconds.
* FLOPs: the event's own ``args.flops`` if present; otherwise the ``flops`` of the ``cpu_op`` with the same
  ``External id`` (shared between that op's kernels in proportion to their duration); otherwise unknown.
* Bytes: ``args.bytes`` (or ``dram_bytes``) if a tool recorded it; PyTorch does not, so most points have an
  unknown intensity and the roofline view draws them at the plot edge as "intensity unknown".

Anything malformed raises :class:`TraceImportError` naming the file and the event.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from popvision_lite.errors import PopvisionError

GPU_CATS = ("kernel", "gpu_op")
COLUMNS = ("name", "cat", "ts_us", "dur_s", "flops", "bytes", "achieved_flops", "intensity", "flops_from")


class TraceImportError(PopvisionError):
    """A PyTorch profiler trace is missing, not JSON, or has malformed events."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def _num(v, path, where):
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise TraceImportError(path, f"{where}: expected a number, got {v!r}")
    try:
        x = float(v)
    except ValueError:
        raise TraceImportError(path, f"{where}: expected a number, got {v!r}") from None
    if not math.isfinite(x) or x < 0:
        raise TraceImportError(path, f"{where}: must be a finite number >= 0, got {v!r}")
    return x


def load_torch_trace(path) -> pd.DataFrame:
    """GPU kernels of a PyTorch profiler trace as a DataFrame with :data:`COLUMNS`.

    ``achieved_flops`` = flops / dur (NaN when FLOPs are unknown); ``intensity`` = flops / bytes (NaN when
    bytes are unknown).  Zero-duration kernels are dropped (they cannot be placed on a log axis).
    """
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as e:
        raise TraceImportError(path, f"cannot read trace: {e.strerror or e}") from None
    if text[:2] == b"\x1f\x8b":  # torch.profiler can write .json.gz
        try:
            text = gzip.decompress(text)
        except (OSError, EOFError) as e:
            raise TraceImportError(path, f"corrupt gzip file: {e}") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceImportError(path, f"not a JSON file: {e}") from None
    if isinstance(data, dict):
        if "traceEvents" not in data:
            raise TraceImportError(path, "no 'traceEvents' key: not a Chrome trace")
        events = data["traceEvents"]
    elif isinstance(data, list):
        events = data
    else:
        raise TraceImportError(path, f"top level must be an object or array, got {type(data).__name__}")
    if not isinstance(events, list):
        raise TraceImportError(path, "'traceEvents' must be an array")

    op_flops: dict = {}
    kernels = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise TraceImportError(path, f"traceEvents[{i}] is not an object")
        cat = ev.get("cat")
        args = ev.get("args") or {}
        if not isinstance(args, dict):
            raise TraceImportError(path, f"traceEvents[{i}] ({ev.get('name', '?')}): 'args' must be an object")
        if cat == "cpu_op" and "flops" in args and "External id" in args:
            op_flops[args["External id"]] = _num(args["flops"], path, f"traceEvents[{i}].args.flops")
        if cat in GPU_CATS and ev.get("ph", "X") == "X":
            name = ev.get("name")
            if not isinstance(name, str):
                raise TraceImportError(path, f"traceEvents[{i}]: kernel event without a 'name'")
            if "dur" not in ev:
                raise TraceImportError(path, f"traceEvents[{i}] ({name}): kernel event without 'dur'")
            dur = _num(ev["dur"], path, f"traceEvents[{i}].dur")
            ts = _num(ev.get("ts", 0), path, f"traceEvents[{i}].ts")
            fl = _num(args["flops"], path, f"traceEvents[{i}].args.flops") if "flops" in args else math.nan
            by = math.nan
            for bk in ("bytes", "dram_bytes"):
                if bk in args:
                    by = _num(args[bk], path, f"traceEvents[{i}].args.{bk}")
                    break
            kernels.append((name, cat, ts, dur, fl, by, args.get("External id")))

    if not kernels:
        raise TraceImportError(path, f"no GPU kernel events (cat {' / '.join(GPU_CATS)}) in {len(events)} events")
    df = pd.DataFrame(kernels, columns=["name", "cat", "ts_us", "dur_us", "flops", "bytes", "ext"])
    df["flops_from"] = np.where(df["flops"].notna(), "kernel", "")
    # FLOPs inherited from the cpu_op that launched the kernels, split by duration
    missing = df["flops"].isna() & df["ext"].isin(list(op_flops))
    if missing.any():
        sub = df[missing]
        tot = sub.groupby("ext")["dur_us"].transform("sum")
        share = np.where(tot > 0, sub["dur_us"] / tot, 1.0 / sub.groupby("ext")["dur_us"].transform("count"))
        df.loc[missing, "flops"] = sub["ext"].map(op_flops).to_numpy() * share
        df.loc[missing, "flops_from"] = "cpu_op"
    df = df[df["dur_us"] > 0].copy()
    df["dur_s"] = df["dur_us"] * 1e-6
    df["achieved_flops"] = df["flops"] / df["dur_s"]
    df["intensity"] = df["flops"] / df["bytes"]
    df.loc[~np.isfinite(df["intensity"]) | (df["intensity"] <= 0), "intensity"] = math.nan
    return df.reset_index(drop=True)[list(COLUMNS)]


def plottable(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(points with a known intensity, points with known FLOP/s but unknown intensity)."""
    has_f = df["achieved_flops"].notna() & (df["achieved_flops"] > 0)
    return df[has_f & df["intensity"].notna()], df[has_f & df["intensity"].isna()]
