"""Round-3 hostile inputs for ``bench.fuzz_hostile``: text payloads in every name, torch traces, ONNX
models, sweep CSVs, and every view / selection / export of each profile case that opens.

Case kinds (each a seeded variation; ``make_cases`` writes the files):

* ``text_payload`` - the base profile with every name (ops, programs, variables, compute sets, liveness
  steps, codelets, plans, types), the model, the target name and a config entry replaced by HTML /
  ``<img src=file://BAIT>`` / ``<a href>`` / ANSI-OSC / formula / RTL / 64 KiB payloads;
* ``issue27`` - a null-shaped ``tile_edges``, an unknown ``target.device`` ('ipu-mk3', '', a path),
  2x10^5 ``programs.name`` categories;
* ``torch_trace`` - gzip bombs, 10^5-deep nesting, 5,000-digit and 1e999 numbers, lists / dicts / null
  where ids and numbers belong, huge shapes, HTML kernel names, FIFO, /dev/zero, random JSON;
* ``onnx`` - local-function bombs, node-count bombs, 1e9 dims, 9..64-dim inputs, FIFO, /dev/zero, random
  and truncated protobuf, huge ``--dim``;
* ``csv`` - sweep.csv with HTML / formula headers and cells, CR/LF cells, a FIFO, path escapes, bad numbers;
  the writer's round trip must neutralise every formula and keep every cell one cell.

A profile case that opens is then shown in every view offscreen (each view built, an op selected, a step
clicked, the op search run, every label / tooltip / text item rendered the way Qt renders it) and its ops
table written as CSV: any exception but a PopvisionError, a payload rendered as markup, a resource requested
by rendered text, or any open of the bait folder (Linux inotify, which sees Qt's C++ reads too) is a failure.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import struct
from pathlib import Path

import numpy as np

PAYLOADS = [
    '<img src="file://{bait}/bait.png">', '<a href="file://{bait}/link.txt">link</a>',
    '<img src="{bait}/bait.png" width=4000 height=4000>', "<qt><img src='file://{bait}/bait.png'></qt>",
    '<!DOCTYPE html><html><body><img src="file://{bait}/bait.png"></body></html>',
    '<table background="file://{bait}/bait.png"><tr><td>t</td></tr></table>',
    '<p style="background-image:url(file://{bait}/bait.png)">p</p>',
    '<link rel="stylesheet" href="file://{bait}/style.css"><style>@import url(file://{bait}/style.css);</style>',
    "&lt;b&gt;x&lt;/b&gt; &amp;", "<b>bold</b>", "<script>alert(1)</script>", "\x1b]0;title\x07\x1b]52;c;ZXZpbA==\x07",
    "\x1b[2J\x1b[H\x9b31m", "\r=cmd|' /C calc'!A0", '=HYPERLINK("http://x")', " \t@SUM(1)", "+1", "-1+1",
    "\u202eevil\u202c", "\x00nul", "x\ny\rz", "<" * 300, "<b>" * 300,
]
TEXT_MARK = "PVLZ"


def _bait_payload(rng, bait: Path) -> str:
    parts = rng.sample(PAYLOADS, k=rng.randint(1, 3))
    return "".join(p.format(bait=bait) for p in parts)


def literals(bait) -> list[str]:
    """Pieces of every payload that markup parsing would remove or change (its tags and entities); a name
    shown literally shows at least one of them."""
    import re

    out = set()
    for p in PAYLOADS:
        text = p.format(bait=bait)
        out.update(t[:24] for t in re.findall(r"<[^<>]*>?|&[a-z]+;", text) if len(t) >= 2)
        out.add(text[:8])  # the payload's start, as a literal display shows it
    return sorted(out)


def make_bait(folder: Path) -> Path:
    """Files hostile text points at; the run asserts nothing ever opens them."""
    bait = Path(folder) / "bait"
    bait.mkdir(parents=True, exist_ok=True)
    png = bait / "bait.png"
    if not png.exists():  # a valid 1x1 PNG, so a reader that follows the link would get an image
        import zlib

        raw = b"\x00\xff\x00\x00"
        chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))  # noqa: E731
        png.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
                        + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
        (bait / "link.txt").write_text("private\n")
        (bait / "style.css").write_text("body { background: red }\n")
    return bait


# ------------------------------------------------------------------------------------------ profiles
def text_payload(rng, src: Path, dst: Path, bait: Path) -> str:
    from bench import fuzz_hostile as fh
    from bench import fuzz_profiles as fz

    shutil.copyfile(src, dst)
    with fz._h5(dst) as f:
        names = [n for n in fh._datasets(f) if n.endswith(".categories") and "kind" not in n
                 and "precision" not in n and "dtype" not in n]
        for n in names:
            cats = list(f[n][()])
            new = [(_bait_payload(rng, bait) + TEXT_MARK + str(i)).encode("utf-8", "surrogatepass")
                   for i in range(len(cats))]
            fh._replace(f, n, data=np.array(new, dtype=f"S{max(map(len, new))}"))
        run = json.loads(f.attrs["run"])
        run["model"] = _bait_payload(rng, bait) + TEXT_MARK
        run.setdefault("config", {})[_bait_payload(rng, bait)] = _bait_payload(rng, bait)
        f.attrs["run"] = json.dumps(run).encode()
        tgt = json.loads(f.attrs["target"])
        tgt["name"] = _bait_payload(rng, bait) + TEXT_MARK
        f.attrs["target"] = json.dumps(tgt).encode()
    return f"{len(names)} name tables, model, target name"


def issue27(rng, src: Path, dst: Path, bait: Path, which: int) -> str:
    import h5py

    from bench import fuzz_hostile as fh
    from bench import fuzz_profiles as fz

    shutil.copyfile(src, dst)
    with fz._h5(dst) as f:
        if which == 0:
            name = rng.choice([n for n in fh._datasets(f) if n.endswith("tile_edges")])
            d = f[name]
            attrs = dict(d.attrs)
            del f[name]
            f.create_dataset(name, data=h5py.Empty(d.dtype))
            for k, v in attrs.items():
                f[name].attrs[k] = v
            return f"{name}: null dataspace"
        if which == 1:
            dev = rng.choice(["ipu-mk3", "", "/etc/passwd", "../../x.toml", "a100-80gb", "<b>ipu</b>"])
            tgt = json.loads(f.attrs["target"])
            tgt["device"] = dev
            f.attrs["target"] = json.dumps(tgt).encode()
            return f"target.device = {dev!r}"
        n = rng.choice([200_000, 50_000])
        cats = [f"prog{i}".encode() for i in range(n)]
        fh._replace(f, "tables/programs/name.categories", data=np.array(cats, dtype="S12"))
        return f"programs.name with {n:,} categories"


# ------------------------------------------------------------------------------------------ torch traces
def torch_trace(rng, folder: Path, i: int, bait: Path) -> tuple[str, str]:
    p = folder / f"t{i:05d}.json"
    kind = rng.choice(["gzip_bomb", "deep", "digits", "inf", "ids", "dims", "html", "types", "random", "ok"])
    ev = {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 5, "args": {"flops": 1e9, "bytes": 1e6}}
    if kind == "gzip_bomb":  # one file (0.5 MB) shared by these cases: making it takes seconds
        p = folder / "bomb.json.gz"
        if not p.exists():
            with gzip.open(p, "wb", compresslevel=9) as f:
                f.write(b'{"traceEvents": [')
                for _ in range(513):
                    f.write(b" " * (1 << 20))
        return str(p), "gzip expanding past 512 MiB"
    if kind == "deep":
        d = rng.choice([65, 1000, 100_000])
        p.write_text('{"traceEvents": [' + "[" * d + "]" * d + "]}")
        return str(p), f"nested {d} deep"
    if kind == "digits":
        ev[rng.choice(["dur", "ts"])] = int("9" * rng.choice([400, 4000]))
        p.write_text(json.dumps({"traceEvents": [ev]}))
        return str(p), "number of thousands of digits"
    if kind == "inf":
        p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": '
                     + rng.choice(["1e999", "NaN", "Infinity", "-1"]) + "}]}")
        return str(p), "non-finite or negative number"
    if kind in ("ids", "types"):
        bad = rng.choice([[1, 2], {"a": 1}, None, "x", True, 1e300])
        op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5, "args": {"External id": bad}}
        ev["args"] = {"External id": bad, "correlation": bad} if kind == "ids" else {"flops": bad, "bytes": bad}
        if kind == "types":
            ev[rng.choice(["name", "dur", "ts", "args"])] = bad
        p.write_text(json.dumps({"traceEvents": [op, ev]}))
        return str(p), f"{kind}: {bad!r}"
    if kind == "dims":
        op = {"ph": "X", "cat": "cpu_op", "name": rng.choice(["aten::mm", "aten::addmm", "aten::conv2d", "aten::bmm"]),
              "ts": 0, "dur": 5, "args": {"External id": 1, "Input Dims": [[10 ** 300] * 4] * 3,
                                          "Input type": ["float"] * 3}}
        ev["args"] = {"External id": 1}
        p.write_text(json.dumps({"traceEvents": [op, ev]}))
        return str(p), "huge input dims"
    if kind == "html":
        ev["name"] = _bait_payload(rng, bait) + TEXT_MARK
        p.write_text(json.dumps({"traceEvents": [ev, dict(ev, ts=10)]}))
        return str(p), "HTML kernel names"
    if kind == "random":
        data = bytearray(json.dumps({"traceEvents": [ev] * 3}).encode())
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        p.write_bytes(bytes(data))
        return str(p), "mutated JSON bytes"
    p.write_text(json.dumps({"traceEvents": [ev]}))
    return str(p), "valid"


# ------------------------------------------------------------------------------------------ ONNX
ONNX_LIMIT = {"functions": "MAX_FUNCTION_DEPTH", "wide": "MAX_NODES", "nodes": "MAX_NODES",
              "dim": "MAX_INPUT_ELEMENTS", "rank": "MAX_INPUT_RANK", "dimarg": "--dim"}

def onnx_model(rng, folder: Path, i: int) -> tuple[str, str, list[str]]:
    from onnx import TensorProto, helper

    p = folder / f"m{i:05d}.onnx"
    kind = rng.choice(["functions", "wide", "nodes", "dim", "rank", "bytes", "truncated", "dimarg", "ok"])
    shape = [1, 4]
    extra: list[str] = []
    funcs, body = [], [helper.make_node("Relu", ["x"], ["y"])]
    if kind in ("functions", "wide"):
        # a chain of local functions, each calling the next twice: deeper than MAX_FUNCTION_DEPTH, or within
        # it (15) but expanding to 2^14 nodes per call, called twice by the graph: past MAX_NODES
        n = rng.randint(17, 40) if kind == "functions" else 15
        for j in range(n):
            callee = f"f{j + 1}" if j + 1 < n else None
            nodes = ([helper.make_node(callee, ["a"], ["m"], domain="local"),
                      helper.make_node(callee, ["m"], ["b"], domain="local")] if callee
                     else [helper.make_node("Relu", ["a"], ["b"])])
            funcs.append(helper.make_function("local", f"f{j}", ["a"], ["b"], nodes, [helper.make_opsetid("", 17)]))
        body = [helper.make_node("f0", ["x"], ["h"], domain="local"), helper.make_node("f0", ["h"], ["y"], domain="local")]
    elif kind == "nodes":
        n = rng.choice([20_001, 40_000])
        names = ["x"] + [f"t{j}" for j in range(n - 1)] + ["y"]
        body = [helper.make_node("Relu", [names[j]], [names[j + 1]]) for j in range(n)]
    elif kind == "dim":
        shape = [1, rng.choice([10 ** 9, 2 ** 31 - 1, 10 ** 12])]
    elif kind == "rank":
        shape = [1] * rng.choice([9, 16, 64])
    elif kind == "dimarg":
        shape = ["batch", 4]
        extra = ["--dim", rng.choice(["batch=99999999999", "batch=" + "9" * 5000, "batch=-1", "batch=0"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    m = helper.make_model(helper.make_graph(body, "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                          functions=funcs)
    m.ir_version = 8
    data = m.SerializeToString()
    if kind == "bytes":
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4096)))
    elif kind == "truncated":
        data = data[:rng.randrange(1, len(data))]
    p.write_bytes(data)
    return str(p), kind, extra


# ------------------------------------------------------------------------------------------ sweep CSV
def sweep_csv(rng, folder: Path, i: int, bait: Path, sample: Path) -> tuple[str, str]:
    from popvision_lite.sweep.results import write_meta

    d = folder / f"s{i:05d}"
    (d / "profiles").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sample, d / "profiles" / "p0.pvl")
    kind = rng.choice(["html", "formula", "crlf", "paths", "numbers", "header"])
    header = ["point", "status", "error", "config_hash", "profile", "samples_per_second", "fits", "chips",
              "device", "model", "batch", "peak_tile_memory_pct", "cost_per_1m_samples_usd", "cost_note"]
    rows = []
    for j in range(3):
        r = {"point": j, "status": "ok" if j < 2 else "failed", "error": "" if j < 2 else "boom",
             "config_hash": f"h{j}", "profile": "profiles/p0.pvl" if j < 2 else "", "samples_per_second": 100.0 * (j + 1),
             "fits": True, "chips": j + 1, "device": "ipu-mk2", "model": "mlp", "batch": 8 * (j + 1),
             "peak_tile_memory_pct": 50.0, "cost_per_1m_samples_usd": 1.0, "cost_note": ""}
        rows.append(r)
    if kind == "html":
        for r in rows:
            r["error"] = _bait_payload(rng, bait) + TEXT_MARK
            r["model"] = _bait_payload(rng, bait) + TEXT_MARK
            r["cost_note"] = _bait_payload(rng, bait)
    elif kind == "formula":
        for r in rows:
            r["model"] = rng.choice(PAYLOADS[13:20])
            r["error"] = rng.choice(PAYLOADS[13:20])
    elif kind == "crlf":
        for r in rows:
            r["error"] = "line1\r=cmd|x\nline2"
    elif kind == "paths":
        rows[0]["profile"] = rng.choice(["../../etc/passwd", "/etc/passwd", "profiles/../../x.pvl", str(bait / "bait.png")])
    elif kind == "numbers":
        rows[0][rng.choice(["samples_per_second", "chips", "batch", "peak_tile_memory_pct"])] = rng.choice(
            ["9" * 5000, "nan", "inf", "-inf", "1e999", "<b>1</b>", ""])
    elif kind == "header":
        header.append(_bait_payload(rng, bait) + TEXT_MARK)
        for r in rows:
            r[header[-1]] = "=1+1"
    import csv

    with open(d / "sweep.csv", "w", newline="") as f:  # written raw: a hostile file, not our writer's output
        w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    write_meta(d, {"grid": {"batch": [8, 16, 24]}})
    return str(d / "sweep.csv"), kind


def make_cases(folder: Path, base: Path, n: int, seed: int, start_id: int, i27_repeats: int = 4) -> list[dict]:
    """``n`` round-3 cases: profiles with payloads and the issue-27 cases (``i27_repeats`` of each of the three,
    each through every view), traces, ONNX models, sweep CSVs, plus special files given to each reader."""
    folder = Path(folder).resolve()
    for sub in ("payload", "traces", "onnx", "csv"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    bait = make_bait(folder)
    sample = Path(__file__).resolve().parents[1] / "sample_profiles" / "mlp_mk2.pvl"
    cases: list[dict] = []

    def add(kind, what, **kw):
        cases.append(dict(id=start_id + len(cases), kind=kind, what=what, bait=str(bait), **kw))

    fifo = folder / "special.fifo"
    if hasattr(os, "mkfifo") and not fifo.exists():
        os.mkfifo(fifo)
    for special in (fifo, Path("/dev/zero"), Path("/dev/urandom"), folder):
        add("torch_trace", f"special {special}", trace=str(special), path=str(special))
        add("onnx", f"special {special}", argv=["emulate", "--onnx", str(special), "-o", str(folder / "o.pvl")])
        add("csv", f"special {special}", sweep=str(special), path=str(special))
    for which in range(3):
        for j in range(i27_repeats):
            rng = random.Random(f"i27:{seed}:{which}:{j}")
            dst = folder / "payload" / f"i27_{which}_{j}.pvl"
            add("issue27", issue27(rng, base, dst, bait, which), path=str(dst), views=True)
    weights = {"text_payload": 1, "torch_trace": 4, "onnx": 3, "csv": 2}
    kinds = list(weights)
    first = len(cases)
    while len(cases) < n:
        i = len(cases)
        rng = random.Random(f"r3:{seed}:{i}")
        # every kind at least once, then drawn by weight
        kind = kinds[i - first] if i - first < len(kinds) else rng.choices(kinds, [weights[k] for k in kinds])[0]
        if kind == "text_payload":
            dst = folder / "payload" / f"p{i:05d}.pvl"
            add(kind, text_payload(rng, base, dst, bait), path=str(dst), views=True)
        elif kind == "torch_trace":
            p, what = torch_trace(rng, folder / "traces", i, bait)
            add(kind, what, trace=p, path=p)
        elif kind == "onnx":
            p, what, extra = onnx_model(rng, folder / "onnx", i)
            add(kind, what, argv=["emulate", "--onnx", p, "--batch", "1", "--timing-only", *extra,
                                  "-o", str(folder / "onnx" / f"o{i}.pvl")],
                want_rc=0 if what == "ok" else 2, field=ONNX_LIMIT.get(what),
                also_rc=(0,) if what == "truncated" else ())  # a cut protobuf can still be a valid model
        else:
            p, what = sweep_csv(rng, folder / "csv", i, bait, sample)
            add(kind, what, sweep=p, path=p)
    return cases


# ------------------------------------------------------------------------------------------ running
_WATCH = {}


def _watch(bait: str):
    from popvision_lite.testing import openwatch

    if bait not in _WATCH and openwatch.available():
        _WATCH[bait] = openwatch.OpenWatch(bait)
    return _WATCH.get(bait)


def classify(case: dict) -> tuple[str, str]:
    """(outcome, detail) of one round-3 case (and of the views of any profile case that opens)."""
    from popvision_lite.errors import PopvisionError

    w = _watch(case["bait"]) if case.get("bait") else None
    if w:
        w.events()
    kind = case["kind"]
    try:
        if kind == "torch_trace":
            out = _trace(case)
        elif kind == "csv":
            out = _csv(case)
        else:
            out = views(case["path"], case.get("bait"))
    except PopvisionError as e:
        out = ("refused", str(e)[:200])
    except MemoryError as e:
        out = ("memory", str(e)[:200])
    except Exception as e:  # noqa: BLE001
        import traceback

        out = ("other_exception", f"{type(e).__name__}: {e}"[:300] + "\n" + traceback.format_exc(limit=-3)[-700:])
    if w:
        touched = w.events()
        if touched:
            return "leak", f"opened {touched[:3]}"
    return out


MUST_REFUSE_TRACE = ("gzip", "nested", "number of", "non-finite", "special")


def _trace(case) -> tuple[str, str]:
    from popvision_lite.analysis.torch_trace import load_torch_trace

    df = load_torch_trace(case["trace"])
    if case["what"].startswith(MUST_REFUSE_TRACE):
        return "accepted", f"a hostile trace ({case['what']}) was read: {len(df)} kernels"
    return "ok", f"{len(df)} kernels"


def _csv(case) -> tuple[str, str]:
    import csv
    import io

    from popvision_lite.profile.csv_export import formula_like, write_csv
    from popvision_lite.sweep.results import open_sweep

    df = open_sweep(case["sweep"])
    folder = Path(df.attrs["folder"])
    for v in df["profile"]:
        if v and not Path(v).resolve().is_relative_to(folder):
            return "leak", f"profile path outside the sweep folder kept: {v}"
    buf = io.StringIO(newline="")
    write_csv(df.drop(columns=["profile"]), buf)
    rows = list(csv.reader(io.StringIO(buf.getvalue(), newline="")))
    if len(rows) != len(df) + 1:
        return "inconsistent", f"{len(df)} rows written as {len(rows) - 1} records"
    for r in rows:
        for cell in r:
            if formula_like(cell) and not _is_number(cell):  # -1 or -inf in a number column is a number
                return "inconsistent", f"formula cell written: {cell[:60]!r}"
    if _sweep_view(df, case.get("bait")):
        return "ok", "read, written back, shown"
    return "ok", "read"


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _app():
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from popvision_lite.gui.app import create_app

    app = create_app()
    if not getattr(app, "_pvl_fuzz_hook", False):
        import sys

        app._pvl_fuzz_hook = True
        app._pvl_slot_errors = []

        def hook(etype, value, tb):
            app._pvl_slot_errors.append(value)

        sys.excepthook = hook
    return app


def _slot_errors(app) -> list:
    errs, app._pvl_slot_errors = app._pvl_slot_errors, []
    return errs


def _settle(app, seconds=0.05):
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.005)


def _release(app) -> None:
    """Delete the widgets closed by the case now (deleteLater needs a pass of the event loop that handles
    deferred deletes), so a worker does not accumulate views case after case."""
    from popvision_lite.gui.app import delete_now

    app.processEvents()
    delete_now()


def _audit(root, bait) -> str:
    """'' or the first problem: rendered text requesting a resource, or a payload shown as markup."""
    from tests.gui.test_text_payload import Audit

    if not bait:
        return ""
    a = Audit(Path(bait), mark=TEXT_MARK, literals=literals(bait))
    a.widget_tree("fuzz", root)
    return a.problems[0] if a.problems else ""


def _sweep_view(df, bait) -> bool:
    from popvision_lite.gui.views.sweep_view import SweepView

    app = _app()
    v = SweepView(df)
    try:
        v.resize(1200, 800)
        v.show()
        _settle(app)
        for r in range(min(3, len(df))):
            v._open_row(r)
        _settle(app)
        problem = _audit(v, bait)
        if problem:
            raise AssertionError(problem)
    finally:
        v.close()
        v.deleteLater()
        _settle(app, 0.01)
        _release(app)
    errs = _slot_errors(app)
    if errs:
        raise errs[0]
    return True


def views(path, bait=None) -> tuple[str, str]:
    """Open ``path``, build every view offscreen, select an op, click a step, search, render every text,
    export the ops table as CSV.  ProfileErrors inside a view are what a damaged file should give."""
    import io

    import numpy as np

    from popvision_lite.errors import PopvisionError
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.state.resolve import select_op
    from popvision_lite.gui.views import VIEW_REGISTRY
    from popvision_lite.profile.csv_export import table_frame, write_csv
    from popvision_lite.profile.reader import open_profile

    app = _app()
    doc = Document(open_profile(path), path)
    built, refused = {}, []
    host = None
    try:
        from PySide6.QtWidgets import QTabWidget

        host = QTabWidget()
        host.resize(1400, 900)
        for key, _title, factory in VIEW_REGISTRY:
            try:
                v = factory(doc)
            except PopvisionError as e:
                refused.append(f"{key}: {str(e)[:80]}")
                continue
            except Exception as e:  # noqa: BLE001
                if type(e).__name__ == "ViewNotAvailable":
                    continue
                raise
            host.addTab(v, key)
            built[key] = v
        host.show()
        for v in built.values():
            host.setCurrentWidget(v)
            ready = getattr(v, "is_ready", None)
            import time

            end = time.perf_counter() + 20
            while callable(ready) and not ready() and time.perf_counter() < end:
                _settle(app, 0.02)
        ops = doc.profile.stored_table("ops")
        if len(ops):
            select_op(doc, int(ops["op_id"].iloc[len(ops) // 2]), "fuzz")
            _settle(app, 0.1)
        ex = built.get("execution")
        if ex is not None:
            idx = np.flatnonzero(ex.index.op_id >= 0)
            if len(idx):
                ex.show_step(int(idx[0]))
            ex.set_search("a")
            ex.jump_match()
        _settle(app, 0.05)
        problem = _audit(host, bait)
        if problem:
            return "leak", problem
        for e in _slot_errors(app):
            if not isinstance(e, PopvisionError):
                raise e
            refused.append(f"slot: {str(e)[:80]}")
        for t in ("ops", "steps", "programs", "variables"):
            try:
                write_csv(table_frame(doc.profile, t), io.StringIO())
            except PopvisionError as e:
                refused.append(f"csv {t}: {str(e)[:60]}")
    finally:
        for v in built.values():
            v.close()
        if host is not None:
            host.close()
            host.deleteLater()
        doc.close()
        _settle(app, 0.01)
        for v in built.values():
            v.deleteLater()
        _release(app)
    return ("views_ok" if not refused else "views_refused"), "; ".join(refused)[:300]
