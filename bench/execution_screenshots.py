"""Screenshots of the execution view for docs/screenshots (run under Xvfb, or offscreen).

    Xvfb :98 -screen 0 1600x1000x24 & DISPLAY=:98 python -m bench.execution_screenshots [profile.pvl]

Without a profile a synthetic one (4 IPUs x 1472 tiles x 2,000 steps) is made.  Writes
execution-overview.png (whole run), execution-zoomed.png (a few steps, single tiles, a step
clicked), execution-range.png (a range summary with an op highlighted) and
execution-overview-dark.png.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench.execution_screenshots")
    ap.add_argument("profile", nargs="?")
    ap.add_argument("--out", default="docs/screenshots")
    args = ap.parse_args(argv)
    from PySide6.QtWidgets import QApplication

    import popvision_lite as pvl
    from popvision_lite.analysis import execution as ex
    from popvision_lite.gui import theme
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.execution import ExecutionView

    app = QApplication.instance() or QApplication([])
    theme.init_pyqtgraph()
    theme.apply_theme("light", app)
    path = args.profile
    if path is None:
        from popvision_lite.testing.synthetic import write_synthetic

        path = Path(tempfile.mkdtemp()) / "synthetic-4ipu.pvl"
        write_synthetic(path, num_ipus=4, tiles_per_ipu=1472, num_steps=2000, seed=2)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = Document(pvl.open(path))
    v = ExecutionView(doc)
    v.resize(1550, 950)
    v.show()

    def settle():
        for _ in range(5):
            app.processEvents()
        v.refresh()
        app.processEvents()

    settle()
    v.grab().save(str(out / "execution-overview.png"))
    idx = v.index
    # zoomed in: a handful of steps on the first 48 tiles of IPU 1, one step clicked
    s = int(idx.n * 0.3)
    v.tile_vb.setRange(xRange=(float(idx.start[s]), float(idx.end[s + 9])),
                       yRange=(v.tpi, v.tpi + 48), padding=0)
    settle()
    v.show_step(s + 4)
    v.add_marker(float(idx.start[s + 6]))
    settle()
    v.grab().save(str(out / "execution-zoomed.png"))
    # a range summary with an op's steps highlighted (as if selected in the operations view)
    v.reset_view()
    a = int(idx.n * 0.2)
    v.set_x_range(float(idx.start[a]), float(idx.end[min(idx.n - 1, a + 250)]))
    ops = ex.search_ops(v.profile, "softmax")
    doc.selection.update(source="operations", op_id=int(ops[0]) if len(ops) else None)
    v.select_range(float(idx.start[a + 60]), float(idx.end[a + 160]))
    settle()
    v.grab().save(str(out / "execution-range.png"))
    theme.apply_theme("dark", app)
    v.reset_view()
    settle()
    v.grab().save(str(out / "execution-overview-dark.png"))
    theme.apply_theme("light", app)
    doc.close()
    print("wrote", ", ".join(sorted(p.name for p in out.glob("execution-*.png"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
