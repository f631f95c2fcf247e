"""``popvision-lite emulate --onnx model.onnx [options] -o run.pvl`` (and ``onnx = "path"`` in a TOML
run config): the ONNX branch of ``emulate``.  Exit codes as ``emulate``: 0 ok, 2 bad input (message
names the file / node / dim / option), 3 out of memory (profile written), 1 numerics check failed."""

from __future__ import annotations

import sys
from pathlib import Path

from popvision_lite.cli.args import check_new_file, field_value, switch_value
from popvision_lite.cli.info import profile_totals, time_split_line
from popvision_lite.emulator.onnx_import.config import (
    NOT_FOR_ONNX,
    NOT_FOR_ONNX_SCALE,
    ONNX_OPTIONS,
    SCALE_KEYS,
    parse_ipu_split,
    read_config,
)
from popvision_lite.emulator.progress import ProgressBar
from popvision_lite.emulator.run_config import CLI, FIELDS, check_field
from popvision_lite.emulator.run_config_file import read_onnx_config
from popvision_lite.errors import ConfigError, EmulatorError, PopvisionError
from popvision_lite.terminal import terminal_text


def add_arguments(p) -> None:
    """The options ``emulate`` gains for ONNX models (called from cli/emulate.py), from their one definition
    (``onnx_import.config.ONNX_OPTIONS``, which the app's run dialog reads too)."""
    for o in ONNX_OPTIONS:
        p.add_argument(o.flag, metavar=o.metavar, help=o.help.replace("%", "%%"),
                       **({"action": "append"} if o.repeat else {}))


def wants_onnx(args) -> bool:
    """True when ``emulate`` should take the ONNX branch (--onnx, or ``onnx = ...`` in --config)."""
    if getattr(args, "onnx", None):
        return True
    cfg = getattr(args, "config", None)
    if cfg and Path(cfg).is_file():
        try:
            return "onnx" in read_config(cfg)
        except ConfigError:
            return False  # the bundled-model path reports the unreadable file
    return False


def resolve(args) -> dict:
    """Keyword arguments of ``emulate_onnx`` from --config and the command line (command line wins)."""
    from popvision_lite.emulator.onnx_import.loader import parse_dims  # (numpy: imported when used)

    # the file's settings, checked (run_config_file: the reader the desktop app's Load… uses too)
    rc = read_onnx_config(args.config) if getattr(args, "config", None) else {}
    where = f"{args.config}: " if rc else ""
    if getattr(args, "model", None):
        raise ConfigError(f"argument MODEL: give a bundled MODEL or --onnx, not both (got {args.model!r})")
    for k in NOT_FOR_ONNX:
        if getattr(args, k, None):
            raise ConfigError(f"argument --{k.replace('_', '-')}: not used with --onnx (the ONNX file fixes the "
                              "model's structure); leave it out")
    for k in NOT_FOR_ONNX_SCALE:
        if getattr(args, k, None) is not None:
            raise ConfigError(f"argument --{k.replace('_', '-')}: not used with --onnx: an imported model runs as "
                              "one graph over the IPUs of a replica, without the bundled transformers' pipelined "
                              "schedule; place its nodes with --ipus N [--ipu-split NODE,...] and use --replicas, "
                              "--grad-accum, --optimizer ... for training at scale")
    path = args.onnx or rc.get("onnx")  # a path in the file: already resolved beside it
    if not path:
        raise ConfigError(f"{where}field 'onnx': expected a path to an .onnx file")
    source = str(args.config) if rc else None
    out = args.output or (check_field("output", rc["output"], source) if "output" in rc else None)
    if not out:
        raise ConfigError("argument -o/--output: required (or 'output' in the --config file)")
    check_new_file(out)

    def given(k):
        """Field ``k`` from the command line, else from the file, checked by its definition; None if unset."""
        if FIELDS[k].kind == "bool":  # a switch (--training / --inference, --rts ...)
            v = switch_value(args, k)
            if v is not None:
                return check_field(k, v, CLI)
        elif getattr(args, k, None) is not None:  # a value flag: each text checked by the field's definition
            return field_value(args, k)
        return check_field(k, rc[k], source) if k in rc else None

    dims = dict(rc.get("dims") or {})
    dims.update(parse_dims(args.dim))
    kw = dict(path=path, output=out, dims=dims, device=given("device") or "ipu-mk2")
    for k in ("batch", "seq", "ipus", "seed", *SCALE_KEYS):  # the command line wins over the file
        v = given(k)
        if v is not None:
            kw[k] = v
    kw["precision"] = given("precision") or "fp16"
    kw["timing_only"] = bool(given("timing_only"))
    kw["training"] = bool(given("training"))
    if given("recompute"):
        if not kw["training"]:
            raise ConfigError("argument --recompute: only with --training (training = true)")
        kw["recompute"] = True
    loss = getattr(args, "loss_output", None) or rc.get("loss_output")
    if loss is not None:
        if not kw["training"]:
            raise ConfigError("argument --loss-output: only with --training")
        kw["loss_output"] = str(loss)
    split = getattr(args, "ipu_split", None)
    split = parse_ipu_split(split) if split else rc.get("ipu_split")
    if split is not None:
        kw["ipu_split"] = split
    inputs = getattr(args, "inputs", None) or rc.get("inputs")
    if inputs is not None:
        kw["inputs"] = inputs
    if not kw["training"]:
        from popvision_lite.emulator.onnx_import.run import SCALE_DEFAULTS, TRAINING_STATE

        for k in TRAINING_STATE:
            if k in kw and kw[k] != SCALE_DEFAULTS[k]:
                src = f"argument --{k.replace('_', '-')}" if getattr(args, k, None) not in (None, False) \
                    else f"{where}field '{k}'"
                raise ConfigError(f"{src}: only with --training (training = true): an inference run has no "
                                  "gradients to accumulate and no optimizer step")
    return kw


def what_would_fit(run, s: dict) -> str:
    """What would make an ONNX run that does not fit fit, from its own numbers: the fullest tile's excess over
    capacity, and the options of an imported model that lower tile memory."""
    cfg = run.config or {}
    over = s["peak_bytes"] / max(1, s["capacity"])
    tips = [f"the fullest tile needs {over:.2f}x its capacity"]
    if cfg.get("batch") not in (None, 1) or cfg.get("dims"):
        tips.append("a smaller --batch (activations scale with it)")
    tips.append(f"more IPUs (--ipus {2 * int(cfg.get('ipus') or 1) // max(1, int(cfg.get('replicas') or 1))} "
                "splits the nodes by weight bytes)")
    if cfg.get("training"):
        if cfg.get("optimizer", "sgd") != "sgd" and cfg.get("optimizer_state", "onchip") == "onchip":
            tips.append("--optimizer-state offchip")
        if not cfg.get("recompute"):
            tips.append("--recompute (each layer's forward again in the backward pass: fewer saved activations)")
        tips.append("a smaller --batch with --grad-accum keeps the samples per step")
    if cfg.get("precision") == "fp32":
        tips.append("--precision fp16 (half the bytes)")
    return "; ".join(tips)


def onnx_end_of_run_text(s: dict, run, out_path: str, time_split: str) -> str:
    lines = [f"model {Path(run.path).name} (ONNX, {run.num_ops} ops"
             + (", dims " + ", ".join(f"{k}={v}" for k, v in run.dims.items()) if run.dims else "")
             + f"), {run.config.get('precision')}, "
             + ("training step (loss: mean of " + (run.config.get("loss_output") or "the outputs") + ")"
                if run.config.get("training") else "inference") + f", {run.config.get('ipus', 1)} IPU(s)"]
    for c in run.casts:
        lines.append(f"cast: {c}")
    lines.append(f"fits: {'yes' if s['fits'] else 'NO - out of memory'}")
    lines.append(f"peak tile memory: {s['peak_bytes']:,} B on tile {s['peak_tile']} "
                 f"({100 * s['peak_bytes'] / s['capacity']:.0f}% of {s['capacity']:,} B)")
    lines.append(f"total cycles: {s['total_cycles']:,} = {s['seconds'] * 1e3:.3f} ms at "
                 f"{s['clock_hz'] / 1e9:.3f} GHz")
    if not s["fits"]:
        lines.append("throughput: not reported: the configuration does not fit in tile memory; "
                     + what_would_fit(run, s))
    elif getattr(run, "samples_per_second", 0):
        lines.append(f"throughput: {run.samples_per_second:,.1f} samples/s (whole system; a sample = one row of "
                     "the batch dimension)")
    from popvision_lite.analysis.summary import schedule_lines  # (pandas: only once a run has its numbers)

    lines += schedule_lines(run.schedule, s["clock_hz"])
    lines.append(time_split)
    if run.numeric_checks:
        bad = [k for k, v in run.numeric_checks.items() if not v["passed"]]
        outs = {k: v for k, v in run.numeric_checks.items() if not k.startswith("weight:") and k != "intermediates"}
        worst = max(outs.values(), key=lambda v: v["max_rel_err"]) if outs else None
        lines.append(f"numeric checks (outputs and intermediate tensors vs ONNX Runtime, updated weights vs the numpy "
                     f"reference): "
                     f"{len(run.numeric_checks) - len(bad)}/{len(run.numeric_checks)} passed"
                     + (f"; worst output: max abs err {worst['max_abs_err']:.2e} = {worst['max_rel_err']:.2e} of its "
                        f"max, {100 * worst.get('outside_share', 0):.2f}% of elements outside "
                        f"{worst.get('tolerance', '')}" if worst else "")
                     + (f"; FAILED: {', '.join(bad[:5])}" if bad else ""))
        mid = run.numeric_checks.get("intermediates")
        if mid:
            lines.append(f"  intermediate tensors vs ONNX Runtime: {mid['compared'] - mid['failed_count']}/"
                         f"{mid['compared']} within {mid['tolerance']} (worst {mid['worst']}: "
                         f"{mid['max_rel_err']:.2e} of its max)"
                         + (f"; FAILED: {', '.join(f['name'] for f in mid['failed'][:5])}" if mid["failed"] else ""))
        for k in bad:
            if run.numeric_checks[k].get("problem"):
                lines.append(f"  {k}: {run.numeric_checks[k]['problem']}")
    notes = list(getattr(run, "notes", ()) or ())
    lines.extend(f"note: {n}" for n in notes[:8])
    if len(notes) > 8:
        lines.append(f"note: ... {len(notes) - 8} more in the profile (run['notes'])")
    lines.append(f"profile: {out_path}")
    return "\n".join(lines)


def run_onnx(args) -> int:
    from popvision_lite.emulator.onnx_import.loader import OnnxImportError
    from popvision_lite.emulator.onnx_import.run import emulate_onnx
    from popvision_lite.emulator.run_summary import end_of_run_numbers

    prog = "popvision-lite emulate"
    try:
        kw = resolve(args)
    except ConfigError as e:
        print(terminal_text(f"{prog}: error: {e}"), file=sys.stderr)
        return 2
    try:
        result = emulate_onnx(progress=ProgressBar(not args.quiet), **kw)
    except (OnnxImportError, ConfigError, EmulatorError) as e:
        print(terminal_text(f"{prog}: error: {e}"), file=sys.stderr)
        return 2
    except PopvisionError as e:
        print(terminal_text(f"{prog}: error: {e}"), file=sys.stderr)
        return 1
    try:
        split = time_split_line(profile_totals(kw["output"]))
    except PopvisionError as e:  # the file just written cannot be read back
        print(terminal_text(f"{prog}: error: {e}"), file=sys.stderr)
        return 2
    print(terminal_text(onnx_end_of_run_text(end_of_run_numbers(result.profile_data, result), result, kw["output"], split)))
    if not result.fits:
        print(terminal_text(f"{prog}: out of memory: {len(result.oom_report)} tile(s) over capacity; profile written to "
              f"{kw['output']}"), file=sys.stderr)
        print(terminal_text(_why(kw["output"])), file=sys.stderr)
        return 3
    if result.numeric_checks and not all(v["passed"] for v in result.numeric_checks.values()):
        print(terminal_text(f"{prog}: numeric checks against ONNX Runtime failed (see run['numeric_checks'])"), file=sys.stderr)
        return 1
    return 0


def _why(path) -> str:
    """What binds an ONNX run that does not fit (analysis/fit_constraint.py; the fit advisor searches the bundled
    models' placements, not an imported graph's)."""
    from popvision_lite.analysis.fit_constraint import binding_headline
    from popvision_lite.profile.reader import open_profile

    try:
        with open_profile(path) as p:
            return "why: " + binding_headline(p)
    except PopvisionError as e:
        return f"why: (what binds could not be read back: {e})"
