"""What-if runs without widgets: run settings (from a profile, changed one at a time), the run-config TOML
they become, the emulator child process and where its profile goes.

The emulator runs in a separate PROCESS (``python -m popvision_lite.cli emulate --config RUN.toml -o OUT``)
so a crash in a run cannot take the window down (docs/decisions/0015).  :func:`run_emulation`, on a pool
thread (``gui/workers.py``), starts it, turns its stderr progress lines (``[####....]  30% compiling
(2.2 s)``, ``emulator/progress.py``) into progress, and on Cancel terminates the process and removes any
temporary file it left; the emulator writes the profile atomically, so no partial ``OUT`` ever appears.
The dialogs and menu entries are ``gui/actions/run.py``.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import subprocess
import sys
import tempfile
from pathlib import Path

from popvision_lite.emulator.progress import parse_progress
from popvision_lite.emulator.run_config import FIELDS, RunConfig, check_field
from popvision_lite.emulator.run_config_file import config_toml  # noqa: F401  (the run config a what-if run hands the process)
from popvision_lite.errors import ConfigError, EmulatorError, ProfileError
from popvision_lite.gui.start_page import sample_dirs
from popvision_lite.gui.workers import Cancelled

SETTINGS = tuple(k for k in FIELDS if k != "output")  # what Re-run with… may change: every run-config field
INT_SETTINGS = tuple(k for k in SETTINGS if FIELDS[k].kind == "int")
BOOL_SETTINGS = tuple(k for k in SETTINGS if FIELDS[k].kind == "bool")
NEW_EMULATION = "New emulation"  # the sources messages name: the dialog, then the field
RERUN = "Re-run with"


def default_settings() -> dict:
    """New emulation…'s start when no profile is open: BERT on a Mk2, timing only; every workload field at the
    preset's value."""
    return dict(model="bert", device="ipu-mk2", timing_only=True)


def settings_from_profile(profile) -> dict:
    """The run settings of an open profile (its run config), for Re-run with…."""
    run = dict(profile.run or {})
    cfg = dict(run.get("config") or {})
    s = {k: v for k, v in cfg.items() if k not in ("device", "timing_only")}
    s["model"] = cfg.get("model", run.get("model", "bert"))
    s["device"] = cfg.get("device", profile.target.device)
    s["timing_only"] = bool(cfg.get("timing_only", run.get("timing_only", False)))
    return s


def emulate_argv(config_path, out) -> list[str]:
    return [sys.executable, "-m", "popvision_lite.cli", "emulate", "--config", str(config_path), "-o", str(out)]


def _remove_temp_files(out: Path) -> None:
    folder = out.parent
    for p in folder.glob(f".{out.name}.*.tmp"):
        with contextlib.suppress(OSError):
            p.unlink()


def run_emulation(task, settings: dict, out, argv: list[str] | None = None) -> dict:
    """Worker-thread body: run the emulator process, report its progress, honour Cancel.

    Returns {"path", "returncode", "stdout", "fits"}; exit 3 (out of memory, profile written) is a
    result, other failures raise EmulatorError with the process' last stderr lines.
    """
    out = Path(out)
    if out.exists() and out.is_dir():
        raise ConfigError(f"{out}: is a folder; give a .pvl file name")
    check_not_a_sample(out)
    if not out.parent.is_dir():
        raise ConfigError(f"{out}: folder '{out.parent}' does not exist")
    with tempfile.TemporaryDirectory(prefix="pvl-whatif-") as tmp:
        cfg = Path(tmp) / "run.toml"
        cfg.write_text(config_toml(settings), encoding="utf-8")
        cmd = argv or emulate_argv(cfg, out)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        task.progress(0.0, "starting the emulator process")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        sel = selectors.DefaultSelector()
        sel.register(proc.stderr, selectors.EVENT_READ)
        err_lines: list[str] = []
        buf = b""
        try:
            eof = False
            while not eof:
                if task.cancelled:
                    raise Cancelled()
                for _key, _ in sel.select(timeout=0.1):
                    chunk = os.read(proc.stderr.fileno(), 65536)
                    if not chunk:
                        eof = True
                        break
                    buf += chunk
                    *lines, buf = re.split(rb"[\r\n]", buf)
                    for raw in lines:
                        line = raw.decode("utf-8", "replace")
                        p = parse_progress(line)
                        if p is not None:
                            task.progress(min(p[0], 0.99), p[1])
                        elif line.strip():
                            err_lines.append(line)
            if buf.strip():
                err_lines.append(buf.decode("utf-8", "replace"))
            stdout = proc.stdout.read().decode("utf-8", "replace")
            rc = proc.wait()
        except BaseException:
            _stop(proc)
            _remove_temp_files(out)
            raise
        finally:
            sel.close()
    if rc not in (0, 3):
        tail = "\n".join(err_lines[-8:]) or "(no message)"
        raise EmulatorError(f"emulate {settings.get('model')} on {settings.get('device')} failed "
                            f"(exit {rc}):\n{tail}")
    if not out.exists():
        raise EmulatorError(f"emulate finished (exit {rc}) but wrote no profile at {out}")
    task.progress(1.0, "done")
    return {"path": str(out), "returncode": rc, "stdout": stdout, "fits": rc == 0}


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def change_setting(settings: dict, name: str, text: str) -> dict:
    """A copy of ``settings`` with ``name`` set from ``text``, typed and checked by the field's definition
    (``emulator/run_config.py``, as ``emulate --NAME TEXT``); ConfigError when invalid."""
    if name not in SETTINGS:
        raise ConfigError(f"{RERUN}: setting '{name}': choose one of {', '.join(SETTINGS)}")
    return dict(settings) | {name: check_field(name, str(text), RERUN, text=True)}


def no_numerics(cfg) -> str | None:
    """Why a run of the bundled ModelConfig ``cfg`` computes no numerics whatever ``timing_only`` says (None when
    it can): GPT runs and pipelined, replicated or at-scale BERT runs are composed from stage programs emulated for
    timing only (``host_memory.runs_composed``, the test ``run_model`` follows)."""
    from popvision_lite.emulator.models.host_memory import runs_composed

    if not runs_composed(cfg, False):
        return None
    what = "a GPT run" if cfg.model == "gpt" else "this pipelined, replicated or at-scale BERT run"
    return (f"{what} is composed from its stage programs, each emulated once for timing and memory "
            "(emulator/models/pipeline.py), so its profile is timing-only; numerics need a bundled model on one IPU "
            "without replicas, gradient accumulation, packing, a layer split or a training state other than the "
            "default (BERT, MLP, conv, GNN, ResNet)")


def check_settings(settings: dict, source: str = NEW_EMULATION) -> None:
    """The run ``settings`` checked as ``emulate --config`` will check the TOML they become, before the
    process starts: each field by its definition, then (a bundled model) the combination and the host
    memory it needs.  ConfigError ``"<source>: field '<name>': <problem>"``."""
    given = {k: v for k, v in settings.items() if k in FIELDS and k != "output" and v is not None}
    if settings.get("onnx"):  # the ONNX branch reads the shared fields; the file fixes the rest
        check_onnx_options(settings, source)
        for k, v in given.items():
            if k != "model":  # the imported file's name, not a bundled model
                check_field(k, v, source)
        return
    cfg = RunConfig.from_mapping(given, source).model_config()
    why = None if settings.get("timing_only", True) else no_numerics(cfg)
    if why:  # the run would be timing-only whatever was asked (issue 46: it was, without a word)
        raise ConfigError(f"{source}: field 'timing_only': off is not possible: {why}")


def check_output(out, source: str = NEW_EMULATION) -> None:
    """The profile file a run will write, refused before the run starts as ``emulate -o`` refuses it
    (``atomic_io.check_writable``: a folder, a device, a missing or read-only folder), and never in the bundled
    samples folder.  ConfigError ``"<source>: field 'output': <problem>"``."""
    from popvision_lite.atomic_io import check_writable

    where = f"{source}: field 'output'"
    if not str(out or "").strip():
        raise ConfigError(f"{where}: give a profile file name (.pvl)")
    try:
        check_not_a_sample(out)
        check_writable(out, example="run.pvl")
    except (ConfigError, ProfileError) as e:
        raise ConfigError(f"{where}: {e}") from None


def check_onnx_options(settings: dict, source: str = NEW_EMULATION) -> None:
    """An ONNX run's own settings checked as the command line checks them: the model and inputs files exist
    (``loader.check_model_path``, the loader's first check), the symbolic dims within their bounds."""
    from popvision_lite.emulator.onnx_import.loader import check_dim, check_model_path

    for key, what, suffix in (("onnx", "ONNX model", ".onnx"), ("inputs", "input arrays", ".npz")):
        if settings.get(key):
            try:
                check_model_path(settings[key], what, suffix)
            except ConfigError as e:
                raise ConfigError(f"{source}: field '{key}': {e}") from None
    for name, value in (settings.get("dims") or {}).items():
        check_dim(name, value, f"{source}: field 'dims'")


def _in_samples_folder(path) -> bool:
    """True when ``path`` is (in) one of the bundled sample folders."""
    try:
        p = Path(path).resolve()
    except OSError:
        return False
    return any(p == d or d in p.parents for d in sample_dirs())


def default_output_folder(last_dir=None) -> Path:
    """Where a new profile goes by default: ``last_dir`` when it is a writable folder that is not the
    bundled samples folder, else the user's documents folder, home, or the temp folder (a new-emulation
    dialog opened after a sample defaulted to sample_profiles/, next to the bundled files)."""
    from PySide6.QtCore import QStandardPaths

    cands = [last_dir] if last_dir else []
    cands += [QStandardPaths.writableLocation(QStandardPaths.DocumentsLocation), str(Path.home()),
              tempfile.gettempdir()]
    for c in cands:
        if not c:
            continue
        d = Path(str(c))
        if d.is_dir() and os.access(d, os.W_OK) and not _in_samples_folder(d):
            return d
    return Path(tempfile.gettempdir())


def free_path(folder, stem: str, suffix: str = ".pvl") -> Path:
    """``folder/stem.pvl``, or ``stem_2.pvl``, ``stem_3.pvl`` ... : a name nothing has yet (``suffix`` "" for a
    folder's name)."""
    p = Path(folder) / f"{stem}{suffix}"
    i = 2
    while p.exists():
        p = Path(folder) / f"{stem}_{i}{suffix}"
        i += 1
    return p


def check_not_a_sample(out) -> None:
    """ConfigError when ``out`` is a file in the bundled samples folder (never overwrite one)."""
    if _in_samples_folder(out):
        raise ConfigError(f"{out}: is in the bundled samples folder; choose another folder for new profiles")


def rerun_path(original, name: str, value) -> Path:
    original = Path(original)
    v = {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
    if isinstance(v, list | tuple):  # layer_split 3,7,7,7 -> 3-7-7-7
        v = "-".join(f"{x:g}" for x in v)
    stem = f"{original.stem}_{name}-{v}"
    folder = original.parent if os.access(original.parent, os.W_OK) else Path(tempfile.gettempdir())
    if _in_samples_folder(folder):  # a re-run of a bundled sample does not go next to the samples
        folder = default_output_folder()
    p = folder / f"{stem}.pvl"
    i = 2
    while p.exists():
        p = folder / f"{stem}_{i}.pvl"
        i += 1
    return p
