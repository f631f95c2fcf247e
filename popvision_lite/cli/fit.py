"""``popvision-lite fit``: when a model does not fit in tile memory, find the cheapest configuration that does
(docs/fit-advisor.md).

    popvision-lite fit gpt3-13b --optimizer adam --grad-accum 128       # the model flags of emulate
    popvision-lite fit --config run.toml --max-ipus 64                  # a run config
    popvision-lite fit run.pvl                                          # a profile that does not fit

The search runs as sweep points on Dask (a local cluster by default) into a folder (-o; resumable): every
emulated candidate's profile and row, ``sweep.csv``, the report ``fit.txt``, ``fit.json`` and ``best.toml``, the
run config of the answer (``popvision-lite emulate --config DIR/best.toml -o best.pvl`` runs it).

Exit codes: 0 a configuration that fits was found (or the run fits as given), 3 nothing fits up to --max-ipus
(the report says what binds), 2 bad input, 130 cancelled (Ctrl+C; run the same command again to resume).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from popvision_lite.cli.args import positive_int
from popvision_lite.errors import ConfigError, PopvisionError
from popvision_lite.terminal import terminal_text

PROG = "popvision-lite fit"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from popvision_lite.cli.emulate import add_run_flags
    from popvision_lite.sweep.fit import DEFAULT_BUDGET, DEFAULT_MAX_IPUS, DEFAULT_OPTIONS

    p.add_argument("target", nargs="?", metavar="MODEL|PROFILE.pvl",
                   help="a bundled workload (with the same flags as 'emulate', or 'model' in --config), or a profile "
                        "of a run that does not fit")
    g = p.add_argument_group("search")
    g.add_argument("--max-ipus", type=positive_int, default=DEFAULT_MAX_IPUS, metavar="N",
                   help=f"the largest system searched (default {DEFAULT_MAX_IPUS}, an IPU-POD256)")
    g.add_argument("--global-batch", type=positive_int, metavar="N",
                   help="samples per optimizer step, kept by every placement (default: the run's replicas x "
                        "gradient accumulation x micro-batch)")
    g.add_argument("--budget", type=positive_int, default=DEFAULT_BUDGET, metavar="N",
                   help=f"emulations at most (default {DEFAULT_BUDGET})")
    g.add_argument("--options", type=positive_int, default=DEFAULT_OPTIONS, metavar="N",
                   help=f"configurations reported: the cheapest and the next ones (default {DEFAULT_OPTIONS})")
    g.add_argument("-o", "--output", help="the search folder (default fit-<model or profile name>); a search "
                                          "repeated into it resumes")
    g.add_argument("--workers", type=positive_int, metavar="N", help="worker processes of the local Dask cluster (default: one "
                                                        "per core)")
    g.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on this existing Dask cluster (the folder "
                                                                   "must be shared by its workers)")
    g.add_argument("--isolate", choices=("worker", "process"), default="worker",
                   help="worker (default): candidates run inside the Dask workers, which keep the last run's stage "
                        "graphs for the next candidate that differs only in replicas, accumulation or optimizer "
                        "state; process: each in its own process (a crash fails that candidate alone)")
    g.add_argument("--json", action="store_true", help="print the advice as JSON (fit.json) instead of text")
    add_run_flags(p)


def _is_profile(target: str | None) -> bool:
    return bool(target) and (target.endswith(".pvl") or Path(target).is_file())


def base_of(args):
    """(what to search from: a RunConfig or a profile path, the default folder name)."""
    from popvision_lite.cli.emulate import from_args
    from popvision_lite.emulator.run_config import CLI, FIELDS

    if _is_profile(args.target):
        # every run-config field's flag given (a bool field's switches: the one given first)
        given = [(v[0][0] if isinstance(v, tuple) and v and isinstance(v[0], tuple) else FIELDS[k].flag)
                 for k in FIELDS if k not in ("model", "output") and (v := getattr(args, k, None))]
        if args.config or given:
            raise ConfigError(f"argument {args.config and '--config' or given[0]}: give a profile or a model with "
                              "its flags, not both")
        if not Path(args.target).is_file():
            raise ConfigError(f"argument PROFILE: {args.target}: no such file")
        return args.target, f"fit-{Path(args.target).stem}"
    args.model = None
    rc = from_args(args)
    if args.target:
        rc.set("model", args.target, CLI)
    if rc.model is None:
        raise ConfigError("argument MODEL|PROFILE.pvl: required (a bundled model, 'model' in --config, or a profile)")
    for k, source in rc.unused():
        if source == CLI:
            raise ConfigError(f"argument {FIELDS[k].flag}: model '{rc.model}' does not use it; leave it out")
    rc.model_config()  # checked as emulate checks it, before any cluster starts
    return rc, f"fit-{rc.model}"


def run(args) -> int:
    from popvision_lite.sweep.fit import fit_advice

    try:
        base, default_out = base_of(args)
    except ConfigError as e:
        print(terminal_text(f"{PROG}: error: {e}"), file=sys.stderr)
        return 2
    except PopvisionError as e:
        print(terminal_text(f"{PROG}: error: {e}"), file=sys.stderr)
        return 2
    out = Path(args.output or default_out)
    progress = _Progress(enabled=not args.quiet)
    try:
        adv = fit_advice(base, max_ipus=args.max_ipus, global_batch=args.global_batch, options=args.options,
                         budget=args.budget, out=out, workers=args.workers, scheduler=args.scheduler,
                         isolate=args.isolate, progress=progress)
    except (ConfigError, PopvisionError) as e:
        progress.end()
        print(terminal_text(f"{PROG}: error: {e}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        progress.end()
        print(terminal_text(f"{PROG}: cancelled; finished candidates are kept in {out}: run the same command to "
                            "resume"), file=sys.stderr)
        return 130
    progress.end()
    if args.json:
        from popvision_lite.sweep.fit_result import SUMMARY

        print(json.dumps(json.loads((out / SUMMARY).read_text(encoding="utf-8")), indent=1))
    else:
        print(terminal_text(adv.text()))
    if adv.cancelled:
        print(terminal_text(f"{PROG}: cancelled; finished candidates are kept in {out}: run the same command to "
                            "resume"), file=sys.stderr)
        return 130
    return 0 if (adv.fits or adv.base_fits) else 3


class _Progress:
    """``fit: 0.42  12 of ~28 emulations (...), about 3 min left`` on stderr (\\r on a terminal)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self._shown = False

    def __call__(self, fraction: float, text: str) -> None:
        if not self.enabled:
            return
        line = terminal_text(f"fit: {100 * fraction:3.0f}%  {text}")
        if self.tty:
            sys.stderr.write("\r" + line[:110].ljust(110))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self._shown = True

    def end(self) -> None:
        if self.enabled and self.tty and self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
