"""Same pixels before and after a GUI refactor: grab the Execution, Roofline and Liveness views of the sample
profiles and a pod-scale run in fixed states, then compare two such sets pixel by pixel.

    QT_QPA_PLATFORM=offscreen python -m bench.gui_pixels shoot --out out/before
    (change the code)
    QT_QPA_PLATFORM=offscreen python -m bench.gui_pixels shoot --out out/after
    python -m bench.gui_pixels compare out/before out/after

``shoot`` writes one PNG per (profile, view, state); ``compare`` prints, per PNG, the number of pixels that
differ and the bounding box of the difference, and exits 1 when any differs.  The pod-scale run is the one
the GUI tests use (BERT-tiny, 2 pipeline stages x 2 replicas, 16 micro-batches, timing only).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

PROFILES = ("bert_tiny_mk2.pvl", "bert_mini_4ipu_pipeline.pvl", "conv_block_mk2.pvl")
SIZE = (1400, 900)


def _pod_profile(tmp: Path) -> Path:
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model

    path = tmp / "pod.pvl"
    cfg = make_config("bert-tiny", layers=4, batch=4, seq=64, ipus=4, replicas=2, pipeline_stages=2, grad_accum=16,
                      recompute=True)
    run_model(cfg, "ipu-mk2", timing_only=True, profile_path=path)
    return path


def shoot(out: Path, sample_dir: Path) -> int:
    from PySide6.QtWidgets import QApplication

    import popvision_lite as pvl
    from popvision_lite.analysis import execution as ex
    from popvision_lite.gui import theme
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.execution import ExecutionView
    from popvision_lite.gui.views.liveness_view import LivenessView
    from popvision_lite.gui.views.roofline import RooflineView

    app = QApplication.instance() or QApplication([])
    theme.init_pyqtgraph()
    out.mkdir(parents=True, exist_ok=True)
    paths = [sample_dir / n for n in PROFILES] + [_pod_profile(Path(tempfile.mkdtemp()))]

    def settle(v):
        # past the redraw debounce and the line edit's clear-button fade, so that two runs grab the same
        for _ in range(3):
            for _ in range(3):
                app.processEvents()
            time.sleep(0.4)
        app.processEvents()
        if isinstance(v, ExecutionView):
            v.refresh()
        app.processEvents()

    def save(v, name):
        settle(v)
        v.grab().save(str(out / f"{name}.png"))

    for path in paths:
        stem = path.stem
        theme.apply_theme("light", app)
        doc = Document(pvl.open(path))
        v = ExecutionView(doc)
        v.resize(*SIZE)
        v.show()
        save(v, f"{stem}-exec-overview")
        idx = v.index
        s = int(idx.n * 0.3)
        v.tile_vb.setRange(xRange=(float(idx.start[s]), float(idx.end[min(idx.n - 1, s + 9)])),
                           yRange=(0, min(v.ntiles, 48)), padding=0)
        settle(v)
        v.show_step(s + 2)
        v.add_marker(float(idx.start[min(idx.n - 1, s + 4)]))
        save(v, f"{stem}-exec-zoomed")
        v.reset_view()
        ops = ex.search_ops(v.profile, "matmul") if len(ex.search_ops(v.profile, "matmul")) else [0]
        doc.selection.update(source="operations", op_id=int(ops[0]), tiles=list(range(10, 40)))
        a = int(idx.n * 0.2)
        v.select_range(float(idx.start[a]), float(idx.end[min(idx.n - 1, a + 40)]))
        save(v, f"{stem}-exec-range")
        v.search_edit.setText("soft")
        save(v, f"{stem}-exec-search")
        theme.apply_theme("dark", app)
        save(v, f"{stem}-exec-dark")
        theme.apply_theme("light", app)
        v.close()

        r = RooflineView(doc)
        r.resize(*SIZE)
        r.show()
        app.processEvents()
        for _ in range(200):
            if r.is_ready():
                break
            app.processEvents()
            time.sleep(0.05)
        save(r, f"{stem}-roofline")
        if r.analysis is not None and len(r.analysis.ops):
            r.select(int(r.analysis.ops["op_id"].iloc[0]))
            save(r, f"{stem}-roofline-selected")
        r.close()

        lv = LivenessView(doc)
        lv.resize(*SIZE)
        lv.show()
        save(lv, f"{stem}-liveness")
        lv.close()
        doc.close()
    print("wrote", len(list(out.glob("*.png"))), "PNGs to", out)
    return 0


def compare(a: Path, b: Path) -> int:
    import numpy as np
    from PIL import Image

    differ = 0
    for pa in sorted(a.glob("*.png")):
        pb = b / pa.name
        if not pb.exists():
            print(f"{pa.name}: missing in {b}")
            differ += 1
            continue
        ia, ib = np.asarray(Image.open(pa).convert("RGBA")), np.asarray(Image.open(pb).convert("RGBA"))
        if ia.shape != ib.shape:
            print(f"{pa.name}: size {ia.shape[:2]} vs {ib.shape[:2]}")
            differ += 1
            continue
        d = (ia != ib).any(axis=2)
        n = int(d.sum())
        if n:
            ys, xs = np.nonzero(d)
            print(f"{pa.name}: {n} pixels differ, in x {xs.min()}-{xs.max()}, y {ys.min()}-{ys.max()}")
            differ += 1
        else:
            print(f"{pa.name}: identical")
    return 1 if differ else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench.gui_pixels")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shoot")
    s.add_argument("--out", required=True, type=Path)
    s.add_argument("--samples", default="sample_profiles", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    return shoot(args.out, args.samples) if args.cmd == "shoot" else compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
