"""``popvision-lite emulate MODEL ... -o run.pvl``: run a bundled workload on the emulator.

Exit codes: 0 ok, 2 bad arguments / config (message names the argument or field),
3 out of memory (the profile is still written), 1 unexpected error.
"""

from __future__ import annotations

import argparse
import logging
import sys

from popvision_lite.cli import emulate_onnx
from popvision_lite.cli.args import check_new_file, field_flag, field_switches, switch_value
from popvision_lite.cli.info import time_split_line, written_totals
from popvision_lite.emulator.ipu_config import POD_TYPES, read_ipu_config
from popvision_lite.emulator.models.config import MODEL_NAMES
from popvision_lite.emulator.progress import ProgressBar, within
from popvision_lite.emulator.run_config import (
    CLI,
    FIELDS,
    ONLY_FOR,
    RunConfig,
    check_field,
    load_run_config,
    model_family,
)
from popvision_lite.errors import ConfigError, EmulatorError, PopvisionError, ProfileError
from popvision_lite.profile.run_record import RunRecord
from popvision_lite.terminal import terminal_text

log = logging.getLogger(__name__)

# the argument groups of --help, by Field.group (the run and the workload's fields are the main options)
SECTIONS = {"lowering": "precision and memory", "scale": "training at scale (see docs/emulator.md 'Schedule model')"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The model, the output, every run-config field's flag, derived from its definition (``run_config.FIELDS``: the
    flag, its parse and check, help and bounds; a bool field's switches; :func:`add_run_flags`), then the options
    that are not run-config fields."""
    p.add_argument("model", nargs="?", choices=MODEL_NAMES, metavar="MODEL",
                   help=f"workload: {', '.join(MODEL_NAMES)} (or 'model' in --config)")
    p.add_argument("-o", "--output", help=FIELDS["output"].help)
    add_run_flags(p)
    emulate_onnx.add_arguments(p)  # --onnx, --dim, --inputs (ONNX models: cli/emulate_onnx.py)


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a bundled model's run config (every run-config field's flag, derived from its definition, then
    --config, --ipu-config and --pod-type): what ``emulate`` reads into a :class:`RunConfig` (:func:`from_args`),
    shared with ``fit``."""
    groups = {k: p.add_argument_group(title) for k, title in SECTIONS.items()}
    for name, f in FIELDS.items():
        if name in ("model", "output"):
            continue
        g = groups.get(f.group, p)
        if f.kind == "bool":
            field_switches(g, name)
        else:
            field_flag(g, name, f.help)
    p.add_argument("--config", help="TOML run config (command-line arguments override it)")
    p.add_argument("--ipu-config", metavar="FILE",
                   help="optimum-graphcore IPU config (ipu_config.json: layers_per_ipu, ipus_per_replica, "
                        "replication_factor, gradient_accumulation_steps, device_iterations, matmul_proportion, ...) "
                        "read as run-config fields over --config; flags override it (emulator/ipu_config.py)")
    p.add_argument("--pod-type", choices=POD_TYPES, default=None,
                   help="the POD type whose values an IPU config's per-POD tables give (default: their 'default')")


def end_of_run_text(s: dict, run, out_path: str, time_split: str) -> str:
    """The end-of-run text; ``time_split`` is :func:`cli.info.time_split_line` of the written profile (the
    split ``info`` prints, weighted over the whole step, not the stored timeline's few pipeline cycles)."""
    lines = []
    cfg = run.cfg
    lines.append(f"model {cfg.model} ({cfg.layers} layers, hidden {cfg.hidden}, batch {cfg.batch}"
                 + (f", seq {cfg.seq}, heads {cfg.heads}" if cfg.model in ("bert", "gpt") else "")
                 + f"), {cfg.precision}, {'training step' if cfg.training else 'inference'}"
                 + (", recompute" if cfg.recompute else "") + f", {cfg.ipus} IPU(s)")
    lines.append(f"fits: {'yes' if s['fits'] else 'NO - out of memory'}")
    lines.append(f"peak tile memory: {s['peak_bytes']:,} B on tile {s['peak_tile']} "
                 f"({100 * s['peak_bytes'] / s['capacity']:.0f}% of {s['capacity']:,} B)"
                 + (": " + ", ".join(f"{c} {b:,} B" for c, b in s.get("peak_categories", [])) if s.get("peak_categories")
                    else ""))
    if not s["fits"]:
        worst = ", ".join(f"tile {t} (IPU {i}) {b:,} B" for t, i, b, _cap in run.oom_report[:5])
        lines.append(f"over capacity: {len(run.oom_report)} tiles; worst: {worst}")
    lines.append(f"total cycles: {s['total_cycles']:,} = {s['seconds'] * 1e3:.3f} ms at {s['clock_hz'] / 1e9:.3f} GHz"
                 + ((" (one optimizer step)" if cfg.training else " (one inference step)")
                    if "layer_split" in run.schedule else ""))
    sch_ = run.schedule
    if getattr(run, "samples_per_second", 0):
        unit = "sequences" if cfg.model in ("bert", "gpt") else "samples"
        # a pack of seq tokens holds packing sequences on average
        tokens = (f", {run.samples_per_second * cfg.seq / getattr(cfg, 'packing', 1.0):,.0f} tokens/s"
                  if cfg.model in ("bert", "gpt") else "")
        lines.append(f"throughput: {run.samples_per_second:,.1f} samples/s ({unit}; whole system{tokens})")
        if sch_:
            from popvision_lite.analysis import error_band as eb
            from popvision_lite.analysis.run_totals import host_step_text

            band = eb.ipu_band(cfg.model, sch_.get("host_framework"), int(getattr(cfg, "ipus", 1) or 1))
            lines.append(f"  error band: {band.text()}")
            lines.append(f"  {host_step_text(sch_)}")
    if "layer_split" in sch_:  # (imported here: a run without a pipeline schedule never needs them)
        from popvision_lite.analysis.insights import placed_text
        from popvision_lite.analysis.summary import schedule_lines

        lines += schedule_lines(sch_, s["clock_hz"])
    terms = sch_.per_step_terms
    if any(terms.values()):
        lines.append(f"per-step host terms (seconds, not IPU cycles; framework {sch_.host_framework}): "
                     + ", ".join(f"{k.replace('_', ' ')} {v * 1e3:.1f} ms" for k, v in terms.items())
                     + f"; step {sch_.step_seconds * 1e3:.1f} ms, of which the IPUs "
                     f"{sch_.ipu_step_seconds * 1e3:.1f} ms")
    if "layer_split" in sch_:
        ts = RunRecord.build({"training_state": run.profile_data.run.get("training_state")}).training_state
        for t in ts:
            m = t.mib
            lines.append(f"  IPU {t.ipu}: {placed_text(t.layers)}, {t.params / 1e6:.1f} M params; weights "
                         f"{m.weights:.0f} MiB, grad accum {m.grad_accum:.0f}, optimizer state on-chip "
                         f"{m.optimizer_state_onchip:.0f} / off-chip {m.optimizer_state_offchip:.0f}, stash "
                         f"{m.stash:.0f}, code {m.code:.0f} MiB; fullest tile {t.max_tile_bytes.need:,} B"
                         + ("" if t.fits else " (OVER)"))
    lines.append(time_split)
    if run.numeric_checks:
        bad = [k for k, v in run.numeric_checks.items() if not v["passed"]]
        worst = max(run.numeric_checks.values(), key=lambda v: v["max_rel_err"])
        lines.append(f"numeric checks vs numpy reference: {len(run.numeric_checks) - len(bad)}/"
                     f"{len(run.numeric_checks)} passed (worst max rel err {worst['max_rel_err']:.2e})"
                     + (f"; FAILED: {', '.join(bad[:5])}" if bad else ""))
    lines.append(f"profile: {out_path}")
    return "\n".join(lines)


def oom_advice(path, data=None) -> str:
    """What binds a profile that does not fit (``analysis/fit_constraint.py``, cheap: from ``data``, the run's
    ProfileData still in memory, when given, else read back from ``path``) and the fit advisor's command that
    searches for a configuration that does (``popvision-lite fit``)."""
    from popvision_lite.analysis.fit_constraint import binding_headline

    try:
        if data is not None:  # what the file holds, not read back (its tables: millions of rows on 16 IPUs)
            why = binding_headline(data)
        else:  # (the reader imported only here: a run whose advice is from memory reads nothing back)
            from popvision_lite.profile.reader import open_profile

            with open_profile(path) as p:
                why = binding_headline(p)
    except PopvisionError as e:  # the file just written cannot be read back: the command still helps
        why = f"(what binds could not be read back: {e})"
    return f"why: {why}\nto find a configuration that fits: popvision-lite fit {path}"


def from_args(args) -> RunConfig:
    """The run config the command line gives: --config's file, then each flag over it (every value
    checked by its field's definition, messages naming the flag or the file and field)."""
    rc = load_run_config(args.config) if args.config else RunConfig()
    if args.model:
        rc.set("model", args.model, CLI)
    if getattr(args, "ipu_config", None):
        _apply_ipu_config(rc, args)
    for k, f in FIELDS.items():  # every text given for a flag, in order: each checked, the last wins
        if k in ("model", "output"):
            continue
        if f.kind == "bool":
            v = switch_value(args, k)
            if v is not None:
                rc.set(k, v, CLI)
            continue
        for text in getattr(args, k) or ():
            rc.set(k, text, CLI, text=True)
    return rc


def _apply_ipu_config(rc: RunConfig, args) -> None:
    """The settings of ``--ipu-config`` over the ``--config`` file's (the flags, applied next, override them);
    every key of the file that is not a setting is listed on stderr."""
    if rc.model is None:
        raise ConfigError("argument MODEL: required with --ipu-config (the IPU config says how a model runs, not "
                          "which)")
    head = rc.model_args.get("task_head", "pretraining")
    if getattr(args, "task_head", None):
        head = check_field("task_head", args.task_head[-1], CLI, text=True)
    read = read_ipu_config(args.ipu_config, task_head=head, model_family=model_family(rc.model),
                           pod_type=args.pod_type,
                           inference=switch_value(args, "training") is False)
    for name, value in read.settings.items():
        rc.set(name, value, f"{args.ipu_config} ('{read.origin[name]}')")
    for line in read.notes():
        print(f"popvision-lite emulate: note: {line}", file=sys.stderr)


def resolve(args) -> tuple:
    """(ModelConfig, device, output, timing_only) from the config file and the arguments."""
    rc = from_args(args)
    if rc.model is None:
        raise ConfigError("argument MODEL: required (or 'model' in the --config file)")
    out = args.output or rc.output
    if not out:
        raise ConfigError("argument -o/--output: required (or 'output' in the --config file)")
    check_new_file(out)
    for k, source in rc.unused():
        if source == CLI:
            opt = FIELDS[k].flag
            raise ConfigError(f"argument {opt}: model '{rc.model}' does not use it (only {' / '.join(ONLY_FOR[k])} "
                              f"models read {opt}); leave it out")
        log.warning("%s: field '%s' is ignored: model '%s' does not use it (only %s models read it)",
                    source, k, rc.model, " / ".join(ONLY_FOR[k]))
    cfg = rc.model_config()  # host memory (numeric runs) and largest array, before allocating
    return cfg, rc.device, out, rc.timing_only


def _until_written(progress):
    """The emulator's progress without its final "done": the command says done once the file is written."""
    return lambda stage, frac: None if stage == "done" else progress(stage, frac)


def run(args) -> int:
    if emulate_onnx.wants_onnx(args):
        return emulate_onnx.run_onnx(args)
    try:
        cfg, device, out, timing = resolve(args)
    except ConfigError as e:  # (refused before the emulator, numpy and pandas are imported)
        print(terminal_text(f"popvision-lite emulate: error: {e}"), file=sys.stderr)
        return 2
    from popvision_lite.emulator.models.emulated import WRITE_STARTS, run_model, write_run
    from popvision_lite.emulator.run_summary import end_of_run_numbers

    progress = ProgressBar(not args.quiet)
    try:  # the emulator returns the profile; this command writes it (also when it does not fit)
        result = run_model(cfg, device=device, timing_only=timing, progress=_until_written(progress))
        write_run(result, out, progress=within(progress, "writing profile", WRITE_STARTS, 1.0))
        progress("done", 1.0)
    except (ConfigError, EmulatorError) as e:
        print(terminal_text(f"popvision-lite emulate: error: {e}"), file=sys.stderr)
        return 2
    except ProfileError as e:  # the destination failed after all (disk full): exit 2 as export does
        print(terminal_text(f"popvision-lite emulate: error: {e}"), file=sys.stderr)
        return 2
    except MemoryError:  # past the estimates (other processes' memory, an address-space limit): no traceback
        from popvision_lite.emulator.models.host_memory import estimate

        field = estimate(cfg, timing).field
        print(terminal_text(f"popvision-lite emulate: error: argument --{field.replace('_', '-')} (or config field '{field}'): out "
              f"of host memory while emulating at these sizes; use smaller sizes"
              + ("" if timing else " (or --timing-only)")), file=sys.stderr)
        return 2
    except PopvisionError as e:
        print(terminal_text(f"popvision-lite emulate: error: {e}"), file=sys.stderr)
        return 1
    s = end_of_run_numbers(result.profile_data, result)
    try:  # from the run in memory, as end_of_run_numbers: what the file holds, not read back
        split = time_split_line(written_totals(result.profile_data), training=bool(cfg.training))
    except PopvisionError as e:  # (a run record the reader would refuse)
        print(terminal_text(f"popvision-lite emulate: error: {e}"), file=sys.stderr)
        return 2
    print(terminal_text(end_of_run_text(s, result, out, split)))
    if not result.fits:
        print(terminal_text(f"popvision-lite emulate: out of memory: {len(result.oom_report)} tile(s) over capacity; "
              f"profile written to {out}"), file=sys.stderr)
        print(terminal_text(oom_advice(out, result.profile_data)), file=sys.stderr)
        return 3
    if result.numeric_checks and not all(v["passed"] for v in result.numeric_checks.values()):
        print("popvision-lite emulate: numeric checks failed (see run['numeric_checks'])", file=sys.stderr)
        return 1
    return 0
