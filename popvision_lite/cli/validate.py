"""``popvision-lite validate [--data FOLDER] [--only TEXT] [--with-predictions] [--no-heldout] [--no-gpu] [--list]
[--write-doc] [--write-residuals]``: the emulator against the measured MLPerf Training runs (the work is
:mod:`popvision_lite.mlperf_validation`), the GPU estimate against the measured GPU runs
(:mod:`popvision_lite.gpu_validation`), and the error bands both give (``resources/validation/residuals.csv``,
read by :mod:`popvision_lite.analysis.error_band`).

Exit codes: 0 ok, 2 missing / unreadable validation data or no case matching ``--only``.
"""

from __future__ import annotations

import sys
import time

from popvision_lite import gpu_validation as gv
from popvision_lite import transformer_validation as tv
from popvision_lite.cli.args import positive_int
from popvision_lite.emulator.progress import eta_text
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
    residual_rows,
    row_configs,
    run_cases,
    wall_text,
    write_doc,
)
from popvision_lite.terminal import terminal_text
from popvision_lite.units import format_seconds

GPU_DOC_PATH = DOC_PATH.parent / "gpu-estimate.md"


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
    p.add_argument("--no-gpu", action="store_true",
                   help="skip the measured GPU runs (resources/validation/mlperf_training_gpu.csv: the GPU estimate; "
                        "emulates BERT-Large, ResNet-50 and a GPT-3-175B shard once each, ~3 GB)")
    p.add_argument("--write-residuals", action="store_true",
                   help="rewrite resources/validation/residuals.csv (the error bands every surface shows) from this "
                        "run; needs every section (no --only, --no-heldout, --no-transformers, --no-gpu)")
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


def _print_list(cases, gpu_rows) -> None:
    """--list: each case and measured GPU run, without running them."""
    for c in cases:
        print(terminal_text(f"{c.id}: {c.label} on {c.device}: {c.model} {c.config}"
              + (f"; measured {c.measured_sps:,.1f} {c.sample_unit}/s" if c.measured_sps else "; not measured")
              + (f"; differs from its submission: {', '.join(c.differs)}" if c.differs else "")))
    for r in gpu_rows:
        print(terminal_text(f"{r.id}: {r.benchmark} on {r.n_gpus} x {r.gpu} (TP {r.tp} x PP {r.pp} x DP {r.dp}, "
                            f"micro-batch {r.micro_batch}, GBS {r.gbs}, {r.precision}); measured "
                            f"{r.measured:,.1f} samples/s ({r.kind})"))


def _print_results(mlperf, transformers, pairs, gpu) -> None:
    """The tables of the MLPerf rows, the transformer runs (and their same-configuration pairs) and the GPU runs."""
    if mlperf:
        print()
        print(terminal_text(format_table(mlperf)))
        print()
        print(terminal_text("Not modelled: " + "; ".join(NOT_MODELLED)))
    if transformers:
        print()
        print("Measured transformer runs (optimum-graphcore, each from its own IPU config):")
        print(terminal_text(format_table(transformers)))
        if pairs:
            print("Same-configuration pairs (train_runtime = the time paid once + steps x the step time):")
            for line in tv.pair_lines(pairs, transformers):
                print(terminal_text(line))
    if gpu:
        print()
        print("Measured GPU runs (the GPU estimate, each with its own placement and precision):")
        print(terminal_text(gv.format_gpu_table(gpu)))


def _write_docs(mlperf, transformers, pairs, gpu) -> None:
    """--write-doc: the generated sections of the fidelity docs rewritten from these results."""
    import datetime as _dt

    meta = f"Last run: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC."
    if mlperf:
        write_doc(render_section(mlperf, meta))
    if transformers:
        write_doc(tv.render_section(transformers, meta, pairs), begin=tv.BEGIN, end=tv.END)
    if gpu:
        write_doc(gv.render_section(gpu, meta), path=GPU_DOC_PATH, begin=gv.BEGIN, end=gv.END)
    print(terminal_text(f"wrote the generated section(s) of {DOC_PATH}"))


def run(args) -> int:
    try:
        rows = measured_rows(args.data, held_out=not args.no_heldout)
        cases = select(build_cases(rows, untuned=args.with_predictions and not args.measured_only,
                                   overrides=row_configs()), args.only)
        llm_rows = [] if args.no_transformers else tv.load_rows()
        llm = select(tv.build_cases(llm_rows), args.only)
        llm_ids = {c.id for c in llm}
        pairs = [p for p in tv.runtime_pairs(llm_rows) if set(p["ids"]) <= llm_ids]
        gpu_rows = [] if args.no_gpu else [r for r in gv.load_gpu_rows()
                                           if not args.only or any(o.lower() in r.id.lower() for o in args.only)]
    except ConfigError as e:
        print(terminal_text(f"popvision-lite validate: error: {e}"), file=sys.stderr)
        return 2
    whole = not (args.only or args.no_heldout or args.no_transformers or args.no_gpu or args.data)
    if (args.write_residuals or args.write_doc) and not whole:
        print(terminal_text("popvision-lite validate: error: --write-residuals / --write-doc rewrite the committed "
                            "results from every measured run: drop --only, --no-heldout, --no-transformers, "
                            "--no-gpu and --data"), file=sys.stderr)
        return 2
    if not cases and not llm and not gpu_rows:
        print(terminal_text(f"popvision-lite validate: error: no case matches --only {' '.join(args.only)}"),
              file=sys.stderr)
        return 2
    n_mlperf = len(cases)
    cases = cases + llm
    if args.list:
        _print_list(cases, gpu_rows)
        return 0
    print(terminal_text(f"emulating {len(cases)} rows in {len(graph_groups(cases))} replica graphs"
          + (f" on {args.jobs} worker processes" if args.jobs > 1 else "") + " ..."), flush=True)

    from popvision_lite.analysis import error_band as eb

    t0 = time.perf_counter()
    finished = []

    def report(c, r):
        finished.append(c.id)
        ratio = f", ratio {r.ratio:.3f}" if r.ratio is not None else ""
        fw = (r.extra.get("schedule") or {}).get("host_framework") or c.config.get("host_framework")
        band = eb.ipu_band(c.model, fw, int(c.config.get("ipus", c.replicas) or 1)).text()
        state = r.error or (f"predicted {fmt(r.predicted_sps)} {c.sample_unit}/s ({band}){ratio}, "
                            f"{'fits' if r.fits else 'does not fit'}, {wall_text(r)}")
        # the share of the rows done and, from the time they took, when the rest will be (emulator/progress.py)
        elapsed = time.perf_counter() - t0
        eta = eta_text(elapsed, len(finished) / len(cases))
        print(terminal_text(f"[{len(finished)}/{len(cases)}] {c.id} ({c.label}, {c.device}): {state} "
                            f"({format_seconds(elapsed)} so far{', ' + eta if eta else ''})"), flush=True)

    results = run_cases(cases, jobs=args.jobs, report=report) if cases else []
    mlperf, transformers = results[:n_mlperf], results[n_mlperf:]
    gpu = []
    if gpu_rows:
        print(terminal_text(f"predicting {len(gpu_rows)} measured GPU runs (one emulation per benchmark) ..."),
              flush=True)

        def report_gpu(row, r):
            band = eb.band("gpu", gv.MODEL[row.benchmark], None, row.n_gpus).text()
            state = r.error or (f"predicted {r.predicted:,.1f} samples/s ({band}), ratio {r.ratio:.3f}, "
                                f"{r.placement}")
            print(terminal_text(f"{row.id} ({row.benchmark}, {row.n_gpus} x {row.gpu}): {state}"), flush=True)

        gpu = gv.run_gpu_rows(gpu_rows, report=report_gpu)
    _print_results(mlperf, transformers, pairs, gpu)
    residuals = residual_rows(mlperf + transformers) + gv.residual_rows(gpu)
    if residuals:
        print()
        print("Error bands (measured / leave-one-out prediction - 1, per family; analysis/error_band.py):")
        print(terminal_text(eb.format_families(eb.rows_from_dicts(residuals))))
    if args.write_residuals or args.write_doc:
        path = eb.write_table(residuals)
        print(terminal_text(f"wrote {len(residuals)} residual rows to {path}"))
    if args.write_doc:
        _write_docs(mlperf, transformers, pairs, gpu)
    return 0
