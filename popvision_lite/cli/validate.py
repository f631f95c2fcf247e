"""``popvision-lite validate [--data FOLDER] [--only TEXT] [--with-predictions] [--no-heldout] [--list] [--write-doc]``: the
emulator against the measured MLPerf Training runs (the work is :mod:`popvision_lite.mlperf_validation`).

Exit codes: 0 ok, 2 missing / unreadable validation data or no case matching ``--only``.
"""

from __future__ import annotations

import sys

from popvision_lite import transformer_validation as tv
from popvision_lite.cli.args import positive_int
from popvision_lite.errors import ConfigError
from popvision_lite.mlperf_validation import (
    CSV_NAME,
    DOC_PATH,
    NOT_MODELLED,
    Case,
    build_cases,
    fmt,
    format_table,
    graph_groups,
    measured_rows,
    render_section,
    row_configs,
    run_cases,
    wall_text,
    write_doc,
)
from popvision_lite.terminal import terminal_text


def add_arguments(p) -> None:
    p.add_argument("--data", default=None, metavar="FOLDER",
                   help=f"folder with {CSV_NAME}, or a CSV file (default: the measured runs shipped in "
                        "resources/validation)")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="only cases whose id or label contains TEXT (case-insensitive; repeatable)")
    p.add_argument("--measured-only", action="store_true",
                   help="(the default) only measured runs; kept for old scripts")
    p.add_argument("--with-predictions", action="store_true",
                   help="also each tuning row's derived configurations without a measurement (POD64, Bow, "
                        "another micro-batch)")
    p.add_argument("--no-heldout", action="store_true",
                   help=f"only the rows of {CSV_NAME} (the IPU-POD16 runs the emulator is tuned on), not the "
                        "held-out measured runs (resources/validation/mlperf_training_heldout.csv)")
    p.add_argument("--no-transformers", action="store_true",
                   help="skip the measured transformer runs (resources/validation/transformer_training.csv: "
                        "optimum-graphcore fine-tuning, each from its own IPU config)")
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
    try:
        rows = measured_rows(args.data, held_out=not args.no_heldout)
        cases = select(build_cases(rows, untuned=args.with_predictions and not args.measured_only,
                                   overrides=row_configs()), args.only)
        llm = [] if args.no_transformers else select(tv.build_cases(tv.load_rows()), args.only)
    except ConfigError as e:
        print(terminal_text(f"popvision-lite validate: error: {e}"), file=sys.stderr)
        return 2
    if not cases and not llm:
        print(terminal_text(f"popvision-lite validate: error: no case matches --only {' '.join(args.only)}"),
              file=sys.stderr)
        return 2
    n_mlperf = len(cases)
    cases = cases + llm
    if args.list:
        for c in cases:
            print(terminal_text(f"{c.id}: {c.label} on {c.device}: {c.model} {c.config}"
                  + (f"; measured {c.measured_sps:,.1f} {c.sample_unit}/s" if c.measured_sps else "; not measured")))
        return 0
    print(terminal_text(f"emulating {len(cases)} rows in {len(graph_groups(cases))} replica graphs"
          + (f" on {args.jobs} worker processes" if args.jobs > 1 else "") + " ..."), flush=True)

    def report(c, r):
        ratio = f", ratio {r.ratio:.3f}" if r.ratio is not None else ""
        state = r.error or (f"predicted {fmt(r.predicted_sps)} {c.sample_unit}/s{ratio}, "
                            f"{'fits' if r.fits else 'does not fit'}, {wall_text(r)}")
        print(terminal_text(f"{c.id} ({c.label}, {c.device}): {state}"), flush=True)

    results = run_cases(cases, jobs=args.jobs, report=report)
    mlperf, transformers = results[:n_mlperf], results[n_mlperf:]
    if mlperf:
        print()
        print(terminal_text(format_table(mlperf)))
        print()
        print(terminal_text("Not modelled: " + "; ".join(NOT_MODELLED)))
    if transformers:
        print()
        print("Measured transformer runs (optimum-graphcore, each from its own IPU config):")
        print(terminal_text(format_table(transformers)))
    if args.write_doc:
        import datetime as _dt

        meta = f"Last run: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC."
        if mlperf:
            write_doc(render_section(mlperf, meta))
        if transformers:
            write_doc(tv.render_section(transformers, meta), begin=tv.BEGIN, end=tv.END)
        print(terminal_text(f"wrote the generated section(s) of {DOC_PATH}"))
    return 0
