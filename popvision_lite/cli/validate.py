"""``popvision-lite validate [--data FOLDER] [--only TEXT] [--measured-only] [--list] [--write-doc]``: the
emulator against the measured MLPerf Training runs (the work is :mod:`popvision_lite.validation`).

Exit codes: 0 ok, 2 missing / unreadable validation data or no case matching ``--only``.
"""

from __future__ import annotations

import sys

from popvision_lite.errors import ConfigError
from popvision_lite.validation import (
    CSV_NAME,
    DOC_PATH,
    NOT_MODELLED,
    Case,
    build_cases,
    data_dir,
    fmt,
    format_table,
    load_rows,
    predict,
    render_section,
    write_doc,
)


def add_arguments(p) -> None:
    p.add_argument("--data", default=None, metavar="FOLDER",
                   help=f"folder with {CSV_NAME} (default: ../shared/validation beside the repository)")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="only cases whose id or label contains TEXT (case-insensitive; repeatable)")
    p.add_argument("--measured-only", action="store_true",
                   help="skip the configurations without a measurement (POD64, Bow, other micro-batch)")
    p.add_argument("--list", action="store_true", help="print the configurations, emulate nothing")
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
        cases = select(build_cases(load_rows(folder), untuned=not args.measured_only), args.only)
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
    results = []
    for c in cases:
        print(f"emulating {c.id} ({c.label}, {c.device}) ...", flush=True)
        r = predict(c)
        results.append(r)
        ratio = f", ratio {r.ratio:.3f}" if r.ratio is not None else ""
        state = r.error or (f"predicted {fmt(r.predicted_sps)} {c.sample_unit}/s{ratio}, "
                            f"{'fits' if r.fits else 'does not fit'}, {r.wall_s:.1f} s")
        print(f"  {state}", flush=True)
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
