"""``popvision-lite sweep``: emulate every point of a grid of run configs on Dask, one profile and one
results row per point.

    popvision-lite sweep sweep.toml                       # base run config + [grid] table
    popvision-lite sweep --model mlp --grid batch=8,16 --grid device=ipu-mk2,ipu-bow -o DIR
    popvision-lite sweep --config base.toml --grid ipus=1,2,4 -o DIR

Exit codes: 0 every point ran (some may not fit), 1 some points failed (their rows say why), 2 bad input
(unknown grid field, empty grid, too many points without --yes, unreachable scheduler), 130 cancelled
(Ctrl+C: finished rows kept; run the same command again to resume).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path

from popvision_lite.cli.args import positive_int
from popvision_lite.errors import ConfigError
from popvision_lite.terminal import terminal_text
from popvision_lite.value_checks import arg_number

PROG = "popvision-lite sweep"
log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sweep_config", nargs="?", metavar="CONFIG.toml",
                   help="sweep file: a run config (model, device, model fields) plus a [grid] table of "
                        "field = [values]")
    p.add_argument("--config", help="base run config (as for 'emulate --config'); combine with --grid")
    p.add_argument("--model", help="model of every point (or 'model' in the config / grid)")
    p.add_argument("--device", help="device of every point (default ipu-mk2; or a 'device' grid)")
    p.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2,...",
                   help="a grid field and its values; repeat for more fields.  Any run-config field: "
                        "model, device, timing_only and every model field (batch, ipus, recompute, ...)")
    p.add_argument("-o", "--output", help="sweep folder (sweep.csv, profiles/, rows/); default: 'output' "
                                          "in the config, else sweep-<config name>")
    p.add_argument("--full-numerics", action="store_true",
                   help="compute values and check them (default: timing-only, same cycles and memory)")
    p.add_argument("--workers", type=positive_int,
                   help="worker processes of the local cluster (default: one per core, at most one per point; "
                        "more than the cores is capped to the cores)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run on this existing Dask cluster; the output folder must be shared by its workers")
    p.add_argument("--connect-timeout", type=arg_number(0.1, 3600.0), default=10.0, metavar="SECONDS",
                   help="how long to try reaching --scheduler (default 10 s)")
    p.add_argument("--isolate", choices=("process", "worker"), default=None,
                   help="process (the default where the workers allow it): each point runs in its own child "
                        "process of a Dask worker, so a crash fails that point alone, with its signal named; "
                        "worker: points run inside the worker processes (faster for tiny points; a crash "
                        "restarts the worker and the point is tried once more).  Without this option, a "
                        "--scheduler cluster whose workers may not start processes (stock 'dask worker') runs "
                        "points inside the workers, with a note saying how to start them for process isolation")
    p.add_argument("--point-timeout", type=arg_number(0.001, 1e7), metavar="SECONDS",
                   help="kill a point that runs longer and mark it failed (with --isolate process)")
    p.add_argument("--point-memory", type=arg_number(0.01, float(1 << 20)), metavar="GiB",
                   help="address-space cap of each point's process: a point that needs more fails with "
                        "MemoryError instead of pushing the machine into swap (with --isolate process)")
    p.add_argument("--no-resume", action="store_true", help="run every point again, even finished ones")
    p.add_argument("-y", "--yes", action="store_true", help="allow a grid of more than 10,000 points")


def plan(args):
    """(points, grid, base, out_dir, warnings) from the arguments; ConfigError for bad input."""
    from popvision_lite.emulator.run_config import unused_settings
    from popvision_lite.sweep import grid as g

    base = g.Base()
    output = None
    if args.sweep_config and args.config:
        raise ConfigError("give the sweep file CONFIG.toml or --config, not both")
    cfg_path = args.sweep_config or args.config
    grid: dict = {}
    if cfg_path:
        base, toml_grid, output = g.load_sweep_toml(cfg_path)
        if toml_grid:
            grid.update(g.check_grid(toml_grid, f"{cfg_path}: [grid]"))
    cli_grid = g.parse_grid_args(args.grid)
    if cli_grid:
        grid.update(g.check_grid(cli_grid, "argument --grid"))  # the command line wins for the same field
    where_grid = f"{cfg_path}: [grid]" if cfg_path and not cli_grid else "argument --grid"
    if args.model:
        base.model = g.check_value("model", args.model, "argument --model")
    if args.device:
        base.device = g.check_value("device", args.device, "argument --device")
    if args.full_numerics:
        base.timing_only = False
    if not grid:
        g.check_grid(grid, f"{cfg_path}: [grid] / argument --grid" if cfg_path else "argument --grid")
    n = g.count_points(grid)
    if n > g.MAX_POINTS and not args.yes:
        raise ConfigError(f"{where_grid}: the grid has {n:,} points (over {g.MAX_POINTS:,}); "
                          "narrow it, or pass --yes to run them all")
    if base.model is None and "model" not in grid:
        raise ConfigError("argument --model: required (or 'model' in the config file, or a 'model' grid)")
    points = g.expand(base, grid)
    warnings = []
    models = grid.get("model", [base.model])
    for k in grid:
        unused_by = [m for m in models if unused_settings(m, [k])]
        if unused_by and len(unused_by) == len(models):
            warnings.append(f"grid field '{k}' is ignored by model(s) {', '.join(unused_by)}: "
                            "its points emulate the same thing")
    out_dir = args.output or output
    if not out_dir:
        out_dir = f"sweep-{Path(cfg_path).stem}" if cfg_path else "sweep-" + "-".join(grid)
    out = Path(out_dir)
    if args.point_timeout is not None and not args.point_timeout > 0:
        raise ConfigError(f"argument --point-timeout: expected a positive number of seconds, got {args.point_timeout}")
    if args.point_memory is not None and not args.point_memory > 0:
        raise ConfigError(f"argument --point-memory: expected a positive number of GiB, got {args.point_memory}")
    if args.point_memory and args.isolate == "worker":
        raise ConfigError("argument --point-memory: needs --isolate process")
    if args.point_timeout and args.isolate == "worker":
        raise ConfigError("argument --point-timeout: needs --isolate process (a point inside a worker cannot be "
                          "stopped without stopping the worker)")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"argument -o/--output: {out} exists and is not a folder")
    if not out.parent.is_dir() and str(out.parent) not in ("", "."):
        raise ConfigError(f"argument -o/--output: {out}: folder '{out.parent}' does not exist")
    return points, grid, base, out, warnings


SCHEDULER_SCHEMES = ("tcp", "tls", "inproc")


def connect_checked(connect, address: str, timeout: float):
    """``connect(address, timeout)`` after checking what is there: a scheme Dask's scheduler speaks
    (tcp, tls, inproc), and for tcp a server that opens with Dask's handshake within ``timeout`` (a web
    server, or one that accepts and never answers, is refused here instead of hanging the sweep or being
    read as a 3 EiB message).  Any failure of the connection is a ConfigError naming the address."""
    scheme, sep, rest = address.partition("://")
    if not sep or scheme.lower() not in SCHEDULER_SCHEMES or not rest:
        raise ConfigError(f"argument --scheduler: {address[:80]!r} is not a scheduler address; expected "
                          f"{' / '.join(s + '://' for s in SCHEDULER_SCHEMES)}HOST:PORT, e.g. tcp://host:8786")
    if scheme.lower() == "tcp":
        _probe_dask(address, rest, timeout)
    try:
        return connect(address, timeout)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the peer sent, the user gets one line
        raise ConfigError(f"argument --scheduler: {address}: not a working Dask scheduler "
                          f"({type(e).__name__}: {str(e)[:200]})") from None


def _probe_dask(address: str, hostport: str, timeout: float) -> None:
    """A Dask scheduler writes its handshake as soon as a client connects: a message that starts with its
    length in 8 bytes (about 100).  Silence for ``timeout``, or a first 8 bytes that are not a small length
    (an HTTP or SSH banner), is not a Dask scheduler."""
    import socket
    import struct

    host, _, port = hostport.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port_n = int(port) if len(port) <= 5 else -1
    except ValueError:
        port_n = -1
    if not 0 < port_n < 65536:
        raise ConfigError(f"argument --scheduler: {address[:80]!r}: expected tcp://HOST:PORT with a port 1..65535")
    try:
        with socket.create_connection((host, port_n), timeout=timeout) as s:
            s.settimeout(timeout)
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
    except TimeoutError:
        raise ConfigError(f"argument --scheduler: {address}: no Dask scheduler answered within {timeout:g} s "
                          "(--connect-timeout)") from None
    except OSError as e:
        raise ConfigError(f"argument --scheduler: cannot reach the Dask scheduler at {address} "
                          f"({e.strerror or e})") from None
    if len(head) < 8 or not 0 < struct.unpack("<Q", head)[0] < 1 << 20:  # its handshake is ~100 bytes
        raise ConfigError(f"argument --scheduler: {address}: the server there does not speak Dask's protocol "
                          "(is it a web server or another service?)")


def run(args) -> int:
    from popvision_lite.sweep.engine import connect, dashboard_link, run_sweep
    from popvision_lite.sweep.progress_line import ProgressLine

    try:
        points, grid, base, out, warnings = plan(args)
        client = connect_checked(connect, args.scheduler, args.connect_timeout) if args.scheduler else None
    except ConfigError as e:
        print(terminal_text(f"{PROG}: error: {e}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl+C while connecting: nothing has run yet
        print(terminal_text(f"{PROG}: cancelled before any point ran"), file=sys.stderr)
        return 130
    for w in warnings:
        log.warning("%s", w)
    workers = args.workers
    cores = os.cpu_count() or 1
    if workers is not None and workers > cores:
        log.warning("--workers %d: this machine has %d cores; using %d", workers, cores, cores)
        workers = cores
    meta = {"grid": grid, "base": asdict(base), "points": len(points)}
    progress = ProgressLine(enabled=not args.quiet)
    if client is not None and not args.quiet and (link := dashboard_link(client)):
        print(terminal_text(f"{PROG}: Dask dashboard: {link}"), file=sys.stderr)
    try:
        o = run_sweep(points, out, grid_names=list(grid), meta=meta, workers=workers, client=client,
                      isolate=args.isolate or "auto", resume=not args.no_resume, progress=progress,
                      notify=lambda msg: log.warning("%s", msg.removeprefix("note: ")),
                      on_dashboard=None if args.quiet else (lambda link: print(f"{PROG}: Dask dashboard: {link}",
                                                                                  file=sys.stderr)),
                      point_timeout=args.point_timeout,
                      point_memory=int(args.point_memory * 2**30) if args.point_memory else None)
    except ConfigError as e:
        print(terminal_text(f"{PROG}: error: {e}"), file=sys.stderr)
        return 2
    finally:
        if client is not None:
            client.close()
    progress(o, len(points), final=True)
    print(terminal_text(f"results: {o.results_path} ({o.ok + o.resumed} ok" + (f" ({o.resumed} resumed)" if o.resumed else "")
          + f", {o.failed} failed"
          + (f", {o.not_run} not run" if o.not_run else "") + f"; {o.wall_seconds:.1f} s)"))
    if o.cancelled:
        print(terminal_text(f"{PROG}: cancelled; finished rows kept in {o.results_path}. Run the same command again to "
              "resume (finished points are skipped)."), file=sys.stderr)
        return 130
    for r in o.rows:
        if r.get("status") != "ok":
            print(terminal_text(f"  point {r.get('point')} failed: {r.get('error')}"), file=sys.stderr)
    return 1 if o.failed else 0
