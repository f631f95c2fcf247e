"""``popvision-lite export RUN.pvl --view VIEW [--compare OTHER.pvl] -o OUT.png|.svg|.csv``, headless.

Also ``--chrome-trace -o OUT.json [--steps A:B] [--tiles 0-15,100]`` for the Chrome trace (``OUT.json.gz``:
gzip-compressed, as Perfetto opens it).  ``-o -`` writes to stdout (``--format`` names what; a Chrome trace is
JSON unless ``--format json.gz``), the "wrote ..." line then going to stderr.

Plots are drawn by the same view classes as the window (offscreen when there is no display);
this module itself does not import Qt: ``popvision_lite.gui.headless`` is imported inside ``run``.

Exit codes: 0 ok, 2 bad arguments or an unreadable / invalid input file, 1 unexpected error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from popvision_lite.cli.args import check_destination
from popvision_lite.errors import ConfigError, PopvisionError
from popvision_lite.ranges import check_tiles_syntax, parse_steps, parse_tiles
from popvision_lite.terminal import terminal_text
from popvision_lite.value_checks import check_number

VIEWS = ("memory", "execution", "roofline", "liveness", "summary", "ops", "steps", "verdict")
COMPARE_VIEWS = ("memory", "liveness", "summary", "ops", "steps", "execution", "roofline")
SUFFIXES = (".png", ".svg", ".csv", ".json", ".json.gz")
STDOUT = "-"
# what each view can be written as: plots as PNG or SVG, table views (ops) and panels (verdict) as a PNG picture;
# every view's table as CSV.  ``steps`` is the step table (CSV) and the per-step chart (PNG / SVG); ``execution``
# the timeline (PNG / SVG) and its lanes as drawn (CSV: IPU, kind, op name, start and end in seconds).
FORMATS = {"memory": ("png", "svg", "csv"), "execution": ("png", "svg", "csv"), "roofline": ("png", "svg", "csv"),
           "liveness": ("png", "svg", "csv"), "summary": ("png", "svg", "csv"), "ops": ("png", "csv"),
           "steps": ("png", "svg", "csv"), "verdict": ("png", "csv")}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", help="profile file (.pvl)")
    p.add_argument("--view", choices=VIEWS, help="view to export: " + "; ".join(
        f"{v} ({'/'.join(FORMATS[v])})" for v in VIEWS))
    p.add_argument("--compare", metavar="OTHER", help="compare with this profile (B); the first is A")
    p.add_argument("-o", "--output", required=True,
                   help="output file: .png or .svg (plot), .csv (the view's table), .json or .json.gz (Chrome "
                        "trace); - for stdout (with --format)")
    p.add_argument("--format", choices=[s[1:] for s in SUFFIXES],
                   help="what to write to -o - (stdout): png, svg, csv, json or json.gz (default for --chrome-trace: "
                        "json); with a file name, the name's suffix says it")
    p.add_argument("--width", type=int, help="PNG width in pixels, 16 .. 16384 (default 1400)")
    p.add_argument("--height", type=int, help="PNG height in pixels, 16 .. 16384 (default 900)")
    p.add_argument("--dpi", type=float, default=96.0,
                   help="resolution stored in the PNG, 1 .. 9600 (default 96)")
    p.add_argument("--difference", action="store_true", help="with --compare --view memory: the B - A map")
    p.add_argument("--chrome-trace", action="store_true", help="write the Chrome trace JSON (Perfetto)")
    p.add_argument("--steps", help="with --chrome-trace: step window START:STOP (STOP exclusive)")
    p.add_argument("--tiles", help="with --chrome-trace: one lane per tile of this subset, e.g. 0-15,100")
    p.add_argument("--torch-trace", metavar="TRACE.json",
                   help="with --view roofline: plot the GPU kernels of this PyTorch profiler trace as measured points")


def _err(msg: str) -> int:
    print(terminal_text(f"popvision-lite export: error: {msg}"), file=sys.stderr)
    return 2


def _suffix(name: str) -> str:
    low = name.lower()
    return ".json.gz" if low.endswith(".json.gz") else Path(low).suffix


def check_args(args) -> str:
    """Validate the combination of arguments; returns the output kind (png/svg/csv/json/json.gz)."""
    fmt = getattr(args, "format", None)
    to_stdout = args.output == STDOUT
    if to_stdout:
        if fmt is None and not args.chrome_trace:
            raise ConfigError("-o -: stdout has no file name to tell the format; give --format png, svg, csv, json "
                              "or json.gz")
        suffix = "." + (fmt or "json")
    else:
        suffix = _suffix(args.output)
        if fmt is not None and "." + fmt != suffix:
            raise ConfigError(f"--format {fmt} does not match -o {args.output}; give -o a .{fmt} name (or -o -)")
    out = Path(args.output)
    if suffix not in SUFFIXES:
        raise ConfigError(f"-o {args.output}: unknown file type '{suffix or '(none)'}'; use .png, .svg, .csv, .json "
                          "or .json.gz")
    if not Path(args.profile).exists():
        raise ConfigError(f"{args.profile}: no such profile file")
    if args.compare and not Path(args.compare).exists():
        raise ConfigError(f"--compare {args.compare}: no such profile file")
    folder = out.parent if str(out.parent) else Path(".")
    if not to_stdout and not folder.is_dir():
        raise ConfigError(f"-o {args.output}: folder '{folder}' does not exist")
    if args.chrome_trace or suffix in (".json", ".json.gz"):
        if suffix not in (".json", ".json.gz"):
            raise ConfigError(f"--chrome-trace writes JSON; give -o with a .json or .json.gz name, not {args.output}")
        if args.compare:
            raise ConfigError("--chrome-trace exports one profile; drop --compare")
        if args.tiles:  # syntax and size now, ids against the profile's tiles once it is open
            check_tiles_syntax(args.tiles)
        parse_steps(args.steps)
        if not to_stdout:
            check_destination(args.output)
        return suffix[1:]
    if args.steps or args.tiles:
        raise ConfigError("--steps and --tiles apply to --chrome-trace only")
    if getattr(args, "torch_trace", None):
        if args.view != "roofline" or args.compare:
            raise ConfigError("--torch-trace applies to --view roofline of one profile only")
        if not Path(args.torch_trace).exists():
            raise ConfigError(f"--torch-trace {args.torch_trace}: no such file")
    if not args.view:
        raise ConfigError("--view is required (memory, execution, roofline, liveness, summary, ops, steps)")
    if not args.compare and suffix[1:] not in FORMATS[args.view]:
        raise ConfigError(f"--view {args.view} exports as {', '.join('.' + f for f in FORMATS[args.view])}, "
                          f"not {suffix}")
    if args.compare and args.view not in COMPARE_VIEWS:
        raise ConfigError(f"--view {args.view} has no compare mode; with --compare use one of "
                          f"{', '.join(COMPARE_VIEWS)}")
    if args.difference and not (args.compare and args.view == "memory"):
        raise ConfigError("--difference needs --compare and --view memory")
    for name in ("width", "height"):
        v = getattr(args, name)
        if v is not None and not (16 <= v <= 16384):
            raise ConfigError(f"--{name} {v}: choose 16 .. 16384 pixels")
    check_number("--dpi", args.dpi, 1, 9600)  # finite: nan / inf / 1e300 would pass a plain 'dpi > 0' or overflow
    if not to_stdout:
        check_destination(args.output)
    return suffix[1:]


def run(args) -> int:
    try:
        kind = check_args(args)
    except ConfigError as e:
        return _err(str(e))
    if args.output != STDOUT:
        try:
            info = _export(args, kind, args.output)
        except PopvisionError as e:
            return _err(str(e))
        print(terminal_text(f"wrote {args.output} {info}"))
        return 0
    # stdout: the export is written whole to a private temp file (every writer is atomic by path), then copied
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="popvision-export-") as tmp:
        path = str(Path(tmp) / f"export.{kind}")
        try:
            info = _export(args, kind, path)
        except PopvisionError as e:
            return _err(str(e).replace(path, "stdout"))
        with open(path, "rb") as fh:
            shutil.copyfileobj(fh, sys.stdout.buffer)
        sys.stdout.flush()
    print(terminal_text(f"popvision-lite export: wrote {kind} to stdout {info}"), file=sys.stderr)
    return 0


def _export(args, kind: str, path: str) -> str:
    """Write the export to ``path``; returns what was written, for the "wrote" line."""
    if kind in ("json", "json.gz"):
        return _chrome_trace(args, path)
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from popvision_lite.gui.headless import export_view

    info = export_view(args.profile, args.view, path, compare=args.compare, width=args.width,
                       height=args.height, dpi=args.dpi, difference=args.difference,
                       torch_trace=getattr(args, "torch_trace", None))
    return f"({info})"


def _chrome_trace(args, path: str) -> str:
    from popvision_lite.profile.chrome_trace import export_chrome_trace
    from popvision_lite.profile.reader import open_profile

    steps = parse_steps(args.steps)
    with open_profile(args.profile) as p:
        tiles = parse_tiles(args.tiles, p.target.num_tiles)
        counts = export_chrome_trace(p, path, step_range=steps, tiles=tiles)
    return f"({counts['events']:,} events, {counts['steps']:,} steps, {counts['lanes']} lanes)"
