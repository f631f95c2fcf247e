"""``popvision-lite validate [--data FOLDER] [--only TEXT] [--with-predictions] [--no-heldout] [--list] [--write-doc]``: the
emulator against the measured MLPerf Training runs (the work is :mod:`popvision_lite.mlperf_validation`).

Exit codes: 0 ok, 2 missing / unreadable validation data or no case matching ``--only``.
"""

from __future__ import annotations

import sys
import time

from popvision_lite.cli.args import positive_int
from popvision_lite.emulator.progress import eta_text
from popvision_lite.errors import ConfigError
from popvision_lite.mlperf_validation import (
    CSV_NAME,
    DOC_PATH,
    NOT_MODELLED,
    Case,
    build_cases,
    data_dir,
    fmt,
    format_table,
    graph_groups,
    load_heldout_rows,
    load_rows,
    render_section,
    row_configs,
    run_cases,
    wall_text,
    write_doc,
)
from popvision_lite.units import format_seconds


def add_arguments(p) -> None:
    p.add_argument("--data", default=None, metavar="FOLDER",
                   help=f"folder with {CSV_NAME} (default: ../shared/validation beside the repository)")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="only cases whose id or label contains TEXT (case-insensitive; repeatable)")
    p.add_argument("--measured-only", action="store_true",
                   help="(the default) only measured runs; kept for old scripts")
    p.add_argument("--with-predictions", action="store_true",
                   help="also each tuning row's derived configurations without a measurement (POD64, Bow, "
                        "another micro-batch)")
    p.add_argument("--no-heldout", action="store_true",
                   help="only the rows of ../shared/validation, not the held-out measured runs "
                        "(resources/validation/mlperf_training_heldout.csv)")
    p.add_argument("--list", action="store_true", help="print the configurations, emulate nothing")
    p.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                   help="worker processes (rows sharing a replica graph stay in one; default 1)")
    p.add_argument("--write-doc", action="store_true",
                   help="replace the generated section of docs/emulator-fidelity.md with the results")


def select(cases: list[Case], only: list[str]) -> list[Case]:
    if not only:
        return cases
    keys = [o.lower() for o in only]
    return [c for c in cases if any(k in c.id.lower() or k in c.label.lower() for k in keys)]


def run(args) -> int:
    folder = data_dir(args.data)
    try:
        rows = load_rows(folder) + ([] if args.no_heldout else load_heldout_rows())
        cases = select(build_cases(rows, untuned=args.with_predictions and not args.measured_only,
                                   overrides=row_configs()), args.only)
    except ConfigError as e:
        print(f"popvision-lite validate: error: {e}", file=sys.stderr)
        return 2
    if not cases:
        print(f"popvision-lite validate: error: no case matches --only {' '.join(args.only)}", file=sys.stderr)
        return 2
    if args.list:
        for c in cases:
            print(f"{c.id}: {c.label} on {c.device}: {c.model} {c.config}"
                  + (f"; measured {c.measured_sps:,.1f} {c.sample_unit}/s" if c.measured_sps else "; not measured"))
        return 0
    print(f"emulating {len(cases)} rows in {len(graph_groups(cases))} replica graphs"
          + (f" on {args.jobs} worker processes" if args.jobs > 1 else "") + " ...", flush=True)

    t0 = time.perf_counter()
    finished = []

    def report(c, r):
        finished.append(c.id)
        ratio = f", ratio {r.ratio:.3f}" if r.ratio is not None else ""
        state = r.error or (f"predicted {fmt(r.predicted_sps)} {c.sample_unit}/s{ratio}, "
                            f"{'fits' if r.fits else 'does not fit'}, {wall_text(r)}")
        # the share of the rows done and, from the time they took, when the rest will be (emulator/progress.py)
        elapsed = time.perf_counter() - t0
        eta = eta_text(elapsed, len(finished) / len(cases))
        print(f"[{len(finished)}/{len(cases)}] {c.id} ({c.label}, {c.device}): {state} "
              f"({format_seconds(elapsed)} so far{', ' + eta if eta else ''})", flush=True)

    results = run_cases(cases, jobs=args.jobs, report=report)
    print()
    print(format_table(results))
    print()
    print("Not modelled: " + "; ".join(NOT_MODELLED))
    if args.write_doc:
        import datetime as _dt

        meta = f"Last run: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC."
        write_doc(render_section(results, meta))
        print(f"wrote the generated section of {DOC_PATH}")
    return 0
