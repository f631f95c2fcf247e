"""Validation report: the emulator against every measured MLPerf run (issue 14), with each prediction's step
broken into the terms of the schedule.

    python -m bench.validate                   # the 19 measured rows; updates docs/emulator-fidelity.md
    python -m bench.validate --only pod64      # rows whose id or label contains the text; doc untouched
    python -m bench.validate --no-doc
    python -m bench.validate --jobs 1          # one process (the emulation itself is single-threaded)

Same code as ``popvision-lite validate`` (``popvision_lite/mlperf_validation.py``): the tuning rows and the
held-out rows of ``resources/validation`` (``--data`` for another tuning CSV), each with its submission's config.
Prints one ``BENCH-RESULT`` JSON line per row and a table of the step's terms: steady-state micro-batches,
pipeline fill / drain, optimizer, gradient all-reduce, DDR streams, host step loop and exposed host input
(shares of the optimizer step); the decomposition of pairs of measured rows (step = G x t + f); and the
calibrated host step constants with the pairs they are fitted on and leave-one-out on the others
(``mlperf_calibration.CALIBRATION_PAIRS``, ``MULTI_HOST_PAIR``).  To refit: run the calibration rows and copy the fitted values into
resources/devices/ipu-*.toml.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys

from popvision_lite import mlperf_validation as V
from popvision_lite.errors import ConfigError


def results_from_log(path: str, cases: list) -> list:
    """The Results of an earlier run, from its BENCH-RESULT lines (the cases are rebuilt from the CSVs; a
    case without a line is an error)."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("BENCH-RESULT "):
                d = json.loads(line[len("BENCH-RESULT "):])
                rows[d["name"].split("/", 1)[1]] = d
    out = []
    for c in cases:
        d = rows[c.id]
        out.append(V.Result(c, predicted_sps=d["predicted_sps"], fits=d["fits"], wall_s=d["emulation_wall_s"],
                            basis=d["basis"], cycles=d["cycles"], error=d["error"], extra=d.get("extra") or {}))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.validate", description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", default=[], help="rows whose id or label contains this text")
    p.add_argument("--data", default=None, help="folder with mlperf_training.csv, or a CSV file (default: "
                   "resources/validation of this repository)")
    p.add_argument("--no-doc", action="store_true", help="do not update docs/emulator-fidelity.md")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2: this machine's cores)")
    p.add_argument("--render-from", metavar="LOG", help="emulate nothing: rebuild the results from the BENCH-RESULT "
                   "lines of an earlier run's output and print / write the report (after a change to the report)")
    args = p.parse_args(argv)
    try:
        rows = V.measured_rows(args.data)
        cases = V.build_cases(rows, overrides=V.row_configs())
    except ConfigError as e:
        print(f"bench.validate: error: {e}", file=sys.stderr)
        return 2
    if args.only:
        keys = [o.lower() for o in args.only]
        cases = [c for c in cases if any(k in c.id.lower() or k in c.label.lower() for k in keys)]
    print(f"{len(cases)} rows in {len(V.graph_groups(cases))} replica graphs, {args.jobs} worker process(es)",
          flush=True)

    def report(c, r):
        print(f"{c.id}: {c.label} on {c.device}: ratio {r.ratio if r.ratio is None else round(r.ratio, 3)}, "
              f"{V.wall_text(r)}", flush=True)
        print("BENCH-RESULT " + json.dumps(dict(
            name=f"validate/{c.id}", measured_sps=c.measured_sps, predicted_sps=r.predicted_sps, ratio=r.ratio,
            fits=r.fits, cycles=r.cycles, emulation_wall_s=round(r.wall_s, 2), basis=r.basis, error=r.error,
            breakdown=V.step_breakdown(r), extra=r.extra)), flush=True)

    if args.render_from:
        try:
            ordered = results_from_log(args.render_from, cases)
        except (OSError, ValueError, KeyError) as e:
            print(f"bench.validate: error: {args.render_from}: {e}", file=sys.stderr)
            return 2
    else:
        ordered = V.run_cases(cases, jobs=args.jobs, report=report)
    print()
    print(V.format_table(ordered))
    print()
    print("| row | ratio | GA | stages | steady micro-batches | fill / drain | optimizer | all-reduce | streams | "
          "host step | host input |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in ordered:
        b = V.step_breakdown(r)
        s = r.extra.get("schedule", {})
        if b is None:
            continue
        print(f"| {r.case.id} | {r.ratio:.3f} | {s.get('grad_accum')} | {s.get('stages')} | "
              + " | ".join(f"{100 * b.get(k, 0.0):.1f} %" for k in ("steady", "fill_drain", "optimizer", "allreduce", "stream",
                                                                 "host_step", "host_input"))
              + " |")
    pairs = V.measured_pairs(ordered)
    if pairs:
        print()
        print(V.format_decomposition(pairs))
        fit = V.fit_host_step(pairs)
        if fit:
            print()
            print(V.format_calibration(fit))
        multi = V.fit_multi_host(pairs)
        if multi["pairs"]:
            print()
            print(V.format_multi_host(multi))
    if not args.only and not args.no_doc:
        meta = f"Last run: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC (`python -m bench validate`)."
        if args.render_from:
            meta = f"Rendered {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC from the results of an earlier run " \
                   "(`python -m bench.validate --render-from LOG`)."
        V.write_doc(V.render_section(ordered, meta))
        print(f"\nwrote the generated section of {V.DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
