"""Round-4 fuzzer (issue 45): run records, phases, variable intervals and sweep folders.

    python -m bench.fuzz_records                              # 2,000 cases + an strace sample, 2 workers
    python -m bench.fuzz_records --cases 200 --seed 1 --strace 10

Case kinds (``--cases`` split 60 / 35 / 5 %):

* **profile** - a sample profile or old-format fixture whose header ``run`` object or tables are mutated: a
  schedule, op-counts, config, training-state or run key set to a value of the wrong kind, past its bounds, at
  its bounds or random within them; the phases table shifted, stretched, scaled, grown to thousands of rows or
  dropped (rebuilt from a mutated schedule, as for a 2.x file); variable intervals planted.  Each case is read
  like the app reads it (``fuzz_profiles.read_everything``: every table, windows, summaries, the Summary
  analysis), then ``info``, ``info --json``, ``verdict``, ``verdict --json`` and the headless CSV exports
  (summary, ops, steps, verdict) and the Chrome trace run in-process; one case in ``VIEWS_EVERY`` that opens
  also draws every view (``fuzz_surfaces.views``).  Each must succeed or exit 2 with a one-line message naming
  the file; a mutation that breaks a declared kind or bound must be refused.
* **sweep** - a finished sweep folder (two tiny points) with files planted in it: links to a user's file in
  place of ``.sweep.lock`` / ``.commit.lock`` / ``.sweep-run`` / ``sweep.csv`` / ``sweep.json``, FIFOs,
  folders, ``/dev/zero``, ``profiles`` or ``rows`` as links to another folder holding ``.*.tmp`` decoys, rows
  that are FIFOs, links, huge, deeply nested, name other profiles (``/etc/passwd``, ``../``) or hold garbage
  values, profiles that are links, stale temp files.  The sweep is run again (resume; points whose row is
  refused run again on a Dask cluster kept by the worker, with a point function that writes a stored profile)
  and must finish or exit 2 naming the file; afterwards the user's file and the decoy folder are byte for byte
  as they were, nothing exists at a link's missing target, and the results table opens with every profile
  inside the folder.
* **concurrent** - two or three ``popvision-lite sweep`` processes resuming the same folder at once: each exits
  0 or 2 ("another sweep is running"), none with a traceback, and the folder stays consistent.

Every case runs in a worker subprocess (``bench.fuzz_profiles``'s harness: memory cap, per-case timeout, a
crash or hang costs one case).  ``--strace N``: N sweep and N profile cases are run again as command lines under
``strace -f``: no file outside the case folder may be written, created, renamed or removed, and no planted
link's target (the user's file, the decoy folder) may be opened at all.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import fuzz_profiles as fz

ROOT = Path(__file__).resolve().parents[1]
PROFILE_BASES = sorted((ROOT / "sample_profiles").glob("*.pvl")) + [
    ROOT / "tests" / "fixtures" / "v2.1" / "bert_mini_4ipu_pipeline.pvl",
    ROOT / "tests" / "fixtures" / "v2.0" / "bert_tiny_mk2.pvl"]
FAILS = (*fz.FAIL_OUTCOMES, "memory", "cli_bad", "accepted", "escaped", "inconsistent_folder")
MEM_MB = 4096
VIEWS_EVERY = 8
VICTIM = b"precious user data: a sweep must never change, truncate, read or delete this file\n"
DECOYS = (".keep.tmp", ".their.work.tmp", "data.pvl")
TINY = {"hidden": 32, "layers": 2}


# ------------------------------------------------------------------------------------------- hostile values
def _junk(rng: random.Random):
    return rng.choice(["x", "", "1e3", [1], [1, 2, 3], {"a": 1}, None, True, False, -1, -1.5, 0, 0.5, 1e308,
                       -1e308, 10 ** 30, 2 ** 63, 2 ** 64 + 1, float("nan"), float("inf"), [[[[1]]]], "\u202e\x1b[2J",
                       list(range(rng.choice([3, 5000]))), {"k" * 300: 1}])


def _value_for(rng: random.Random, key) -> tuple[object, bool]:
    """(value, must be refused) for a declared ``run_record.Key``."""
    from popvision_lite.profile import run_record as rr

    r = rng.random()
    if r < 0.45:
        v = _junk(rng)
        return v, _breaks(key, v)
    if key.kind in (rr.INT, rr.FLOAT, rr.NUMBER):
        lo, hi = key.lo, key.hi
        cand = [lo, hi, hi + 1, lo - 1, hi * 10, (lo + hi) / 2, rng.uniform(lo, min(hi, 1e6))]
        v = rng.choice(cand)
        if key.kind == rr.INT and isinstance(v, float) and math.isfinite(v):
            v = int(v)
        return v, _breaks(key, v)
    if key.kind in (rr.INTS, rr.FLOATS, rr.INT_PAIRS):
        n = rng.choice([0, 1, 4, 1024, 5000])
        hi = min(key.hi, 2 ** 62)
        item = (lambda: [rng.randint(0, 4), rng.randint(0, 4)]) if key.kind == rr.INT_PAIRS else \
            (lambda: rng.choice([0, 1, hi, hi + 1, -1]))
        v = [item() for _ in range(n)]
        return v, _breaks(key, v)
    if key.kind in (rr.FLOAT_MAP, rr.INT_MAP, rr.INT_MAP_MAP):
        n = rng.choice([0, 1, 3, 65, 300])
        inner = (lambda: {"compute": rng.choice([0, 5, -1, 2 ** 70])}) if key.kind == rr.INT_MAP_MAP else \
            (lambda: rng.choice([0, 0.5, 2.0, 1e7, -1, 1e30]))
        v = {f"term{i}": inner() for i in range(n)}
        return v, _breaks(key, v)
    if key.kind == rr.BOOL:
        v = rng.choice([True, False, 1, "yes"])
        return v, _breaks(key, v)
    if key.kind == rr.TEXT:
        v = rng.choice(["sgd", "none", "\u202eevil\x1b]0;t\x07", "x" * 5000, 5])
        return v, _breaks(key, v)
    return _junk(rng), False


def _breaks(key, v) -> bool:
    """Whether ``v`` breaks ``key``'s declaration (the reader must refuse it)."""
    from popvision_lite.profile import run_record as rr

    if v is None:  # JSON null reads as an absent key (its default), as a missing value does
        return False
    try:
        rr._checked(key, v, "x", ValueError)
    except rr._Bad:
        return True
    except Exception:  # noqa: BLE001 - a nested record's own refusal
        return True
    return False


# ------------------------------------------------------------------------------------------- profile cases
def _record_keys(cls):
    return list(cls.KEYS.values())


def m_record(rng, src, dst):
    """One to three declared keys of one record (schedule, op counts, config, training state, run) mutated."""
    from popvision_lite.profile import run_record as rr
    from popvision_lite.testing.hostile_run import with_run

    which = rng.choice(["schedule", "schedule", "schedule", "op_counts", "config", "training_state", "run"])
    cls = {"schedule": rr.Schedule, "op_counts": rr.OpCountsRecord, "config": rr.ConfigRecord,
           "training_state": rr.TrainingStateIPU, "run": rr.RunRecord}[which]
    keys = [k for k in _record_keys(cls) if k.kind not in (rr.RECORD, rr.RECORDS)]
    changes, refuse = [], False

    def change(run):
        nonlocal refuse
        if which == "run":
            target = run
        elif which == "training_state":
            ts = run.get("training_state")
            if not ts:
                run["training_state"] = ts = [{"ipu": 0, "layers": 1, "params": 10, "fits": True}]
            target = ts[rng.randrange(len(ts))]
        else:
            target = run.get(which)
            if not isinstance(target, dict):
                run[which] = target = {}
        for key in rng.sample(keys, min(len(keys), rng.choice([1, 1, 2, 3]))):
            v, bad = _value_for(rng, key)
            target[key.name] = v
            refuse |= bad
            changes.append(f"{which}.{key.name}={str(v)[:40]}")

    with_run(src, dst, change)
    return "; ".join(changes), refuse


def m_phases(rng, src, dst):
    """The phases table shifted, stretched, scaled, grown or dropped (a 2.x file: rebuilt from the schedule)."""
    import h5py

    from popvision_lite.testing.hostile_run import columns, resize_table, set_column

    shutil.copyfile(src, dst)
    with h5py.File(dst, "r") as f:
        stored = "tables/phases" in f
    if not stored:
        return m_record(rng, src, dst)[0] + " (no phases table: rebuilt)", False
    cols = columns(dst, "phases")
    n = len(cols["phase_id"])
    how = rng.choice(["shift", "stretch", "runs", "grow", "grow_big", "drop", "swap", "zero"])
    if how == "shift":
        st = cols["start_cycle"].copy()
        i = rng.randrange(n)
        st[i] = max(0, int(st[i]) + rng.choice([-5, 5, 10 ** 9, 5 * 10 ** 15]))
        set_column(dst, "phases", "start_cycle", st)
    elif how == "stretch":
        c = cols["cycles"].copy()
        c[rng.randrange(n)] = rng.choice([0, 1, 2 ** 40, 2 ** 52])
        set_column(dst, "phases", "cycles", c)
    elif how == "runs":
        r = cols["runs_per_step"].copy()
        r[rng.randrange(n)] = rng.choice([1, 2, 2 ** 31, 2 ** 52])
        set_column(dst, "phases", "runs_per_step", r)
    elif how in ("grow", "grow_big"):
        m = rng.choice([257, 1000, 3000]) if how == "grow" else rng.choice([10 ** 5, 10 ** 6])
        resize_table(dst, "phases", m, {"phase_id": np.arange(m), "first_step": np.full(m, -1),
                                        "last_step": np.full(m, -1), "stored_runs": np.zeros(m)})
    elif how == "drop":
        with h5py.File(dst, "r+") as f:
            del f["tables/phases"]
        base = dst.with_name(dst.name + ".base")  # with_run copies its source: not onto itself
        dst.replace(base)
        try:
            return m_record(rng, base, dst)[0] + " (phases dropped: rebuilt)", False
        finally:
            base.unlink()
    elif how == "swap" and n > 1:
        for c, v in cols.items():
            if c != "phase_id":
                set_column(dst, "phases", c, v[::-1])
    else:
        set_column(dst, "phases", "cycles", np.zeros_like(cols["cycles"]))
    return f"phases {how}", how in ("grow", "grow_big")


def m_intervals(rng, src, dst):
    """Live intervals planted, inside or outside their variables' ranges."""
    from popvision_lite.testing.hostile_run import columns, resize_table

    shutil.copyfile(src, dst)
    var = columns(dst, "variables")
    if not len(var["var_id"]):
        return "no variables", False
    k = rng.choice([1, 3, 50])
    vid = np.array([rng.randrange(len(var["var_id"])) for _ in range(k)])
    lo, hi = var["first_lstep"][vid], var["last_lstep"][vid]
    a = np.where(lo >= 0, lo, 0) + np.array([rng.choice([0, 0, -1, 1]) for _ in range(k)])
    b = np.maximum(a, np.where(hi >= 0, hi, 0) + np.array([rng.choice([0, 0, 1, 5]) for _ in range(k)]))
    try:
        resize_table(dst, "variable_intervals", k, {"var_id": vid, "first_lstep": np.maximum(a, 0),
                                                    "last_lstep": b})
    except KeyError:
        return "no variable_intervals table (an old file)", False
    return f"{k} intervals", False


PROFILE_MUTATIONS = {"record": (m_record, 6), "phases": (m_phases, 3), "intervals": (m_intervals, 1)}


def profile_cases(folder: Path, n: int, seed: int, start: int, first: int = 0) -> list[dict]:
    """Profile cases ``first`` .. ``n - 1`` (case i depends only on seed and i, so a tail is the campaign's tail)."""
    folder.mkdir(parents=True, exist_ok=True)
    kinds = list(PROFILE_MUTATIONS)
    weights = [PROFILE_MUTATIONS[k][1] for k in kinds]
    out = []
    for i in range(first, n):
        rng = random.Random(f"records:{seed}:{i}")
        kind = rng.choices(kinds, weights)[0]
        src = PROFILE_BASES[i % len(PROFILE_BASES)]
        dst = folder / f"r{i:05d}_{kind}.pvl"
        try:
            what, refuse = PROFILE_MUTATIONS[kind][0](rng, src, dst)
        except Exception as e:  # noqa: BLE001 - a mutation that does not apply to this base
            out.append(dict(id=start + i, kind=f"profile_{kind}", what=f"mutation failed: {e}", path=None))
            continue
        out.append(dict(id=start + i, kind=f"profile_{kind}", what=f"{src.name}: {what}", path=str(dst),
                        refuse=refuse, views=i % VIEWS_EVERY == 0))
    return out


def classify_profile(case: dict) -> tuple[str, str]:
    """A profile case through the reader, the CLI commands and (every VIEWS_EVERY-th case) the views, in this
    worker.  Each export frees its widgets before it returns (gui/headless.py): they once stayed alive in a worker
    that runs no event loop, ~14 MB a case, until seed 45's case 788 passed the 4 GiB cap."""
    outcome, detail = fz.classify(case["path"])
    if outcome == "other_exception" and detail.startswith("MemoryError"):
        return "memory", detail
    if outcome in fz.FAIL_OUTCOMES:
        return outcome, detail
    if outcome == "ok" and case.get("refuse"):
        return "accepted", f"read without a ProfileError: {case['what']}"
    out = case["path"] + ".out"
    cmds = [["info"], ["info", "--json"], ["verdict"], ["verdict", "--json"],
            ["export", "--view", "summary", "-o", out + ".csv"], ["export", "--view", "ops", "-o", out + ".csv"],
            ["export", "--view", "steps", "-o", out + ".csv"], ["export", "--view", "verdict", "-o", out + ".csv"],
            ["export", "--chrome-trace", "-o", out + ".json"]]
    for cmd in cmds:
        res = _cli([cmd[0], case["path"], *cmd[1:]], case["path"])
        if res is not None:
            return res
    if outcome == "ok" and case.get("views"):
        from bench import fuzz_surfaces

        try:
            v_out, v_detail = fuzz_surfaces.views(case["path"])
        except MemoryError as e:
            return "memory", f"views: {e}"
        except Exception as e:  # noqa: BLE001
            from popvision_lite.errors import PopvisionError

            if not isinstance(e, PopvisionError):
                return "other_exception", f"views: {type(e).__name__}: {e}"[:300]
            v_out = "views_refused"
        if v_out not in ("ok", "views_refused"):
            return v_out, v_detail
    return ("refused" if outcome == "profile_error" else "ok"), detail[:200]


def _cli(argv: list[str], path: str):
    """None when ``popvision-lite argv`` exited 0, or 2 with a one-line message naming ``path``; else a failure."""
    import contextlib
    import io

    from popvision_lite.cli import main

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 2
    except MemoryError as e:
        return "memory", f"{argv[0]}: {e}"[:300]
    except Exception as e:  # noqa: BLE001 - a traceback instead of a message
        import traceback

        return "other_exception", f"{' '.join(argv[:1] + argv[2:])}: {type(e).__name__}: {e}"[:300] + \
            traceback.format_exc(limit=-3)[-600:]
    msg = err.getvalue().strip()
    if rc == 0:
        return None
    if rc == 2 and msg and "Traceback" not in msg and (path in msg or "argument" in msg):
        return None
    return "cli_bad", f"{' '.join(argv[:1] + argv[2:])}: exit {rc}: {msg[-300:]}"


# ------------------------------------------------------------------------------------------- sweep cases
def fast_point(spec, profile_path):
    """A sweep point that writes a stored tiny profile instead of emulating (the fuzzer tests the folder, not
    the emulator): the first call in a worker process emulates once, later calls write the same data."""
    import copy

    from popvision_lite.emulator.run_result import RunResult
    from popvision_lite.profile.writer import write_profile
    from popvision_lite.sweep.point import emulate

    global _POINT
    if _POINT is None:
        tmp = Path(tempfile.mkdtemp(prefix="pvl-fuzz-point-")) / "p.pvl"
        _POINT = emulate(spec, str(tmp))
    run = _POINT
    write_profile(profile_path, run.profile_data)
    return RunResult(**{k: copy.copy(getattr(run, k)) for k in ("fits", "total_cycles", "seconds", "profile_data",
                                                                 "samples_per_second", "schedule", "config", "cfg")})


_POINT = None


def _points(batches=(8, 16)):
    from popvision_lite.sweep import grid as g

    base = g.Base(model="mlp", model_args=dict(TINY))
    grid = g.check_grid({"batch": list(batches)}, "fuzz")
    return g.expand(base, grid), list(grid)


def make_template(folder: Path) -> Path:
    """A finished two-point sweep folder (run once, on a local cluster of one worker)."""
    from popvision_lite.sweep import engine

    tpl = folder / "template"
    if (tpl / "sweep.csv").exists():
        return tpl
    pts, names = _points()
    o = engine.run_sweep(pts, tpl, grid_names=names, workers=1, isolate="worker")
    assert o.ok == len(pts), o.rows
    return tpl


PLANTS = ("link_lock", "link_commit", "link_run", "link_csv", "link_meta", "dangling_lock", "fifo_lock", "dir_lock",
          "fifo_run", "zero_run", "fifo_commit", "hardlink_lock", "profiles_link", "rows_link", "row_fifo",
          "row_zero", "row_link", "row_huge", "row_deep", "row_value", "row_profile_out", "row_profile_link",
          "profile_link", "stale_tmp", "link_tmp", "row_bad_json", "meta_fifo")


def plant(rng: random.Random, tpl: Path, case_dir: Path) -> tuple[Path, str]:
    """A copy of the template sweep folder with 1-3 hostile entries; returns (folder, what)."""
    out = case_dir / "sweep"
    shutil.copytree(tpl, out, symlinks=True)
    victim = case_dir / "victim.txt"
    victim.write_bytes(VICTIM)
    decoy = case_dir / "decoy"
    decoy.mkdir(exist_ok=True)
    for d in DECOYS:
        (decoy / d).write_bytes(VICTIM)
    rows = sorted((out / "rows").glob("*.json"))
    picks = rng.sample(PLANTS, rng.choice([1, 1, 2, 3]))
    for what in picks:
        _plant_one(rng, what, out, victim, decoy, case_dir, rows)
    return out, ",".join(picks)


def _replace_with(path: Path, make):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():  # a file, a link, a FIFO an earlier plant left
        path.unlink()
    make(path)


def _row_json(row: Path) -> dict | None:
    """The planted row's JSON object, None when an earlier plant made it unreadable (a FIFO, a link, deep JSON)."""
    if row.is_symlink() or not row.is_file():
        return None
    try:
        d = json.loads(row.read_text())
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    return d if isinstance(d, dict) else None


def _plant_one(rng, what, out, victim, decoy, case_dir, rows):
    if what.startswith("row_") and (out / "rows").is_symlink():
        return  # a row planted through the planted link would be the fuzzer writing into the decoy, not the sweep
    own = {"lock": ".sweep.lock", "commit": ".commit.lock", "run": ".sweep-run", "csv": "sweep.csv",
           "meta": "sweep.json"}
    row = rows[rng.randrange(len(rows))] if rows else out / "rows" / "x.json"
    if what.startswith("link_") and what[5:] in own:
        _replace_with(out / own[what[5:]], lambda p: p.symlink_to(victim))
    elif what == "dangling_lock":
        _replace_with(out / own["lock"], lambda p: p.symlink_to(case_dir / "created-through-link"))
    elif what.startswith("fifo_") and what[5:] in own:
        _replace_with(out / own[what[5:]], os.mkfifo)
    elif what == "meta_fifo":
        _replace_with(out / own["meta"], os.mkfifo)
    elif what == "dir_lock":
        _replace_with(out / own["lock"], os.mkdir)
    elif what == "zero_run":
        _replace_with(out / own["run"], lambda p: p.symlink_to("/dev/zero"))
    elif what == "hardlink_lock":
        _replace_with(out / own["lock"], lambda p: os.link(victim, p))
    elif what in ("profiles_link", "rows_link"):
        sub = out / what.split("_")[0]
        _replace_with(sub, lambda p: p.symlink_to(decoy, target_is_directory=True))
    elif what == "row_fifo":
        _replace_with(row, os.mkfifo)
    elif what == "row_zero":
        _replace_with(row, lambda p: p.symlink_to("/dev/zero"))
    elif what == "row_link":
        data = row.read_bytes() if row.is_file() else b"{}"
        (case_dir / "elsewhere.json").write_bytes(data)
        _replace_with(row, lambda p: p.symlink_to(case_dir / "elsewhere.json"))
    elif what == "row_huge":
        d = _row_json(row)
        if d is not None:
            d["pad"] = "x" * (2 << 20)
            row.write_text(json.dumps(d))
    elif what == "row_deep":
        _replace_with(row, lambda p: p.write_text("[" * 5000 + "]" * 5000))
    elif what == "row_bad_json":
        data = rng.choice([b"", b"\xff\xfe", b'{"status": "ok"', b"NaN", b'{"a": Infinity}'])
        _replace_with(row, lambda p: p.write_bytes(data))
    elif what in ("row_value", "row_profile_out", "row_profile_link"):
        d = _row_json(row)
        if d is None:
            return
        if what == "row_value":
            from popvision_lite.sweep import results

            k = rng.choice([*results.ROW_NUMBERS, "fits", "status", "error", "batch", "config_hash", "profile"])
            d[k] = _junk(rng)
        elif what == "row_profile_out":
            d["profile"] = rng.choice(["/etc/passwd", "../victim.txt", str(victim), "profiles/../../victim.txt"])
        else:
            if not (out / "profiles").is_dir() or (out / "profiles").is_symlink():
                return
            _replace_with(out / "profiles" / "planted.pvl", lambda p: p.symlink_to(victim))
            d["profile"] = "profiles/planted.pvl"
        row.write_text(json.dumps(d))
    elif what == "profile_link":
        profs = sorted((out / "profiles").glob("*.pvl")) if (out / "profiles").is_dir() else []
        if profs:
            _replace_with(profs[0], lambda p: p.symlink_to(victim))
    elif what == "stale_tmp":
        if (out / "profiles").is_dir() and not (out / "profiles").is_symlink():
            (out / "profiles" / ".old.1234.stage.tmp").write_bytes(b"x")
        (out / ".sweep.csv.abcdefgh.tmp").write_bytes(b"x")
    elif what == "link_tmp":
        if (out / "rows").is_dir() and not (out / "rows").is_symlink():
            (out / "rows" / ".link.tmp").symlink_to(victim)


def sweep_cases(folder: Path, n: int, seed: int, start: int, first: int = 0) -> list[dict]:
    return [dict(id=start + i, kind="sweep", what="", path=str(folder / f"s{i:05d}"), seed=seed, n=i)
            for i in range(first, n)]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"


def _decoys(case_dir: Path) -> dict:
    d = case_dir / "decoy"
    return {p.name: _digest(p) for p in sorted(d.iterdir())} if d.is_dir() else {}


def check_after(case_dir: Path, folder: Path) -> str:
    """'' when nothing outside the sweep folder changed and the folder is consistent; else what is wrong."""
    victim = case_dir / "victim.txt"
    if victim.read_bytes() != VICTIM:
        return f"escaped: the user's file changed ({victim.stat().st_size} bytes)"
    if _decoys(case_dir) != {d: hashlib.sha256(VICTIM).hexdigest() for d in DECOYS}:
        return f"escaped: the decoy folder changed: {sorted(_decoys(case_dir))}"
    if (case_dir / "created-through-link").exists():
        return "escaped: a file was created through a planted link"
    csv = folder / "sweep.csv"
    if csv.is_file() and not csv.is_symlink():
        from popvision_lite.sweep.results import open_sweep

        df = open_sweep(folder)
        for p in df["profile"]:
            if p and not Path(p).resolve().is_relative_to(folder.resolve()):
                return f"inconsistent_folder: a row's profile {p} is outside the folder"
    return ""


_CLIENT = None


def _client():
    """A client of a one-worker local cluster, kept for every sweep case of this fuzz worker."""
    global _CLIENT
    if _CLIENT is None:
        from distributed import Client

        from popvision_lite.sweep import engine

        _CLIENT = Client(engine.local_cluster(1))
    return _CLIENT


def _fresh(case: dict, kind: str) -> tuple[Path, random.Random]:
    """The case's own empty folder and its seeded generator."""
    case_dir = Path(case["path"])
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    return case_dir, random.Random(f"{kind}:{case['seed']}:{case['n']}")


def classify_sweep(case: dict) -> tuple[str, str]:
    from popvision_lite.errors import ConfigError
    from popvision_lite.sweep import engine

    case_dir, rng = _fresh(case, "sweep")
    folder, what = plant(rng, Path(case["template"]), case_dir)
    case["what"] = what
    pts, names = _points()
    try:
        o = engine.run_sweep(pts, folder, grid_names=names, client=_client(), isolate="worker",
                             point_fn=fast_point)
        outcome, detail = "ok", f"{o.ok} ok, {o.resumed} resumed, {o.failed} failed; {'; '.join(o.notes)[:150]}"
    except ConfigError as e:
        msg = str(e)
        if "sweep folder" not in msg and "another sweep" not in msg:
            return "cli_bad", f"{what}: refused without naming the folder file: {msg[:200]}"
        outcome, detail = "refused", msg[:200]
    except MemoryError as e:
        return "memory", f"{what}: {e}"
    except Exception as e:  # noqa: BLE001
        import traceback

        return "other_exception", f"{what}: {type(e).__name__}: {e}"[:300] + traceback.format_exc(limit=-3)[-600:]
    bad = check_after(case_dir, folder)
    if bad:
        return bad.split(":")[0], f"{what}: {bad}"
    return outcome, f"{what}: {detail}"


def concurrent_cases(folder: Path, n: int, seed: int, start: int, first: int = 0) -> list[dict]:
    return [dict(id=start + i, kind="concurrent", what="", path=str(folder / f"c{i:05d}"), seed=seed, n=i)
            for i in range(first, n)]


SWEEP_ARGV = ["sweep", "--model", "mlp", "--grid", "batch=8,16", "--grid", "hidden=32", "--grid", "layers=2",
              "--workers", "1", "--isolate", "worker", "-q"]


def classify_concurrent(case: dict) -> tuple[str, str]:
    """2-3 sweeps resuming one folder at once (plus, one time in three, a planted row making one point run)."""
    case_dir, rng = _fresh(case, "concurrent")
    folder, what = plant(rng, Path(case["template"]), case_dir) if rng.random() < 0.3 else (None, "")
    if folder is None:
        folder = case_dir / "sweep"
        shutil.copytree(case["template"], folder)
        (case_dir / "victim.txt").write_bytes(VICTIM)
        (case_dir / "decoy").mkdir()
        for d in DECOYS:
            (case_dir / "decoy" / d).write_bytes(VICTIM)
    k = rng.choice([2, 3])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "popvision_lite.cli", *SWEEP_ARGV[:-1], "-o", str(folder), "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=case_dir)
             for _ in range(k)]
    rcs, errs = [], []
    for p in procs:
        try:
            _out, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return "timeout", f"{k} concurrent sweeps {what}: one did not finish in 240 s"
        rcs.append(p.returncode)
        errs.append(err)
    for rc, err in zip(rcs, errs, strict=True):
        if rc not in (0, 1, 2) or "Traceback" in err or (rc == 2 and "sweep folder" not in err and
                                                          "another sweep" not in err):
            return "cli_bad", f"{k} concurrent sweeps {what}: exit {rcs}: {err[-300:]}"
    bad = check_after(case_dir, folder)
    if bad:
        return bad.split(":")[0], f"{k} concurrent {what}: {bad}"
    return "ok", f"{k} concurrent sweeps {what}: exits {rcs}"


# ------------------------------------------------------------------------------------------- worker, harness
def classify(case: dict) -> tuple[str, str]:
    t0 = time.perf_counter()
    if case["kind"] == "sweep":
        out = classify_sweep(case)
    elif case["kind"] == "concurrent":
        out = classify_concurrent(case)
    else:
        out = classify_profile(case)
    log = os.environ.get(LOG_ENV)
    if log:  # each answer as it comes (a campaign stopped early still has its cases)
        with open(log, "a") as f:
            f.write(json.dumps({"id": case["id"], "kind": case["kind"], "what": case.get("what", "")[:200],
                                "outcome": out[0], "detail": out[1][:300], "s": round(time.perf_counter() - t0, 2),
                                "rss_mb": _rss_mb()}) + "\n")
    return out


LOG_ENV = "PVL_FUZZ_RECORDS_LOG"


def _rss_mb() -> int:
    """This worker's resident memory now, MiB (0 where /proc is not there)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) >> 10 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return 0


def _worker(mem_mb: int) -> int:
    return fz.serve(classify, mem_mb)


# ------------------------------------------------------------------------------------------- strace sample
WRITE_CALLS = re.compile(r"^(\d+\s+)?(openat|open|creat|rename|renameat2?|unlink|unlinkat|mkdir|mkdirat|link|linkat|"
                         r"symlink|symlinkat|truncate|chmod|fchmodat)\(")
PATH_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


def strace_case(argv: list[str], case_dir: Path, log: Path, root: Path) -> str:
    """Run ``popvision-lite argv`` under strace; '' when no write-like call touched a path outside ``case_dir``
    and no planted link's target was opened at all; else the offending lines.  Writes under the system's temp
    folder that are not in the fuzzer's own folder ``root`` are libraries' scratch files (Dask's scratch space,
    ``tempfile``'s writability probe) and allowed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen", PYTHONDONTWRITEBYTECODE="1",
               MPLCONFIGDIR=str(case_dir / ".mpl"))
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=%file", "-o", str(log), sys.executable, "-m",
                    "popvision_lite.cli", *argv], cwd=case_dir, env=env, capture_output=True, timeout=600)
    inside = str(case_dir.resolve())
    targets = [str((case_dir / "victim.txt").resolve()), str((case_dir / "decoy").resolve()),
               str((case_dir / "created-through-link").resolve()), str((case_dir / "elsewhere.json").resolve())]
    bad = []
    for line in log.read_text(errors="replace").splitlines():
        m = WRITE_CALLS.match(line)
        paths = PATH_ARG.findall(line)
        if any(t in p for p in paths for t in targets):
            bad.append(line)
            continue
        if not m or "= -1" in line:
            continue
        call = m.group(2)
        if call in ("openat", "open") and not re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", line):
            continue
        for p in paths:
            if not p or p.startswith(("/dev/null", "/dev/shm", "/proc/self")):
                continue
            full = os.path.normpath(p if p.startswith("/") else os.path.join(inside, p))
            if full == inside or full.startswith(inside + "/"):
                continue
            if full.startswith(tempfile.gettempdir() + "/") and not full.startswith(str(root) + "/"):
                continue  # a library's scratch file, outside every case
            bad.append(line)
    return "\n".join(bad[:5])


def run_strace(folder: Path, template: Path, n: int, seed: int) -> dict:
    """``n`` planted sweep folders resumed by the CLI and ``n`` hostile profiles read by ``info`` / exports, under
    strace; returns counts and the offending calls."""
    if not shutil.which("strace"):
        return {"skipped": "strace is not installed (apt-get install strace)"}
    found, done = [], 0
    for i in range(n):
        case_dir = folder / f"strace_s{i:04d}"
        case_dir.mkdir(parents=True)
        sweep, what = plant(random.Random(f"strace:{seed}:{i}"), template, case_dir)
        bad = strace_case([*SWEEP_ARGV[:-1], "-o", str(sweep), "-q"], case_dir, case_dir / "strace.log", folder.parent)
        done += 1
        if bad:
            found.append(f"sweep {what}: {bad}")
        check = check_after(case_dir, sweep)
        if check:
            found.append(f"sweep {what}: {check}")
    for i in range(n):
        case_dir = folder / f"strace_p{i:04d}"
        case_dir.mkdir(parents=True)
        (case_dir / "victim.txt").write_bytes(VICTIM)
        rng = random.Random(f"strace-p:{seed}:{i}")
        src = PROFILE_BASES[i % len(PROFILE_BASES)]
        path = case_dir / "p.pvl"
        kind = rng.choice(list(PROFILE_MUTATIONS))
        PROFILE_MUTATIONS[kind][0](rng, src, path)
        for argv in (["info", str(path)], ["verdict", str(path)],
                     ["export", str(path), "--view", "summary", "-o", str(case_dir / "s.csv")],
                     ["export", str(path), "--chrome-trace", "-o", str(case_dir / "t.json")]):
            bad = strace_case(argv, case_dir, case_dir / "strace.log", folder.parent)
            done += 1
            if bad:
                found.append(f"profile {kind} {argv[0]}: {bad}")
    return {"runs": done, "violations": len(found), "details": found[:10]}


# ------------------------------------------------------------------------------------------- main
def _parse_first(text: str, ap: argparse.ArgumentParser) -> dict[str, int]:
    out = {}
    for part in filter(None, text.split(",")):
        kind, _, n = part.partition("=")
        if kind not in ("profile", "sweep", "concurrent") or not n.isdigit():
            ap.error(f"--first: {part!r} is not KIND=N with KIND one of profile, sweep, concurrent")
        out[kind] = int(n)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench.fuzz_records", description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--mem-mb", type=int, default=MEM_MB)
    ap.add_argument("--strace", type=int, default=20, help="sweep and profile cases each re-run under strace")
    ap.add_argument("--keep", help="keep the case files in this folder")
    ap.add_argument("--kinds", default="profile,sweep,concurrent",
                    help="the case kinds to run, of the --cases split (each case as in the whole campaign: "
                         "a sweep case n is the same case whatever the other kinds)")
    ap.add_argument("--first", default="", metavar="KIND=N,...",
                    help="start each named kind at its case N (e.g. profile=1140,sweep=210): the tail of a "
                         "campaign that was stopped, each case the same as in the whole campaign")
    ap.add_argument("--log", help="append each case's answer to this file (JSON lines: outcome, seconds, the "
                                  "worker's RSS) as it comes")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args.mem_mb)
    if args.log:
        os.environ[LOG_ENV] = str(Path(args.log).resolve())
    tmp = None
    folder = Path(args.keep) if args.keep else Path(tmp := tempfile.mkdtemp(prefix="pvl-records-"))
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        template = make_template(folder)
        n_prof = int(args.cases * 0.60)
        n_sweep = int(args.cases * 0.35)
        n_conc = args.cases - n_prof - n_sweep
        kinds = set(args.kinds.split(","))
        first = _parse_first(args.first, ap)
        cases = profile_cases(folder / "profiles", n_prof, args.seed, 0, first.get("profile", 0)) \
            if "profile" in kinds else []
        cases += sweep_cases(folder / "sweeps", n_sweep, args.seed, n_prof, first.get("sweep", 0)) \
            if "sweep" in kinds else []
        cases += concurrent_cases(folder / "concurrent", n_conc, args.seed, n_prof + n_sweep,
                                  first.get("concurrent", 0)) if "concurrent" in kinds else []
        for c in cases:
            c["template"] = str(template)
        t1 = time.perf_counter()
        results = fz.run_cases(cases, workers=args.workers, timeout=args.timeout, module="bench.fuzz_records",
                               args=("--mem-mb", str(args.mem_mb)))
        t2 = time.perf_counter()
        st = run_strace(folder / "strace", template, args.strace, args.seed) if args.strace else {}
        t3 = time.perf_counter()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    by, fails = fz.print_outcomes(
        results, FAILS, f"round-4 hostile inputs: {len(results)} cases (seed {args.seed}) made in {t1 - t0:.1f} s, "
        f"run in {t2 - t1:.1f} s by {args.workers} workers (cap {args.mem_mb} MiB, timeout {args.timeout:.0f} s)", 20)
    slow = sorted(results, key=lambda r: -r.get("s", 0))[:3]
    print("slowest: " + "; ".join(f"{r['kind']} {r.get('s', 0):.1f} s" for r in slow))
    if st:
        print(f"strace: {st} ({t3 - t2:.0f} s)")
    n_fail = len(fails) + int(st.get("violations", 0) if st else 0)
    print(f"failures: {n_fail}")
    print("BENCH-RESULT " + json.dumps({"bench": "fuzz_records", "cases": len(results), "seed": args.seed,
                                        "outcomes": dict(by), "failures": n_fail, "strace": st,
                                        "seconds": round(t2 - t1, 1)}))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
