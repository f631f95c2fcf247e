"""One sweep point: emulate, write its profile and its results row (runs on a Dask worker).

``run_point`` never raises for a problem of the point itself (invalid combination, emulator error,
unwritable folder): it returns a row with ``status = "failed"`` and the message.  A point that kills its
process (segfault, out of memory) is turned into a failed row by the client (``engine.py``).

Files, all written atomically (temp file + rename), in the sweep folder:
``profiles/<key>.pvl`` then ``rows/<key>.json`` (the row names its config hash; resume trusts a point
only when both exist and the hash matches).

``python -m popvision_lite.sweep.point SPEC_JSON OUT_DIR`` runs one point in its own process (the
``--isolate process`` mode) and prints the row as JSON.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
from pathlib import Path

PROFILES = "profiles"
ROWS = "rows"


def profile_relpath(key: str) -> str:
    return f"{PROFILES}/{key}.pvl"


def row_path(out_dir, key: str) -> Path:
    return Path(out_dir) / ROWS / f"{key}.json"


def price_per_chip_hour(device: str) -> tuple[float | None, str]:
    """(USD per chip-hour, '' or the reason there is none) from the device spec's [price] table."""
    from popvision_lite.devices import load_device
    from popvision_lite.errors import PopvisionError

    try:
        spec = load_device(device)
    except PopvisionError as e:
        return None, f"device spec unreadable: {e}"
    price = spec.usd_per_hour
    if price is None:
        return None, f"no [price] in the {device} device spec"
    return float(price), ""


def metrics(run, device: str) -> dict:
    """Row numbers of a finished emulation (``ModelRun``)."""
    from popvision_lite.emulator.cli import summarize

    s = summarize(run.profile_data, run)
    split = s["split"]
    busy = max(1, sum(split.values()))
    cfg = run.cfg
    chips = int(getattr(cfg, "ipus", 1) or 1)
    sps = getattr(run, "samples_per_second", None)
    if sps is not None and sps > 0:
        sps_basis = "emulator (ModelRun.samples_per_second)"
    else:
        sps = cfg.batch / s["seconds"] if s["seconds"] > 0 else float("nan")
        sps_basis = "batch / step time (no samples_per_second from the emulator)"
    price, why = price_per_chip_hour(device)
    if price is not None and sps > 0 and math.isfinite(sps):
        cost = price * chips * (1e6 / sps) / 3600.0
        cost_note = f"{price} USD/chip-hour x {chips} chip(s) (device spec [price])"
    else:
        cost = float("nan")
        cost_note = why or "no throughput"
    return dict(
        fits=bool(s["fits"]),
        chips=chips,
        peak_tile_memory_pct=100.0 * s["peak_bytes"] / s["capacity"],
        peak_tile=s["peak_tile"],
        samples_per_second=float(sps),
        samples_per_second_basis=sps_basis,
        total_cycles=int(s["total_cycles"]),
        step_seconds=float(s["seconds"]),
        compute_share=split.get("compute", 0) / busy,
        exchange_share=(split.get("exchange_internal", 0) + split.get("exchange_global", 0)) / busy,
        sync_share=split.get("sync", 0) / busy,
        stream_copy_share=split.get("stream_copy", 0) / busy,
        usd_per_chip_hour=price if price is not None else float("nan"),
        cost_per_1m_samples_usd=cost,
        cost_note=cost_note,
    )


def _write_json_atomic(path: Path, obj: dict) -> None:
    from popvision_lite.profile._atomic import atomic_text

    with atomic_text(path) as fh:
        json.dump(obj, fh, default=_json_default)


def _json_default(o):
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    return str(o)


def base_row(spec: dict, config_hash: str, key: str) -> dict:
    return {"config_hash": config_hash, "key": key, "model": spec["model"], "device": spec["device"],
            "timing_only": spec["timing_only"], **spec["args"]}


def run_point(spec: dict, out_dir: str, config_hash: str, key: str, point_fn=None) -> dict:
    """Emulate ``spec`` and write ``profiles/<key>.pvl`` and ``rows/<key>.json`` under ``out_dir``.

    ``point_fn(spec, profile_path) -> ModelRun`` replaces the emulation (tests, benchmarks)."""
    t0 = time.perf_counter()
    row = base_row(spec, config_hash, key)
    row.update(status="failed", error="", profile="", host=socket.gethostname(), pid=os.getpid())
    out = Path(out_dir)
    try:
        if not out.is_dir():
            raise FileNotFoundError(f"sweep folder {out_dir} is not visible on worker host {socket.gethostname()}; "
                                    "with --scheduler the folder must be a path every worker shares")
        (out / PROFILES).mkdir(exist_ok=True)
        (out / ROWS).mkdir(exist_ok=True)
        rel = profile_relpath(key)
        run = (point_fn or emulate)(spec, str(out / rel))
        # every resolved model field (defaults included); 'model' stays the name given (bert-base, not bert)
        row.update({k: v for k, v in run.cfg.to_dict().items() if k != "model"})
        row.update(metrics(run, spec["device"]))
        row.update(status="ok", profile=rel)
    except Exception as e:  # noqa: BLE001 - every failure of a point becomes its row, never the sweep's end
        row["error"] = _message(e)
    row["wall_seconds"] = time.perf_counter() - t0
    try:
        _write_json_atomic(row_path(out, key), row)
    except Exception as e:  # noqa: BLE001
        row.update(status="failed", error=f"{row['error']}; row not written: {_message(e)}".lstrip("; "))
    return row


def _message(e: BaseException) -> str:
    from popvision_lite.errors import PopvisionError

    if isinstance(e, PopvisionError):
        return str(e)
    if isinstance(e, MemoryError):
        return "out of host memory (MemoryError)"
    return f"{type(e).__name__}: {e}"


def emulate(spec: dict, profile_path: str):
    """The default point: ``run_model`` of the spec, profile written to ``profile_path``."""
    from popvision_lite.emulator.models.emulated import run_model
    from popvision_lite.emulator.models.workloads import make_config

    cfg = make_config(spec["model"], **spec["args"])
    return run_model(cfg, device=spec["device"], timing_only=spec["timing_only"], profile_path=profile_path)


def run_point_isolated(spec: dict, out_dir: str, config_hash: str, key: str, point_fn=None,
                       timeout: float | None = None) -> dict:
    """:func:`run_point` in a child process: a crash there (segfault, killed for memory) fails only this
    point, with the signal named, and the worker goes on.  ``point_fn`` must be importable by name."""
    import signal
    import subprocess

    fn = "" if point_fn is None else f"{point_fn.__module__}:{point_fn.__qualname__}"
    cmd = [sys.executable, "-m", "popvision_lite.sweep.point", json.dumps(spec), str(out_dir), config_hash, key, fn]
    t0 = time.perf_counter()
    try:
        # the child imports what this worker imports (its sys.path, e.g. a source checkout or a test folder)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=_child_setup)
    except subprocess.TimeoutExpired:
        proc = None
    if proc is not None and proc.returncode == 0:
        try:
            return json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pass
    row = base_row(spec, config_hash, key)
    if proc is None:
        why = f"timed out after {timeout} s"
    elif proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        why = f"the point's process was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    else:
        why = f"the point's process exited with status {proc.returncode}"
    tail = (proc.stderr or "").strip().splitlines()[-3:] if proc is not None else []
    row.update(status="failed", error=why + (": " + " | ".join(tail) if tail else ""), profile="",
               host=socket.gethostname(), pid=os.getpid(), wall_seconds=time.perf_counter() - t0)
    return row


def _child_setup() -> None:
    """In the point's child process, before exec: Ctrl+C stops it (its worker ignores SIGINT), and it dies
    with its worker (Linux PR_SET_PDEATHSIG) instead of running on after a cancelled sweep."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass


def _main(argv: list[str]) -> int:
    import importlib

    spec, out_dir, h, key = json.loads(argv[0]), argv[1], argv[2], argv[3]
    fn = None
    if len(argv) > 4 and argv[4]:
        mod, _, name = argv[4].partition(":")
        fn = getattr(importlib.import_module(mod), name)
    row = run_point(spec, out_dir, h, key, point_fn=fn)
    print(json.dumps(row, default=_json_default))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
